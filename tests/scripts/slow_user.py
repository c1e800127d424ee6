"""Test-only locustfile: the suite's user with a blocking cost added to each request's preparation.

Why: ``tests/test_client_lag.py`` needs a client that is slow where a real one can be, between a stream's end
and the next send (choosing and building the next request; the record and books now wait until after the
sends), without a knob in the product. The cost blocks the whole process (the original ``time.sleep``, not
gevent's), as CPU-bound work does, without using a core.
"""

from __future__ import annotations

from typing import Any

from gevent import monkey

# the suite's options, hooks and shape (the module, so its user is not ours too)
import specbench.locustfiles.sglang as suite
from specbench.locustfiles.user import InFlight
from specbench.shapes.rate import RateLadder

__all__ = ["RateLadder", "SlowUser"]

COST_S = 0.008  # per request: 10 users ending in one step take 80 ms to get their next requests out
_blocking_sleep = monkey.get_original("time", "sleep")


class SlowUser(suite.SGLangUser):
    def _prepare(self, ctx: Any, scheduled_s: Any, row: Any) -> tuple[str, dict, dict, InFlight]:
        _blocking_sleep(COST_S)
        return super()._prepare(ctx, scheduled_s, row)
