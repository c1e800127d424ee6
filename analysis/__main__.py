"""Entry point for ``python -m specbench.analysis``.

SIGINT, SIGTERM and SIGHUP end the command as Ctrl-C does (one line, exit 130, never a traceback), SIGINT too
where it was ignored at start (a background job of a script). Installed here, for the command only: ``main``
also runs inside other processes (``specbench summarize``, tests), whose signals are theirs.
"""

import sys

from specbench.contract import interrupts

interrupts.install()
try:  # the import takes most of a second: an interrupt during it ends the command the same way
    from specbench.analysis.cli import main
except KeyboardInterrupt as exc:
    print(f"interrupted ({exc.args[0] if exc.args else 'SIGINT'})", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
