"""More near misses (#38): the sentences ``test_near_miss_sentences`` does not reach, each silent where its
condition is almost met beside the case where it must speak: the ``no_interval`` warning, the output-equivalence
kinds, the open-loop "no verdict without an SLO", the many-configuration "runner-up within noise", and the
trace-replay verdicts.

Thresholds come from the code's own constants. Where the figure is a count (batches, answers, rows) the near
miss is one count either side; where it is a p-value, the two neighbouring counts whose p-values straddle the
test's level.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import small_pair, write_run

from specbench.analysis.records.checks import NO_INTERVAL
from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import RunSummary
from specbench.analysis.reporting.multi_render import best_text
from specbench.analysis.stats.bootstrap import MIN_BATCHES as LIFETIME_MIN_BATCHES
from specbench.analysis.stats.proportion import fisher_greater, smallest_detectable
from specbench.analysis.verdicts.compare import Comparison, compare_runs
from specbench.analysis.verdicts.equivalence import (
    EQUIVALENCE_ALPHA,
    MAX_UNDETECTED_EXCESS,
    Changes,
    check_equivalence,
    verdict,
)
from specbench.analysis.verdicts.multi import MultiComparison, MultiLevel
from specbench.analysis.verdicts.policy import Policy
from specbench.analysis.verdicts.trace_compare import TraceSide, _verdict, compare_trace
from specbench.contract.schema import RunData, RunMeta
from specbench.contract.settings import SuiteSettings
from specbench.contract.slo import parse_slo

EPS = 1e-6  # relative step off a threshold where the figure is not exact in floating point


# --- no_interval (analysis.verdicts.compare, from analysis.stats.bootstrap.MIN_BATCHES) --------------------------

def _short_first_level(tmp_path: Path, lifetimes: float) -> Comparison:
    """The spec run's C=1 window holds ``lifetimes`` request lifetimes, one chunk per request: too short for
    batch means (under 20 rate bins), so its interval rests on batches of one median request."""
    base, spec = small_pair()
    spec.levels[0].window_requests = lifetimes  # type: ignore[assignment]  # a fraction: off the floor's edge
    spec.levels[0].tokens_per_chunk = spec.levels[0].tokens
    return compare_runs(load_run(write_run(tmp_path / "base", base)), load_run(write_run(tmp_path / "spec", spec)),
                        n_boot=50)


def test_no_interval_is_silent_with_the_fallbacks_least_batches_speaks_one_batch_short(tmp_path: Path) -> None:
    """Five median-request batches are the fallback's minimum: a window of 5.01 lifetimes holds five and gets its
    interval; 4.99 lifetimes hold four, and the level says why it has none."""
    held = _short_first_level(tmp_path / "held", LIFETIME_MIN_BATCHES + 0.01)
    assert NO_INTERVAL not in held.levels[0].flags
    assert held.levels[0].ratio_low is not None
    assert not [w for w in held.warnings if w.code == NO_INTERVAL]

    short = _short_first_level(tmp_path / "short", LIFETIME_MIN_BATCHES - 0.01)
    assert NO_INTERVAL in short.levels[0].flags and short.levels[0].ratio_low is None
    found = [w.message for w in short.warnings if w.code == NO_INTERVAL]
    assert found == [f"C=1: no 95% interval for the ratio: spec (eagle3)'s too few uncorrelated batches, and "
                     f"{LIFETIME_MIN_BATCHES - 1} batch(es) of one median request (0.2 s), {LIFETIME_MIN_BATCHES} "
                     "needed; run the step longer"]


# --- output equivalence: the verdict's kinds (analysis.verdicts.equivalence) -------------------------------------

def _changes(compared: int, changed: int) -> Changes:
    return Changes(compared, changed, (5,) * changed)


FLOOR = _changes(100, 2)  # the baseline changed 2 of 100 of its own answers under load


def test_lossless_at_no_changed_answer_one_changed_answer_is_not_lossless() -> None:
    kind, text = verdict(_changes(100, 0), FLOOR, [1, 8])
    assert kind == "lossless" and text.startswith("speculation changed 0 of 100 answers at C=1..8"), text
    kind, text = verdict(_changes(100, 1), FLOOR, [1, 8])
    assert kind != "lossless" and kind == "within_noise", text


def test_one_level_lossless_at_no_change_one_change_is_not_lossless() -> None:
    """With one level there is no floor: a greedy answer must not change at all."""
    none = Changes(0, 0, ())
    assert verdict(_changes(40, 0), none, [4])[0] == "lossless"
    kind, text = verdict(_changes(40, 1), none, [4])
    assert kind == "not_lossless" and text.endswith("with no noise floor: one level only: this server is not lossless")


def test_not_lossless_speaks_where_p_falls_under_the_level_silent_one_answer_before() -> None:
    """8 of 100 against the floor's 2 of 100 is p = 0.0503: not significant; 9 of 100 is p = 0.029."""
    almost, over = fisher_greater(8, 100, 2, 100), fisher_greater(9, 100, 2, 100)
    assert over < EQUIVALENCE_ALPHA <= almost < EQUIVALENCE_ALPHA * 1.01
    kind, text = verdict(_changes(100, 8), FLOOR, [1, 8])
    assert kind != "not_lossless" and "not lossless" not in text, text
    kind, text = verdict(_changes(100, 9), FLOOR, [1, 8])
    assert kind == "not_lossless" and "p = 0.029): this server is not lossless" in text, text


def test_within_noise_where_the_detectable_share_is_within_the_excess_too_few_one_answer_fewer() -> None:
    """Against a 2% floor, 34 answers could show a changed share of 4/34 (9.8 points above it): within noise;
    33 answers only 4/33 (10.1 points above): not enough answers to tell."""
    def excess(n: int) -> float:
        least = smallest_detectable(n, FLOOR.changed, FLOOR.compared, EQUIVALENCE_ALPHA)
        assert least is not None
        return least / n - FLOOR.changed / FLOOR.compared

    assert excess(34) <= MAX_UNDETECTED_EXCESS < excess(33) < MAX_UNDETECTED_EXCESS * 1.02
    kind, text = verdict(_changes(34, 1), FLOOR, [1, 8])
    assert kind == "within_noise" and "not told apart from batch-shape noise" in text, text
    kind, text = verdict(_changes(33, 1), FLOOR, [1, 8])
    assert kind == "too_few" and text.startswith("not enough answers to tell: speculation changed 1 of 33"), text


def test_own_levels_sentence_speaks_where_p_falls_under_the_level_silent_one_answer_before() -> None:
    """The spec server's answers against its own lowest level: 8 of 100 (p = 0.0503) adds nothing, 9 of 100 does."""
    assert "own answers" not in verdict(_changes(100, 0), FLOOR, [1, 8], spec_noise=_changes(100, 8))[1]
    text = verdict(_changes(100, 0), FLOOR, [1, 8], spec_noise=_changes(100, 9))[1]
    assert ". Its own answers also change with load: 9 of 100 (9%)" in text, text


def _answer_run(temperature: float = 0.0, rate: float | None = None, digest: bool = True) -> RunData:
    """Two first-turn answers at C=1 and C=8, the same digest everywhere."""
    records: list[dict[str, Any]] = []
    for c in (1, 8):
        for seq in range(2):
            rec: dict[str, Any] = {"request_id": f"{c}-{seq}", "status": "ok", "target_c": c, "prompt_seq": seq,
                                   "start_s": float(c + seq), "e2e_s": 0.5}
            if digest:
                rec["answer_digest"] = f"d{seq}"
            records.append(rec)
    if rate is not None:
        records[-1]["target_rate"] = rate
    meta = RunMeta(settings=SuiteSettings(temperature=temperature), partial=False)
    return RunData(Path("run"), meta, records, [])  # type: ignore[arg-type]


def test_equivalence_is_checked_at_temperature_zero_not_checked_at_any_above() -> None:
    assert check_equivalence(_answer_run(), _answer_run()).kind == "lossless"
    hot = check_equivalence(_answer_run(), _answer_run(temperature=EPS))
    assert hot.kind == "not_checked" and hot.text.startswith(
        "output equivalence not checked: the runs sample at temperature 1e-06")


def test_equivalence_is_checked_without_a_rate_not_checked_with_one_rate_record() -> None:
    assert check_equivalence(_answer_run(), _answer_run(rate=None)).checked
    rate = check_equivalence(_answer_run(rate=1.0), _answer_run())
    assert rate.kind == "not_checked" and rate.text.endswith("open-loop (rate) runs are not paired by level yet")


def test_equivalence_is_checked_with_answers_on_both_sides_not_checked_with_one_side_bare() -> None:
    assert check_equivalence(_answer_run(), _answer_run()).checked
    bare = check_equivalence(_answer_run(), _answer_run(digest=False))
    assert bare.kind == "not_checked" and "the runs kept no answers" in bare.text


# --- open loop without an SLO (analysis.verdicts.compare) --------------------------------------------------------

NO_SLO = ("open-loop runs offer both servers the same traffic and are compared on goodput under an SLO; none was "
          "given (run with --slo, or compare with --slo)")


@pytest.fixture(scope="module")
def rate_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three small pairs: closed loop, spec with one level at a rate, and both at rates on every level."""
    root = tmp_path_factory.mktemp("rates")
    dirs: dict[str, Path] = {}
    for name, rated in (("closed", ()), ("one", (0,)), ("all", (0, 1, 2))):
        base, spec = small_pair()
        for run in (base, spec) if name == "all" else (spec,):
            for i in rated:
                run.levels[i].step_extra = {"target_rate": float(i + 1)}
        dirs[f"{name}/base"] = write_run(root / name / "base", base)
        dirs[f"{name}/spec"] = write_run(root / name / "spec", spec)
    return dirs


def _rate_compare(dirs: dict[str, Path], name: str, slo: str = "") -> Comparison:
    return compare_runs(load_run(dirs[f"{name}/base"]), load_run(dirs[f"{name}/spec"]), n_boot=50,
                        slo=parse_slo(slo))


def test_no_slo_sentence_is_silent_in_closed_loop_speaks_from_one_level_at_a_rate(rate_dirs: dict[str, Path]) -> None:
    closed = _rate_compare(rate_dirs, "closed")
    assert closed.verdict.kind != "no_slo" and closed.recommendation.text != "no recommendation without an SLO"
    one = _rate_compare(rate_dirs, "one")
    assert one.spec.open_loop and not one.baseline.open_loop
    assert (one.verdict.kind, one.verdict.text) == ("no_slo", NO_SLO)
    assert one.recommendation.text == "no recommendation without an SLO"


def test_no_slo_sentence_is_silent_in_open_loop_once_an_slo_is_given(rate_dirs: dict[str, Path]) -> None:
    bare = _rate_compare(rate_dirs, "all")
    assert bare.verdict.kind == "no_slo" and bare.recommendation.text == "no recommendation without an SLO"
    judged = _rate_compare(rate_dirs, "all", "ttft=10s")
    assert judged.verdict.kind == "slo_capacity" and judged.verdict.text != NO_SLO
    assert judged.recommendation.text != "no recommendation without an SLO"


# --- the many-configuration comparison's runner-up (analysis.reporting.multi_render) -----------------------------

def _multi(low: float | None, runner_up: str | None = "b") -> MultiComparison:
    """One level at C=4 where configuration a beats b by 10%, the interval's lower end at ``low``."""
    level = MultiLevel(4, (), "a", runner_up, 1.1 if runner_up else None, low, 1.2 if low is not None else None)
    base = RunSummary("baseline", Path("baseline"), RunMeta(partial=False), True, [])
    return MultiComparison("baseline", base, ("a", "b"), (), (level,), Policy("none", ""), (), 0, 0)


def test_runner_up_within_noise_speaks_with_the_interval_at_one_silent_just_above() -> None:
    at = best_text(_multi(1.0))
    assert at == "best per level: C=4: a; not significantly better than the runner-up at C=4 (b within noise)"
    above = best_text(_multi(1.0 + EPS))
    assert "within noise" not in above
    assert above.endswith("; each significantly better than the runner-up (95% interval of their ratio above 1)")


def test_nothing_to_compare_without_a_level_silent_with_one() -> None:
    empty = replace(_multi(1.0 + EPS), levels=())
    assert best_text(empty) == "no level was measured in the baseline and a configuration; nothing to compare"
    assert best_text(_multi(1.0 + EPS)).startswith("best per level: C=4: a")


def test_runner_up_sentence_needs_a_runner_up_and_says_no_interval_without_one() -> None:
    assert best_text(_multi(None)).endswith("at C=4 (no interval)")
    assert "not significantly better" not in best_text(_multi(None, runner_up=None))


# --- trace replay (analysis.verdicts.trace_compare) -------------------------------------------------------------

TTFT_TARGET_S = 1.0


def _trace_run(rows: int, ttft_s: float = 0.5, good_rows: int | None = None, slo: str = "ttft=1s") -> RunData:
    """One replayed window of ``rows`` rows; the first ``good_rows`` (default all) answer at ``ttft_s``, the rest
    at twice the target."""
    good = rows if good_rows is None else good_rows
    records = [{"step": 0, "prompt_seq": k, "scheduled_s": float(k), "start_s": float(k), "e2e_s": 2.0,
                "status": "ok", "ttft_s": ttft_s if k < good else 2 * TTFT_TARGET_S, "chunk_ms": [],
                "output_tokens": 10} for k in range(rows)]
    steps = [{"index": 0, "steady_start_s": 0.0, "end_s": float(rows), "min_requests": rows}]
    meta = RunMeta(settings=SuiteSettings(trace="trace.jsonl", slo=slo), partial=False)
    return RunData(Path("run"), meta, records, steps)  # type: ignore[arg-type]


def test_trace_interval_from_ten_rows_nine_are_too_few() -> None:
    ten = compare_trace(_trace_run(10), _trace_run(10))
    assert ten is not None and ten.diff_ci is not None and "too few rows" not in ten.verdict
    nine = compare_trace(_trace_run(9), _trace_run(9))
    assert nine is not None and nine.diff_ci is None
    assert nine.verdict == "no verdict: too few rows for an interval (10 needed)"


def test_trace_neither_meets_silent_with_one_row_at_the_target_speaks_just_over_it() -> None:
    """The SLO's bounds are inclusive: one spec row at exactly the TTFT target is goodput."""
    bad = _trace_run(12, good_rows=0)
    at = compare_trace(bad, replace(bad, records=[{**bad.records[0], "ttft_s": TTFT_TARGET_S}, *bad.records[1:]]))
    assert at is not None and at.spec.good == 1 and at.verdict != "neither server meets the SLO on this trace"
    over = compare_trace(bad, replace(bad, records=[{**bad.records[0], "ttft_s": TTFT_TARGET_S * (1 + EPS)},
                                                    *bad.records[1:]]))
    assert over is not None and over.spec.good == 0
    assert over.verdict == "neither server meets the SLO on this trace"


def test_trace_no_slo_sentence_silent_with_the_runs_slo_speaks_without_one() -> None:
    judged = compare_trace(_trace_run(12), _trace_run(12))
    assert judged is not None and judged.verdict != "no verdict: give an SLO (--slo) to judge goodput"
    bare = compare_trace(_trace_run(12, slo=""), _trace_run(12, slo=""))
    assert bare is not None and bare.verdict == "no verdict: give an SLO (--slo) to judge goodput"


def _sides() -> tuple[TraceSide, TraceSide]:
    """Figures from a real replay: spec answers every row within the SLO, the baseline half of them."""
    found = compare_trace(_trace_run(16, good_rows=8), _trace_run(16))
    assert found is not None and found.baseline.good == 8 and found.spec.good == 16
    return found.baseline, replace(found.spec, name="eagle3")


@pytest.mark.parametrize("spec_ahead", [True, False])
def test_trace_a_better_server_is_named_only_when_the_interval_clears_zero(spec_ahead: bool) -> None:
    """The interval of spec - baseline goodput touching 0 does not separate the servers; just past it does."""
    base, spec = _sides()
    touching = (0.0, 1.0) if spec_ahead else (-1.0, 0.0)
    clear = (EPS, 1.0) if spec_ahead else (-1.0, -EPS)
    assert _verdict(base, spec, touching) == ("the trace does not separate the two servers: the goodput "
                                              "difference's interval includes 0")
    named = "eagle3" if spec_ahead else "baseline"
    assert _verdict(base, spec, clear) == f"{named} serves this traffic better (more goodput under the SLO)"
