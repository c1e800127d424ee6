"""A server command's guardian: when ``specbench`` ends, however it ends, the server's whole group ends too.

A user's server runs in its own session (``specbench.launch``), so a signal to specbench's process group never
reaches it, and the kernel's parent-death signal (``contract.lifecycle``) reaches only its first process, not
the workers a launcher script forks. This small process is specbench's child and dies with it (SIGTERM from
the kernel); on that SIGTERM it stops the server's group as ``ServerCommand.stop`` does
(``contract.lifecycle.stop_group``): SIGTERM, then SIGKILL to what is left after the stop timeout.

    python -m specbench.guardian PGID STOP_TIMEOUT_S [PARENT_PID]
"""

from __future__ import annotations

import contextlib
import signal
import sys
from types import FrameType

from specbench.contract.lifecycle import die_with_parent, stop_group


def main(argv: list[str]) -> int:
    pgid, timeout_s = int(argv[0]), float(argv[1])
    parent = int(argv[2]) if len(argv) > 2 else None  # specbench's pid: it may be gone before this line runs

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        stop_group(pgid, timeout_s)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    for sig in (signal.SIGINT, signal.SIGHUP):  # a terminal's Ctrl-C is specbench's to handle, in order
        signal.signal(sig, signal.SIG_IGN)
    die_with_parent(signal.SIGTERM, parent)
    while True:
        with contextlib.suppress(InterruptedError):
            signal.pause()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
