"""SGLang's acceptance length over a step's window from its counters, not its gauge (issue #39).

SGLang defines the acceptance length as output tokens per verify pass. Its gauge ``sglang:spec_accept_length`` is
that figure over the scheduler's last log window, one series per data-parallel rank; a mean of its readings weighs
every log window and every rank alike, and a rank with nothing to do reads 0. Its counters
``sglang:generation_tokens_total`` and ``sglang:spec_verify_calls_total`` are counted as each request finishes, so
the change of one over the change of the other between two samples is the length over exactly the requests that
finished in between, every request weighed by its passes, whatever the ranks.

A real emulator on loopback runs the ``sglang-0.5.23-dp2-idle`` vintage (two DP ranks, every request sent to the
first: the second's live gauges read 0) and a short real Locust run of the suite samples its ``/metrics``. The
counters are updated in ledger order, so the tokens a sample had counted are a prefix of the ledger; each step's
acceptance length must equal the ledger's tokens / verify passes over the requests between the window's first and
last sample. Before the suite read SGLang's counters it took the mean of the nonzero gauge readings, which the idle
rank halves.
"""

from __future__ import annotations

from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
import requests

from specbench.analysis import load_run, summarize_run
from specbench.analysis.records.server_side import server_accept_source
from specbench.contract.server_metrics import parse_metrics
from specbench.emulator.metrics import Metrics
from specbench.emulator.metrics_render import render
from specbench.emulator.profile import load_profile
from specbench.emulator.scheduler import Scheduler, WindowGauges
from tests.conftest import FAST_LADDER, runs_on_profiles

pytestmark = pytest.mark.slow

ARGS = ("--ladder", "2,6", "--max-tokens", "48", "--min-requests", "14", "--server-metrics-interval", "0.2",
        *FAST_LADDER)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sglang_accept")
    profile = root / "idle.yaml"
    profile.write_text("base: eagle3\nvintage: sglang-0.5.23-dp2-idle\n", encoding="utf-8")
    return runs_on_profiles(root, {"idle": profile}, ARGS, speed=20, timeout=150)


def test_the_idle_rank_reads_zero_on_the_gauge() -> None:
    """The emulator's wire: one series per DP rank, the idle one at 0 while the other speculates."""
    profile = load_profile("eagle3", overrides={"vintage": "sglang-0.5.23-dp2-idle"})
    scheduler = Scheduler(profile)
    scheduler.window = WindowGauges(running=3, spec_accept_length=2.5)
    text = render(Metrics(profile, scheduler))
    lines = [line for line in text.splitlines() if line.startswith("sglang:spec_accept_length{")]
    assert len(lines) == 2
    assert any('dp_rank="0"' in line and line.endswith(" 2.5") for line in lines), lines
    assert any('dp_rank="1"' in line and line.endswith(" 0.0") for line in lines), lines
    assert parse_metrics(text, 0.0)["values"]["running"] == 3  # the busy rank's batch, not split with the idle one


def test_step_acceptance_is_the_ledger_tokens_per_verify_pass(run: dict[str, Any]) -> None:
    data = load_run(run["idle"])
    summary = summarize_run(data)
    done = [e for e in run["idle_ledger"] if e["status"] == 200]
    assert done and all(e["spec"] for e in done)
    tokens = [0, *accumulate(e["completion_tokens"] for e in done)]
    passes = [0, *accumulate(e["spec"]["spec_verify_ct"] for e in done)]
    assert len(summary.rows) == 2
    for row in summary.rows:
        inside = [s for s in data.server_samples if row.window_start_s <= s["t_s"] <= row.window_end_s]
        assert len(inside) >= 3, row.target_c
        first, last = inside[0], inside[-1]
        k0, k1 = (tokens.index(int(s["values"]["generation_tokens_total"])) for s in (first, last))
        assert k1 - k0 >= 3, row.target_c
        assert [s["values"]["spec_verify_total"] for s in (first, last)] == [passes[k0], passes[k1]]
        truth = (tokens[k1] - tokens[k0]) / (passes[k1] - passes[k0])
        assert server_accept_source(inside) == (pytest.approx(truth, rel=1e-12), "token_counters")
        assert row.server_accept_length == pytest.approx(truth, rel=1e-12), (row.target_c, truth)
        # What the gauge says over the same window: the idle rank's 0 halves every reading.
        gauge = [s["values"]["accept_length"] for s in inside if s["values"].get("accept_length", 0) > 0]
        assert gauge and sum(gauge) / len(gauge) < 0.75 * truth, (gauge, truth)


def test_the_counters_are_summed_over_ranks_when_each_rank_writes_its_own() -> None:
    """Where a release labels the counters with ``dp_rank``, the ranks add up (the idle one adds 0)."""
    text = "\n".join([
        "# TYPE sglang:generation_tokens_total counter",
        'sglang:generation_tokens_total{dp_rank="0",model_name="m"} 300.0',
        'sglang:generation_tokens_total{dp_rank="1",model_name="m"} 0.0',
        "# TYPE sglang:spec_verify_calls_total counter",
        'sglang:spec_verify_calls_total{dp_rank="0",model_name="m"} 100.0',
        'sglang:spec_verify_calls_total{dp_rank="1",model_name="m"} 0.0',
        "# TYPE sglang:spec_accept_length gauge",
        'sglang:spec_accept_length{dp_rank="0",model_name="m"} 3.0',
        'sglang:spec_accept_length{dp_rank="1",model_name="m"} 0.0',
    ]) + "\n"
    later = text.replace(" 300.0", " 600.0").replace(" 100.0", " 200.0")
    samples = [parse_metrics(text, 1.0), parse_metrics(later, 2.0)]
    assert server_accept_source(samples) == (3.0, "token_counters")


def test_the_emulator_counts_verify_passes_with_the_tokens(emulator, tmp_path: Path) -> None:
    """Both counters move together when a request finishes: a read between requests has whole requests only."""
    profile = tmp_path / "p.yaml"
    profile.write_text("base: eagle3\nvintage: sglang-0.5.23-dp2-idle\n", encoding="utf-8")
    emu = emulator(str(profile))
    for _ in range(3):
        requests.post(emu.url + "/generate", json={"text": "hello there", "sampling_params": {"max_new_tokens": 20}},
                      timeout=30).raise_for_status()
    values = parse_metrics(requests.get(emu.url + "/metrics", timeout=10).text, 0.0)["values"]
    truth = requests.get(emu.url + "/_emulator/requests", timeout=10).json()
    assert values["generation_tokens_total"] == sum(e["completion_tokens"] for e in truth)
    assert values["spec_verify_total"] == sum(e["spec"]["spec_verify_ct"] for e in truth)
