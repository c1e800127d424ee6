"""Acceptance per draft position, end to end against the emulator (which knows every verify pass).

Two short real Locust runs of the ``eagle3`` profile (3 draft positions) sample ``/metrics`` every 0.2 s: one
on the vLLM wire with two engines (``vllm-0.33``: per-position counter exported, one series per engine and
position), one on SGLang's (no such counter). The vLLM run's per-step rates must equal the ledger's truth for
the very passes between the first and last sample inside each window. The counters are updated when a request
finishes, in ledger order, so the passes a sample had counted are a prefix of the ledger: the drafts counter's
value names the prefix (each finished request adds its verify passes, so the prefix sums only rise), and the
rates are then compared exactly with per-position counts rebuilt here from each request's histogram of accepted
drafts. Those prefixes must also agree in time with the samples (a request counted between two samples finished
while the sampler was between sending the first GET and reading the last answer). The comparison of the two runs
(the SGLang one standing as the other side) must show the rates on the vLLM side and say that the SGLang server
does not export them, in the terminal text, report.md and comparison.json.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis import compare_runs, load_run, render_comparison, render_summary_table, summarize_run
from specbench.analysis.outputs import write_comparison_outputs
from specbench.analysis.records.server_side import ACCEPT_BY_POSITION
from specbench.analysis.reporting.serialize import comparison_json
from tests.conftest import FAST_LADDER, runs_on_profiles

pytestmark = pytest.mark.slow

POSITIONS = 3  # eagle3's num_steps
ARGS = ("--ladder", "2,8", "--max-tokens", "48", "--min-requests", "16", "--server-metrics-interval", "0.2",
        *FAST_LADDER)
# A request's finished_s is taken in the same instant its record is counted (no switch in between), and the server
# renders /metrics while the sampler waits for the answer (t_s is the wait's middle, read_s its length, rounded to
# the microsecond): one millisecond covers the rounding.
SLACK_S = 0.001


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("accept_by_position")
    profiles: dict[str, Path] = {}
    for name, vintage in (("vllm", "vllm-0.33"), ("sglang", "sglang-0.5.23")):
        profiles[name] = root / f"{name}.yaml"
        profiles[name].write_text(f"base: eagle3\nvintage: {vintage}\n", encoding="utf-8")
    return runs_on_profiles(root, profiles, ARGS, speed=20, timeout=120)


def _per_position(histogram: list[int]) -> list[int]:
    """Passes that accepted each position: a pass that accepted a drafts accepted positions 0..a-1."""
    return [sum(n for accepted, n in enumerate(histogram) if accepted > i) for i in range(POSITIONS)]


def _counted(entries: list[dict[str, Any]]) -> list[tuple[int, list[int], float]]:
    """(verify passes, accepted per position, finished_s) of each request, in the order the counters took them."""
    return [(e["spec"]["spec_verify_ct"], _per_position(e["spec"]["spec_correct_drafts_histogram"]), e["finished_s"])
            if e["status"] == 200 and e["spec"] else (0, [0] * POSITIONS, e["finished_s"]) for e in entries]


def _prefix(verify_sums: list[int], value: float) -> int:
    """How many ledger records the drafts counter had counted when it read ``value``."""
    assert value in verify_sums, f"drafts counter {value} is no prefix of the ledger"
    return verify_sums.index(int(value))


def test_rates_equal_the_ledger_for_the_same_passes(runs: dict[str, Any]) -> None:
    run = load_run(runs["vllm"])
    summary = summarize_run(run)
    counted = _counted(runs["vllm_ledger"])
    verify_sums = [0, *accumulate(v for v, _, _ in counted)]
    pos_sums = [[0] * POSITIONS, *accumulate((p for _, p, _ in counted),
                                              lambda a, b: [x + y for x, y in zip(a, b, strict=True)])]
    assert len(summary.rows) == 2
    for row in summary.rows:
        inside = [s for s in run.server_samples if row.window_start_s <= s["t_s"] <= row.window_end_s]
        assert len(inside) >= 3, row.target_c
        first, last = inside[0], inside[-1]
        k0, k1 = (_prefix(verify_sums, s["values"]["spec_verify_total"]) for s in (first, last))
        passes = verify_sums[k1] - verify_sums[k0]
        assert passes > 20, row.target_c
        truth = [(b - a) / passes for a, b in zip(pos_sums[k0], pos_sums[k1], strict=True)]
        rates = row.server_accept_by_position
        assert rates is not None and len(rates) == POSITIONS
        assert list(rates) == pytest.approx(truth, rel=1e-12), row.target_c
        # The prefixes are the same window in time: what was counted between the samples finished between them.
        earliest, latest = first["t_s"] - first["read_s"] / 2 - SLACK_S, last["t_s"] + last["read_s"] / 2 + SLACK_S
        assert all(earliest <= finished <= latest for _, _, finished in counted[k0:k1]), row.target_c
        # Position i+1 is only accepted after i was: the rates never rise; their sum is the accepted drafts per pass.
        assert all(later <= earlier for earlier, later in pairwise(rates)), rates
        assert rates[-1] > 0 and rates[0] < 1
        assert sum(rates) == pytest.approx(row.server_accept_length - 1, rel=1e-9)
    text = render_summary_table(summary)
    assert "accept by position" in text and ACCEPT_BY_POSITION not in text
    assert re.search(r"\b0\.\d\d/0\.\d\d/0\.\d\d\b", text), text


def test_a_server_without_the_counter_says_so(runs: dict[str, Any], tmp_path: Path) -> None:
    sglang = summarize_run(load_run(runs["sglang"]))
    assert all(r.server_samples and r.server_accept_by_position is None for r in sglang.rows)
    assert f"Not reported by this server: {ACCEPT_BY_POSITION}" in render_summary_table(sglang)
    # The SGLang run stands as the other side: every output shows the vLLM side's rates and says SGLang has none.
    comparison = compare_runs(load_run(runs["sglang"]), load_run(runs["vllm"]))
    text = render_comparison(comparison)
    assert text.count(ACCEPT_BY_POSITION) == 1 and "accept by position" in text
    data = comparison_json(comparison)
    assert ACCEPT_BY_POSITION in data["baseline"]["server_not_reported"]
    assert ACCEPT_BY_POSITION not in data["spec"]["server_not_reported"]
    for level in data["levels"]:
        assert level["baseline_server_accept_by_position"] is None
        assert len(level["spec_server_accept_by_position"]) == POSITIONS
    written = {p.name for p in write_comparison_outputs(comparison, tmp_path)}
    assert "acceptance_hist.png" in written
    assert ACCEPT_BY_POSITION in (tmp_path / "report.md").read_text()
    saved = json.loads((tmp_path / "comparison.json").read_text())
    assert saved["levels"][0]["spec_server_accept_by_position"] == data["levels"][0]["spec_server_accept_by_position"]
