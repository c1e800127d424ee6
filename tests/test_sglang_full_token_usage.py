"""KV-cache use on a hybrid SGLang model: the full-attention pool, not the fullest pool (issue #39).

SGLang's ``sglang:token_usage`` is the maximum over its memory pools (full attention, sliding window, Mamba state)
on hybrid models; releases with ``sglang:full_token_usage`` export the full-attention KV pool alone. The emulator's
``sglang-hybrid-swa`` vintage exports both, its sliding-window pool filling twice as fast. The suite's
``kv_cache_usage`` takes ``full_token_usage`` where it is exported (``PREFERRED_NAMES``); before, it read
``token_usage``, the sliding-window pool's figure here.
"""

from __future__ import annotations

import pytest

from specbench.contract.server_metrics import parse_metrics
from specbench.emulator.metrics import Metrics
from specbench.emulator.metrics_render import render
from specbench.emulator.profile import load_profile
from specbench.emulator.scheduler import Scheduler, WindowGauges


def _values(vintage: str, share: float) -> dict[str, float]:
    profile = load_profile("eagle3", overrides={"vintage": vintage})
    scheduler = Scheduler(profile)
    scheduler.window = WindowGauges(running=2, kv_used_tokens=int(profile.max_total_num_tokens * share))
    return parse_metrics(render(Metrics(profile, scheduler)), 0.0)["values"]


def test_full_attention_pool_is_the_kv_use() -> None:
    assert _values("sglang-hybrid-swa", 0.3)["kv_cache_usage"] == pytest.approx(0.3, abs=1e-6)


def test_token_usage_is_still_read_where_no_full_pool_gauge_is_exported() -> None:
    assert _values("sglang-0.5.23", 0.3)["kv_cache_usage"] == pytest.approx(0.3, abs=1e-6)
