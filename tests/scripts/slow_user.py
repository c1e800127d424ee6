"""Test-only locustfile: the suite's user with a blocking cost added to each request's end-of-request work.

Why: ``tests/test_client_lag.py`` needs a client that is slow where a real one can be (record, books, next
prompt), without a knob in the product. The cost blocks the whole process (the original ``time.sleep``, not
gevent's), as CPU-bound work does, without using a core.
"""

from __future__ import annotations

from typing import Any

from gevent import monkey

import locustfiles.sglang as suite  # the suite's options, hooks and shape (the module, so its user is not ours too)
from locustfiles.user import InFlight
from shapes.rate import RateLadder

__all__ = ["RateLadder", "SlowUser"]

COST_S = 0.008  # per request: 10 users ending in one step take 80 ms to get their next requests out
_blocking_sleep = monkey.get_original("time", "sleep")


class SlowUser(suite.SGLangUser):
    def _record(self, ctx: Any, req: InFlight) -> Any:
        _blocking_sleep(COST_S)
        return super()._record(ctx, req)
