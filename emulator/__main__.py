"""``python -m specbench.emulator``: see ``emulator.cli``."""

import sys

from .cli import main

sys.exit(main())
