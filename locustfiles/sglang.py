"""Locustfile: streaming LLM load against SGLang, vLLM or llama.cpp, walked up a concurrency ladder
(or, with ``--rate-ladder``, a ladder of request rates in open loop).

    locust -f locustfiles/sglang.py --headless --host http://127.0.0.1:30000 --label baseline
    locust -f locustfiles/sglang.py                # web UI; with no --host the built-in emulator starts

Every finished request becomes one line of RUN_DIR/records.jsonl; every ladder step one line of
RUN_DIR/steps.jsonl; ``python -m specbench.analysis summarize RUN_DIR`` turns them into tables.
"""

from __future__ import annotations

import signal
from typing import Any

from locust import events

from specbench.contract.lifecycle import forked_children_die_with_parent
from specbench.locustfiles import hooks
from specbench.locustfiles.user import LLMUser
from specbench.shapes.rate import RateLadder  # the concurrency ladder, or the rate ladder with --rate-ladder

__all__ = ["RateLadder", "SGLangUser"]

# Locust's --processes workers are forked after this import: each ends with its master, even a SIGKILLed one.
forked_children_die_with_parent(signal.SIGKILL)


class SGLangUser(LLMUser):
    """One streamed request at a time, sent as soon as the previous one ends."""


@events.init_command_line_parser.add_listener
def _options(parser: Any, **_kw: Any) -> None:
    hooks.add_options(parser)


@events.init.add_listener
def _init(environment: Any, **_kw: Any) -> None:
    hooks.install(environment)
