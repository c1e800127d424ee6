"""Test-only locustfile: the suite's user in a process whose event loop is blocked 30 ms in every 60 (or
``SPECBENCH_TEST_BLOCK_S`` in every twice that).

Why: ``tests/test_client_lag.py`` needs a load process that reads ready streams late, as one busy with other
work (a saturated process, a slow hook) does, without a knob in the product. A greenlet sleeps with the
original ``time.sleep`` (blocking the whole process without using a core) after every as long of gevent time.
"""

from __future__ import annotations

import os

import gevent
from gevent import monkey

# the suite's options, hooks and shape (the module, so its user is not ours too)
import specbench.locustfiles.sglang as suite
from specbench.shapes.rate import RateLadder

__all__ = ["BlockedLoopUser", "RateLadder"]

BLOCK_S = float(os.environ.get("SPECBENCH_TEST_BLOCK_S", "0.03"))  # a test may block longer than a decode step
_blocking_sleep = monkey.get_original("time", "sleep")
_blocker: gevent.Greenlet | None = None


def _block_forever() -> None:
    while True:
        gevent.sleep(BLOCK_S)
        _blocking_sleep(BLOCK_S)


class BlockedLoopUser(suite.SGLangUser):
    def on_start(self) -> None:
        global _blocker
        if _blocker is None:
            _blocker = gevent.spawn(_block_forever)
        super().on_start()
