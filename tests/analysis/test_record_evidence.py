"""Records are evidence: a line written twice counts once, and a value no request can have keeps its record out of
every figure, each with a warning that counts them (#53)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import RunSpec, small_pair, write_run

from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import RunSummary, summarize_run
from specbench.analysis.reporting.render import render_summary_table
from specbench.contract.evidence import screen_records

Records = list[dict[str, Any]]


def _summary(tmp_path: Path, name: str, edit: Callable[[Records], Records] | None = None) -> RunSummary:
    spec: RunSpec = small_pair()[1]
    spec.edit_records = edit
    return summarize_run(load_run(write_run(tmp_path / name, spec)), name="spec")


def _figures(summary: RunSummary) -> list[tuple[Any, ...]]:
    return [(r.target_c, r.throughput_tok_s, r.achieved_c, r.requests_ok, r.requests_total, r.ttft_p50_s,
             r.ttft_p99_s, r.itl_p50_s, r.e2e_p50_s, r.per_request_tok_s) for r in summary.rows]


def test_every_line_twice_gives_the_figures_of_once_and_a_counted_warning(tmp_path: Path) -> None:
    once = _summary(tmp_path, "once")
    twice = _summary(tmp_path, "twice", lambda recs: [r for rec in recs for r in (rec, dict(rec))])
    assert _figures(twice) == _figures(once)
    n = sum(1 for _ in (tmp_path / "once" / "records.jsonl").open())
    dup = [w for w in twice.warnings if w.code == "duplicate_records"]
    assert len(dup) == 1 and f"{n} record line(s) repeat a request_id" in dup[0].message
    assert not [w for w in once.warnings if w.code == "duplicate_records"]
    assert "Warnings: none" not in render_summary_table(twice)


def _in_window(recs: Records, n: int = 3) -> list[dict[str, Any]]:
    """``n`` ok requests of the C=2 level's measured window (the figures they would move)."""
    return [r for r in recs if r["target_c"] == 2 and r["phase"] == "measured" and r["status"] == "ok"][5:5 + n]


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(rec: dict[str, Any]) -> None:
        rec[key] = value
    return change


def _reverse_chunks(rec: dict[str, Any]) -> None:
    rec["chunk_ms"] = [*rec["chunk_ms"][:-2], rec["chunk_ms"][-1], rec["chunk_ms"][-2]]


def _falling_counts(rec: dict[str, Any]) -> None:
    rec["chunk_tokens"] = [*rec["chunk_tokens"][:-2], rec["chunk_tokens"][-1], rec["chunk_tokens"][-2]]


def _nan_chunk(rec: dict[str, Any]) -> None:
    rec["chunk_ms"] = [*rec["chunk_ms"][:-1], math.nan]


IMPOSSIBLE: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "nan_start": (_set("start_s", math.nan), "with a time that is not a finite number"),
    "inf_e2e": (_set("e2e_s", math.inf), "with a time that is not a finite number"),
    "nan_ttft": (_set("ttft_s", math.nan), "with a time that is not a finite number"),
    "nan_chunk": (_nan_chunk, "with a time that is not a finite number"),
    "negative_ttft": (_set("ttft_s", -0.5), "with a negative time"),
    "negative_e2e": (_set("e2e_s", -2.0), "with a negative time"),
    "reversed_chunks": (_reverse_chunks, "with chunk times running backwards"),
    "negative_tokens": (_set("output_tokens", -1000), "with an impossible output token count"),
    "huge_tokens": (_set("output_tokens", 10**18), "with an impossible output token count"),
    "falling_counts": (_falling_counts, "with an impossible output token count"),
}


@pytest.mark.parametrize("case", sorted(IMPOSSIBLE))
def test_an_impossible_value_keeps_its_record_out_with_a_count(tmp_path: Path, case: str) -> None:
    change, text = IMPOSSIBLE[case]
    picked: list[str] = []

    def spoil(recs: Records) -> Records:
        for rec in _in_window(recs):
            change(rec)
            picked.append(rec["request_id"])
        return recs

    spoiled = _summary(tmp_path, "spoiled", spoil)
    without = _summary(tmp_path, "without", lambda recs: [r for r in recs if r["request_id"] not in picked])
    assert len(picked) == 3
    assert _figures(spoiled) == _figures(without)  # as if those records were never written
    hits = [w for w in spoiled.warnings if w.code == "impossible_records"]
    assert len(hits) == 1 and "3 record(s) left out of every figure" in hits[0].message
    assert f"3 {text}" in hits[0].message
    for row in spoiled.rows:
        assert all(v is None or math.isfinite(v) for v in (row.throughput_tok_s, row.achieved_c, row.ttft_p50_s))


def test_a_bad_count_failure_stays_a_failure() -> None:
    """The load side's own verdict on an impossible count (status bad_count) is already kept out of the tokens and
    counted as a failure; screening must not also drop it, or the error rate would lose it."""
    rec = {"request_id": "0-1", "start_s": 1.0, "e2e_s": 0.5, "ttft_s": 0.1, "chunk_ms": [100.0],
           "chunk_tokens": [5], "output_tokens": -5, "max_tokens": 8, "status": "bad_count"}
    assert screen_records([rec]) == ([rec], {})
    failed = {**rec, "status": "stream_error", "output_tokens": 5, "chunk_ms": [100.0, 120.0], "chunk_tokens": [5, 3]}
    assert screen_records([failed]) == ([failed], {})  # its tokens are in no figure; its failure is
    assert screen_records([{**rec, "status": "ok"}]) == ([], {"impossible_tokens": 1})


def test_records_above_max_tokens_are_impossible() -> None:
    rec = {"request_id": "0-1", "start_s": 1.0, "e2e_s": 0.5, "ttft_s": 0.1, "chunk_ms": [100.0, 120.0],
           "chunk_tokens": [5, 9], "output_tokens": 9, "max_tokens": 8, "status": "ok"}
    assert screen_records([rec]) == ([], {"impossible_tokens": 1})
    assert screen_records([{**rec, "max_tokens": 9}])[1] == {}
