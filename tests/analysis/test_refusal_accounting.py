"""Refused work in the analysis (#55): the refused-share sentence (silent at its threshold, speaks just over), the
compare verdict that never calls a server faster because it refused work, goodput's reading of refusals, and the
records of a pair where one side refused, end to end through comparison.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from steprows import clean_row
from synthetic_runs import small_pair, write_run

from specbench.analysis.records.checks import MAX_REFUSED_SHARE, REFUSED_WORK, step_warnings
from specbench.analysis.records.goodput import slo_figures
from specbench.analysis.records.load import load_run
from specbench.analysis.records.steprow import StepRow
from specbench.analysis.reporting.serialize import LEVEL_FIELDS, comparison_json
from specbench.analysis.verdicts.compare import LevelComparison, compare_runs, judge_levels
from specbench.contract.slo import parse_slo

EPS = 1e-6


def _refusing(share: float, **changes: Any) -> StepRow:
    """A clean row whose server refused ``share`` of the work offered (100 served beside the refusals)."""
    refused = round(share * 100 / (1 - share))
    return clean_row(requests_refused=max(1, refused), refused_share=share, refusal_backoff_s=0.4, **changes)


def _messages(row: StepRow) -> list[str]:
    return [w.message for w in step_warnings("spec", row) if w.code == REFUSED_WORK]


def test_refused_share_at_the_threshold_is_silent_just_over_speaks() -> None:
    assert _messages(_refusing(MAX_REFUSED_SHARE)) == []
    assert _messages(clean_row()) == []
    (said,) = _messages(_refusing(MAX_REFUSED_SHARE * (1 + EPS)))
    assert "the server refused 1.0% of the offered work" in said
    assert "waited 0.40 s on average" in said and "not as its speed at this load" in said


def test_the_sentence_names_retry_after_and_open_loop_arrivals() -> None:
    (said,) = _messages(_refusing(0.2, refusals_retry_after=3))
    assert "at least the server's Retry-After on 3" in said
    (said,) = _messages(_refusing(0.2, target_rate=5.0, target_c=0))
    assert "refused 20.0% of the arrivals" in said and "none was sent again" in said


def _level(ratio: float, base: StepRow, spec: StepRow, low: float | None = None,
           high: float | None = None) -> LevelComparison:
    return LevelComparison(target_c=4, baseline=base, spec=spec, ratio=ratio, ratio_low=low, ratio_high=high,
                           batches_baseline=20, batches_spec=20, interval_method="batch_means",
                           per_request_ratio=None, ttft_p50_ratio=None, ttft_p99_ratio=None, e2e_p50_ratio=None,
                           e2e_p99_ratio=None)


@pytest.mark.parametrize("ratio, refusing, withheld", [
    (1.3, "spec", True),  # ahead while refusing: no win
    (0.7, "spec", False),  # behind while refusing: its loss stands
    (0.7, "baseline", True),
    (1.3, "baseline", False),
])
def test_a_ratio_that_favours_a_refusing_server_gets_no_verdict(ratio: float, refusing: str, withheld: bool) -> None:
    over = _refusing(MAX_REFUSED_SHARE * (1 + EPS))
    base, spec = (over, clean_row()) if refusing == "baseline" else (clean_row(), over)
    judged, notes = judge_levels([_level(ratio, base, spec)], limit=0.05)
    assert (not judged) == withheld
    if withheld:
        (note,) = notes
        assert note.code == REFUSED_WORK and f"no win for {refusing}" in note.message
    else:
        assert notes == []


def test_a_refused_share_at_the_threshold_keeps_the_level() -> None:
    judged, notes = judge_levels([_level(1.3, clean_row(), _refusing(MAX_REFUSED_SHARE))], limit=0.05)
    assert len(judged) == 1 and notes == []


def _refuse_in(step_index: int, every: int) -> Any:
    def edit(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        step = sorted({r["step"] for r in recs})[step_index]
        out = list(recs)
        for i in [i for i, r in enumerate(recs) if r["step"] == step][::every]:
            out[i] = {**recs[i], "status": "refused", "http_status": 503, "error": "HTTP 503", "ttft_s": None,
                      "e2e_s": 0.001, "chunk_ms": [], "chunk_tokens": [], "output_tokens": 0, "spec": None,
                      "finish_reason": None, "backoff_s": 0.25}
        return out
    return edit


def test_a_pair_where_the_winning_side_refused_withholds_that_level(tmp_path: Path) -> None:
    """The baseline wins everywhere in the small pair; where it refused a fifth of the work (C=2) that win is not
    counted, and comparison.json carries both sides' refused shares and back-off."""
    base, spec = small_pair()
    base.edit_records = _refuse_in(1, 5)
    comparison = compare_runs(load_run(write_run(tmp_path / "base", base)),
                              load_run(write_run(tmp_path / "spec", spec)), n_boot=200)
    notes = [w for w in comparison.warnings if w.code == REFUSED_WORK and w.run is None]
    assert [w.target_c for w in notes] == [2] and "no win for baseline" in notes[0].message
    assert [lv.target_c for lv in comparison.recommendation.levels] == [1, 4]  # the verdict rests on these
    data = json.loads(json.dumps(comparison_json(comparison)))
    by_c = {lv["target_c"]: lv for lv in data["levels"]}
    assert by_c[2]["baseline_refused_share"] == pytest.approx(comparison.levels[1].baseline.refused_share)
    assert by_c[2]["baseline_refusal_backoff_s"] == pytest.approx(0.25)
    assert by_c[1]["baseline_refused_share"] is None and by_c[2]["spec_refused_share"] is None
    assert set(LEVEL_FIELDS) <= set(by_c[2])


def _record(start: float, status: str, rate: float | None) -> dict[str, Any]:
    ok = status == "ok"
    return {"start_s": start, "e2e_s": 0.5, "status": status, "ttft_s": 0.1 if ok else None,
            "chunk_ms": [100.0, 500.0] if ok else [], "chunk_tokens": [1, 2] if ok else [],
            "output_tokens": 2 if ok else 0, "target_rate": rate}


def test_goodput_counts_a_refused_request_as_missed() -> None:
    slo = parse_slo("ttft=1s")
    assert slo is not None
    for rate in (None, 2.0):  # closed loop and open loop alike: offered work that was not served in time
        figures = slo_figures([_record(1.0, "ok", rate), _record(2.0, "refused", rate)], 0.0, 10.0, slo)
        assert figures.attainment == 0.5 and figures.goodput_req_s == pytest.approx(0.1)
