"""Near misses (#38): every sentence the report prints stays silent where its condition is almost met, beside the
case where it must speak. Thresholds come from the code's own constants; inputs are built in memory (StepRow,
RunSummary, RunData, LoadPoint, RatioPoint, Decomposition, records), except where a sentence is only made inside
``compare_runs`` (the per-level error limit), which runs on a small synthetic pair written once.

Where a comparison is ``<`` or ``>`` on a figure the test can state exactly (counts, a product the code computes
the same way), the silent case sits on the threshold itself; elsewhere a relative step of ``EPS`` either side.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from steprows import clean_row
from synthetic_runs import small_pair, write_run

from specbench.analysis.records.checks import (
    CHUNK_COUNTED_TOKENS,
    CLIENT_BOUND,
    CLIENT_LAG,
    CLIENT_PAUSED,
    CLIENT_READ_LAG,
    DROPPED_REQUESTS,
    ERROR_RATE,
    FEW_REQUESTS,
    LOW_CONCURRENCY,
    LOW_RATE,
    MAX_ERROR_RATE,
    PARTIAL_RUN,
    PROMPT_CACHE_MISMATCH,
    SERVER_TOKEN_GAP,
    SETTINGS_MISMATCH,
    SINGLE_PROMPT,
    SPEC_MAX_RUNNING_LOWER,
    run_warnings,
    step_warnings,
)
from specbench.analysis.records.load import load_run
from specbench.analysis.records.server_side import MAX_TOKEN_GAP
from specbench.analysis.records.steprow import StepRow
from specbench.analysis.records.summary import RunSummary
from specbench.analysis.verdicts.categories import LevelRequests, category_spread
from specbench.analysis.verdicts.compare import TOO_MANY_ERRORS, compare_runs
from specbench.analysis.verdicts.crossover import RatioPoint, judge
from specbench.analysis.verdicts.decompose import Decomposition, Estimate, SideFigures
from specbench.analysis.verdicts.pair_checks import CACHE_SHARE_GAP, MIN_GAUGE_SAMPLES, pair_warnings
from specbench.analysis.verdicts.policy import Candidate, switching_policy
from specbench.analysis.verdicts.recommend import LevelThroughput, recommend
from specbench.analysis.verdicts.saturation import (
    FLAT_WITHOUT_INTERVAL,
    QUEUED_FROM,
    TTFT_GROWTH,
    LoadPoint,
    find_saturation,
    skipped_statement,
)
from specbench.analysis.verdicts.slo_compare import capacity, compare_slo
from specbench.analysis.verdicts.why import (
    ACCEPT_DROP,
    FACTOR_HELD,
    KV_FULL,
    MAIN_SHARE,
    MIN_QUEUED,
    RATIO_MOVED,
    level_why,
    load_why,
)
from specbench.contract.policy import (
    CLIENT_BOUND_CPU,
    MIN_ACHIEVED_FRACTION,
    client_lag_limit_ms,
    rate_held,
    read_lag_limit_ms,
)
from specbench.contract.schema import RunData, RunMeta
from specbench.contract.slo import CAPACITY_ATTAINMENT, parse_slo

EPS = 1e-6  # relative step off a threshold where the figure is not exact in floating point


def _codes(row: StepRow) -> list[str]:
    return [w.code for w in step_warnings("spec", row)]


def _speaks(code: str, silent: StepRow, speaking: StepRow) -> str:
    """Assert ``code`` is absent for ``silent`` and present for ``speaking``; return the spoken message."""
    assert code not in _codes(silent), step_warnings("spec", silent)
    found = [w.message for w in step_warnings("spec", speaking) if w.code == code]
    assert found, step_warnings("spec", speaking)
    return found[0]


# --- one step's warnings (analysis.records.checks) -------------------------------------------------------------

def test_clean_row_is_silent() -> None:
    assert step_warnings("spec", clean_row()) == []
    assert level_why(clean_row(), clean_row(), [clean_row()]) is None


def test_low_concurrency_at_the_fraction_is_silent_just_under_speaks() -> None:
    c = 20
    message = _speaks(LOW_CONCURRENCY, clean_row(c, achieved_c=MIN_ACHIEVED_FRACTION * c),
                      clean_row(c, achieved_c=MIN_ACHIEVED_FRACTION * c * (1 - EPS)))
    assert "achieved concurrency 19.0" in message


def test_few_requests_at_the_minimum_is_silent_one_under_speaks() -> None:
    message = _speaks(FEW_REQUESTS, clean_row(requests_ok=30, min_requests=30),
                      clean_row(requests_ok=29, min_requests=30))
    assert "29 successful requests measured, 30 needed" in message


def test_error_rate_at_the_limit_is_silent_just_over_speaks() -> None:
    failed = {"http_500": 1}
    message = _speaks(ERROR_RATE, clean_row(error_rate=MAX_ERROR_RATE, failures=failed),
                      clean_row(error_rate=MAX_ERROR_RATE * (1 + EPS), failures=failed))
    assert "error rate 1.0% (1 http_500 of 100 requests)" in message


@pytest.mark.parametrize("sign", [1, -1])
def test_server_token_gap_at_the_limit_is_silent_just_over_speaks(sign: int) -> None:
    message = _speaks(SERVER_TOKEN_GAP, clean_row(server_token_gap=sign * MAX_TOKEN_GAP, server_gen_tok_s=1000.0),
                      clean_row(server_token_gap=sign * MAX_TOKEN_GAP * (1 + EPS), server_gen_tok_s=1000.0))
    assert "one of the two counts is wrong" in message


def test_client_paused_at_zero_is_silent_any_pause_speaks() -> None:
    message = _speaks(CLIENT_PAUSED, clean_row(client_paused_s=0.0), clean_row(client_paused_s=0.05))
    assert "stood still for 0.1 s" in message


def test_client_bound_at_the_limit_is_silent_just_over_speaks_in_the_warning_and_the_why_line() -> None:
    at, over = clean_row(client_cpu_max=CLIENT_BOUND_CPU), clean_row(client_cpu_max=CLIENT_BOUND_CPU * (1 + EPS))
    assert "of a core" in _speaks(CLIENT_BOUND, at, over)
    assert level_why(clean_row(), at, [at]) is None
    assert "spec's load process used 90% of a core" in (level_why(clean_row(), over, [over]) or "")


@pytest.mark.parametrize("ttft_s", [0.1, 2.0])  # the 20 ms floor, then 10% of the median TTFT
def test_client_lag_at_its_limit_is_silent_just_over_speaks_in_the_warning_and_the_why_line(ttft_s: float) -> None:
    limit = client_lag_limit_ms(ttft_s)
    at = clean_row(ttft_p50_s=ttft_s, send_lag_p50_ms=1.0, send_lag_p90_ms=limit)
    over = replace(at, send_lag_p90_ms=limit * (1 + EPS))
    assert f"limit {limit:.0f} ms" in _speaks(CLIENT_LAG, at, over)
    assert level_why(clean_row(), at, [at]) is None
    assert "spec's requests went on the wire late" in (level_why(clean_row(), over, [over]) or "")


@pytest.mark.parametrize("ttft_s", [0.1, 2.0])  # the 10 ms floor, then 5% of the median TTFT
def test_client_read_lag_at_its_limit_is_silent_just_over_speaks_in_the_warning_and_the_why_line(
        ttft_s: float) -> None:
    limit = read_lag_limit_ms(ttft_s)
    at = clean_row(ttft_p50_s=ttft_s, client_read_lag_p90_ms=limit)
    over = replace(at, client_read_lag_p90_ms=limit * (1 + EPS))
    assert f"limit {limit:.0f} ms" in _speaks(CLIENT_READ_LAG, at, over)
    assert level_why(clean_row(), at, [at]) is None
    assert "spec's load process read streams late" in (level_why(clean_row(), over, [over]) or "")


@pytest.mark.parametrize("ttft_s", [0.1, 2.0])
@pytest.mark.parametrize("clock", ["user", None])  # None: a step line that does not say (read as the loop's clock)
def test_receive_lag_at_its_limit_is_silent_just_over_speaks(ttft_s: float, clock: str | None) -> None:
    """The receive lag (bytes read after the kernel stamped them, p90 of the requests' recv_lag_ms) is in the
    figures on the event loop's clock: it raises client_read_lag by itself, with its own figure in the sentence."""
    limit = read_lag_limit_ms(ttft_s)
    at = clean_row(ttft_p50_s=ttft_s, recv_lag_p90_ms=limit, receive_clock=clock)
    over = replace(at, recv_lag_p90_ms=limit * (1 + EPS))
    message = _speaks(CLIENT_READ_LAG, at, over)
    assert f"stream bytes were read {limit * (1 + EPS):.0f} ms after the kernel received them" in message
    assert level_why(clean_row(), at, [at]) is None
    assert "spec's load process read streams late" in (level_why(clean_row(), over, [over]) or "")


def test_on_the_kernels_clock_no_read_lag_is_in_the_figures() -> None:
    """The near miss of the other kind: the same lags, far over the limit, with chunk times from the kernel's
    receive stamps: the figures do not carry them, so nothing is said."""
    row = clean_row(ttft_p50_s=0.1, recv_lag_p90_ms=500.0, client_read_lag_p90_ms=500.0, receive_clock="kernel")
    assert CLIENT_READ_LAG not in _codes(row)
    assert level_why(clean_row(), row, [row]) is None
    assert CLIENT_READ_LAG in _codes(replace(row, receive_clock="user"))


@pytest.mark.parametrize("ttft_s", [0.1, 2.0])  # the 10 ms floor, then 5% of the median TTFT
def test_first_tokens_dated_with_later_chunks_at_the_limit_are_silent_just_over_speak_on_the_kernels_clock(
        ttft_s: float) -> None:
    """On the kernel's clock a first token read only after the next chunk had come carries that one's arrival (the
    kernel merges waiting bytes): how late that may date first tokens, p90, is the read lag in the figures."""
    limit = read_lag_limit_ms(ttft_s)
    at = clean_row(ttft_p50_s=ttft_s, merged_first_share=0.3, merged_first_late_p90_ms=limit, receive_clock="kernel")
    over = replace(at, merged_first_late_p90_ms=limit * (1 + EPS))
    message = _speaks(CLIENT_READ_LAG, at, over)
    assert (f"30% of the first tokens were read only after the next chunk had come, which may date them up to "
            f"{limit:.0f} ms late") in message and f"limit {limit:.0f} ms" in message
    assert level_why(clean_row(), at, [at]) is None
    assert "spec's load process read streams late" in (level_why(clean_row(), over, [over]) or "")
    # On the event loop's clock equal first and second times are no sign of it (one read's events share its
    # time there), and its own read lag speaks for itself
    assert CLIENT_READ_LAG not in _codes(replace(over, receive_clock="user"))


def test_dropped_requests_none_is_silent_one_speaks() -> None:
    rate = clean_row(0, achieved_c=None, target_rate=2.0, achieved_rate=2.0)
    message = _speaks(DROPPED_REQUESTS, rate, replace(rate, dropped=1))
    assert message.startswith("spec, rate=2/s: 1 request(s) fell due")


@pytest.mark.parametrize("dispersion", [None, 4.0])  # as Poisson (runs before gamma arrivals), gamma shape 0.25
def test_low_rate_at_the_least_count_held_is_silent_one_fewer_speaks(dispersion: float | None) -> None:
    rate, window = 10.0, 30.0
    judged = 1.0 if dispersion is None else dispersion
    least = next(n for n in range(int(rate * window) + 1) if rate_held(n, rate, window, judged))
    assert least < MIN_ACHIEVED_FRACTION * rate * window  # Poisson slack is wider than 5% here
    held = clean_row(0, achieved_c=None, target_rate=rate, achieved_rate=least / window, window_s=window,
                     arrival_dispersion=dispersion)
    message = _speaks(LOW_RATE, held, replace(held, achieved_rate=(least - 1) / window))
    assert "short of the asked 10/s beyond what chance explains" in message


# --- whole-run warnings -----------------------------------------------------------------------------------------

def _run(records: list[dict[str, object]] | None = None, *, partial: bool = False, skipped: int = 0) -> RunData:
    return RunData(Path("run"), RunMeta(partial=partial), records or [], [], skipped_lines=skipped)  # type: ignore[arg-type]


def _run_codes(run: RunData, rows: list[StepRow] | None = None, has_meta: bool = True) -> list[str]:
    return [w.code for w in run_warnings("spec", run, has_meta=has_meta, rows=rows or [])]


def test_single_prompt_two_prompts_are_silent_one_speaks() -> None:
    two = _run([{"prompt_id": "p0"}, {"prompt_id": "p1"}, {"prompt_id": None}])
    one = _run([{"prompt_id": "p0"}, {"prompt_id": "p0"}, {"prompt_id": None}])
    assert SINGLE_PROMPT not in _run_codes(two)
    assert SINGLE_PROMPT in _run_codes(one)


def test_chunk_counted_tokens_none_is_silent_one_request_speaks() -> None:
    assert CHUNK_COUNTED_TOKENS not in _run_codes(_run(), [clean_row()])
    assert CHUNK_COUNTED_TOKENS in _run_codes(_run(), [clean_row(), clean_row(8, chunk_counted_requests=1)])


def test_a_run_level_partial_line_gives_way_to_the_step_that_says_it() -> None:
    def partial_lines(run: RunData, rows: list[StepRow]) -> list[str]:
        return [w.message for w in run_warnings("spec", run, has_meta=True, rows=rows) if w.code == PARTIAL_RUN]

    assert partial_lines(_run(partial=False), [clean_row()]) == []
    assert partial_lines(_run(partial=True), [clean_row()]) == ["spec: meta.json says the run did not end on its own"]
    assert partial_lines(_run(partial=True), [clean_row(partial=True)]) == []  # the step's own warning says it
    assert partial_lines(_run(skipped=0), [clean_row()]) == []
    assert "1 torn line(s)" in partial_lines(_run(skipped=1), [clean_row()])[0]


# --- pairwise warnings (analysis.verdicts.pair_checks) ----------------------------------------------------------

def _summary(name: str, rows: list[StepRow] | None = None, **meta: object) -> RunSummary:
    return RunSummary(name, Path(name), RunMeta(partial=False, **meta), True, rows or [clean_row()])  # type: ignore[arg-type]


def _pair_codes(base: RunSummary, spec: RunSummary) -> list[str]:
    return [w.code for w in pair_warnings(base, spec)]


SPEC_SERVER = {"speculative": "EAGLE3"}


def test_prompt_cache_gap_at_the_limit_is_silent_just_over_speaks() -> None:
    base = replace(_summary("baseline"), cached_share=0.0)
    spec = _summary("spec", server=SPEC_SERVER)
    assert PROMPT_CACHE_MISMATCH not in _pair_codes(base, replace(spec, cached_share=CACHE_SHARE_GAP))
    assert PROMPT_CACHE_MISMATCH in _pair_codes(base, replace(spec, cached_share=CACHE_SHARE_GAP * (1 + EPS)))


def test_a_setting_recorded_on_one_side_only_is_not_a_mismatch() -> None:
    base = _summary("baseline", ladder=[1, 2, 4])
    assert SETTINGS_MISMATCH not in _pair_codes(base, _summary("spec", server=SPEC_SERVER, ladder=[1, 2, 4]))
    assert SETTINGS_MISMATCH not in _pair_codes(base, _summary("spec", server=SPEC_SERVER, ladder=[]))
    assert SETTINGS_MISMATCH in _pair_codes(base, _summary("spec", server=SPEC_SERVER, ladder=[1, 2, 8]))


def test_declared_caps_equal_are_silent_one_lower_speaks() -> None:
    rows = [clean_row(c, server_running_max=None, server_queued=None) for c in (1, 2, 4)]
    base = _summary("baseline", rows, server={"max_running_requests": 48})
    same = _summary("spec", rows, server={**SPEC_SERVER, "max_running_requests": 48})
    assert SPEC_MAX_RUNNING_LOWER not in _pair_codes(base, same)
    lower = _summary("spec", rows, server={**SPEC_SERVER, "max_running_requests": 47})
    assert SPEC_MAX_RUNNING_LOWER in _pair_codes(base, lower)


@pytest.mark.parametrize(("queued", "running_max", "fires"), [
    (MIN_QUEUED * (1 - EPS), 7.0, False),  # almost a queue
    (MIN_QUEUED, 8.0, False),  # a queue, but the server ran C at once: no cap in the way
    (MIN_QUEUED, 7.0, True),
])
def test_a_spec_queue_speaks_only_from_one_waiting_and_running_below_c(queued: float, running_max: float,
                                                                      fires: bool) -> None:
    base = _summary("baseline", [clean_row(8, server_queued=None, server_samples=0)])
    spec = _summary("spec", [clean_row(8, server_queued=queued, server_running_max=running_max,
                                  server_samples=MIN_GAUGE_SAMPLES)], server=SPEC_SERVER)
    assert (SPEC_MAX_RUNNING_LOWER in _pair_codes(base, spec)) is fires


# --- the per-level error limit inside compare_runs -------------------------------------------------------------

@pytest.fixture(scope="module")
def erring_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunData, RunData]:
    base, spec = small_pair()
    for level in spec.levels:
        level.error_every = 10
    root = tmp_path_factory.mktemp("erring")
    return load_run(write_run(root / "base", base)), load_run(write_run(root / "spec", spec))


def test_too_many_errors_at_the_limit_is_silent_just_under_speaks_and_all_withheld_is_no_verdict(
        erring_pair: tuple[RunData, RunData]) -> None:
    base, spec = erring_pair
    first = compare_runs(base, spec, n_boot=50, max_error_rate=1.0)
    rates = {lv.target_c: lv.spec.error_rate for lv in first.levels}
    assert all(r is not None and r > 0 for r in rates.values()), rates
    least = min(r for r in rates.values() if r is not None)

    at = compare_runs(base, spec, n_boot=50, max_error_rate=least)
    withheld = {w.target_c for w in at.warnings if w.code == TOO_MANY_ERRORS}
    assert withheld == {c for c, r in rates.items() if r is not None and r > least}
    assert at.verdict.kind != "no_levels"

    under = compare_runs(base, spec, n_boot=50, max_error_rate=least * (1 - EPS))
    assert {w.target_c for w in under.warnings if w.code == TOO_MANY_ERRORS} == set(rates)
    assert under.verdict.kind == "no_levels"
    assert under.verdict.text.startswith("no verdict: every level measured in both runs had an error rate above")


# --- why lines (analysis.verdicts.why) --------------------------------------------------------------------------

def test_kv_cache_just_under_full_is_silent_at_full_speaks() -> None:
    under, full = clean_row(server_kv_usage=KV_FULL * (1 - EPS)), clean_row(server_kv_usage=KV_FULL)
    assert level_why(clean_row(), under, [under]) is None
    assert level_why(clean_row(), full, [full]) == "spec KV cache 90% full"
    assert level_why(full, clean_row(), [clean_row()]) == "baseline KV cache 90% full"


def test_acceptance_at_the_drop_share_is_silent_just_under_speaks() -> None:
    first = clean_row(1, accept_length=3.0)
    held = clean_row(8, accept_length=ACCEPT_DROP * 3.0)
    fell = clean_row(8, accept_length=ACCEPT_DROP * 3.0 * (1 - EPS))
    assert level_why(clean_row(8), held, [first, held]) is None
    line = level_why(clean_row(8), fell, [first, fell])
    assert line is not None and line.startswith("spec acceptance length 2.70, down from 3.00 at C=1")
    assert level_why(clean_row(8), fell, [first, fell], acceptance=False) is None  # the decomposition line tells it
    # the server's own figure wins over the records'
    assert level_why(clean_row(8), replace(fell, server_accept_length=3.0), [first, fell]) is None


def _decomp(c: int, tokens_per_pass: float, pass_cost: float, source: str = "records: verify_ct") -> Decomposition:
    """A level's decomposition with just the figures ``load_why`` reads."""
    none = Estimate(None)
    side = SideFigures(requests=10, passes_per_request=none, tokens_per_pass=Estimate(tokens_per_pass),
                       tokens_per_pass_tok=Estimate(tokens_per_pass), pass_s=none, decode_tok_s=none, source=source)
    base = replace(side, tokens_per_pass=Estimate(1.0), tokens_per_pass_tok=Estimate(1.0), source="decode steps")
    product = tokens_per_pass / pass_cost
    return Decomposition(c, side, base, Estimate(pass_cost), Estimate(product), Estimate(product))


@pytest.mark.parametrize("way", [1, -1])  # a loss, then a gain
def test_a_ratio_that_moved_just_under_the_share_gives_no_load_line(way: int) -> None:
    first = _decomp(1, 3.0, 2.0)
    still = _decomp(8, 3.0, 2.0 / (1 - way * RATIO_MOVED * (1 - EPS)))
    moved = _decomp(8, 3.0, 2.0 / (1 - way * RATIO_MOVED * (1 + EPS)))
    assert load_why([first, still], 8) is None
    line = load_why([first, moved], 8)
    assert line is not None and f"the {'loss' if way == 1 else 'gain'} under load is verify cost" in line


def test_acceptance_held_within_the_share_fell_beyond_it() -> None:
    first = _decomp(1, 3.0, 2.0)
    held = load_why([first, _decomp(8, 3.0 * (1 - FACTOR_HELD * (1 - EPS)), 2.4)], 8)
    fell = load_why([first, _decomp(8, 3.0 * (1 - FACTOR_HELD * (1 + EPS)), 2.4)], 8)
    assert held is not None and held.startswith("acceptance held at 2.85 tokens/pass from C=1 to C=8")
    assert fell is not None and fell.startswith("acceptance fell from 3.00 to 2.85 tokens/pass")


def test_pass_cost_stayed_within_the_share_went_beyond_it() -> None:
    first = _decomp(1, 3.0, 2.0)
    stayed = load_why([first, _decomp(8, 2.4, 2.0 * (1 + FACTOR_HELD * (1 - EPS)))], 8)
    went = load_why([first, _decomp(8, 2.4, 2.0 * (1 + FACTOR_HELD * (1 + EPS)))], 8)
    assert stayed is not None and "a verify pass stayed at 2.10x a baseline step (2.00x at C=1)" in stayed
    assert went is not None and "a verify pass went from 2.00x to 2.10x a baseline step" in went


@pytest.mark.parametrize("verify_named", [True, False])
def test_a_cause_is_named_from_its_main_share_else_both(verify_named: bool) -> None:
    """log(ratio) moved by log(0.7); the named factor carries just over, then just under, two thirds of it."""
    total = math.log(0.7)

    def line(share: float) -> str:
        verify_share = share if verify_named else 1 - share
        found = load_why([_decomp(1, 3.0, 2.0),
                          _decomp(8, 3.0 * math.exp((1 - verify_share) * total),
                                  2.0 * math.exp(-verify_share * total))], 8)
        assert found is not None
        return found

    named = "verify cost, not draft quality" if verify_named else "draft quality, not verify cost"
    assert f"the loss under load is {named}" in line(MAIN_SHARE * (1 + EPS))
    assert "the loss under load is both: draft quality" in line(MAIN_SHARE * (1 - EPS))


# --- saturation (analysis.verdicts.saturation) ------------------------------------------------------------------

def _flat(ttft_top: float, queued_top: float | None = 0.0) -> list[LoadPoint]:
    """Flat within the intervals from C=10: the curve alone claims nothing, the top level's waiting decides."""
    return [LoadPoint(5, 500.0, 490.0, 510.0, 1.0, 0.0), LoadPoint(10, 800.0, 790.0, 810.0, 1.0, 0.0),
            LoadPoint(20, 801.0, 791.0, 811.0, ttft_top, queued_top)]


def test_ttft_growth_just_under_the_factor_claims_nothing_at_it_saturates() -> None:
    under = find_saturation("spec", _flat(TTFT_GROWTH * (1 - EPS)))
    assert under.target_c is None and "neither queueing nor TTFT grows; no saturation claimed" in under.text
    at = find_saturation("spec", _flat(TTFT_GROWTH))
    assert at.target_c == 10 and at.text == "spec saturates near C=10 at 800 tok/s (TTFT p50 x1.5 by C=20)"


def test_a_queue_just_under_one_claims_nothing_from_one_saturates() -> None:
    assert find_saturation("spec", _flat(1.0, QUEUED_FROM * (1 - EPS))).target_c is None
    at = find_saturation("spec", _flat(1.0, QUEUED_FROM))
    assert at.target_c == 10 and at.text.endswith("(server queue from C=20)")


def test_without_intervals_a_level_within_the_flat_share_is_the_maximum() -> None:
    def points(lower: float) -> list[LoadPoint]:
        return [LoadPoint(10, lower, ttft_p50_s=1.0), LoadPoint(20, 1000.0, ttft_p50_s=2.0)]

    within = find_saturation("spec", points(1000.0 * (1 - FLAT_WITHOUT_INTERVAL)))
    assert within.target_c == 10 and within.text.startswith("spec saturates near C=10")
    beyond = find_saturation("spec", points(1000.0 * (1 - FLAT_WITHOUT_INTERVAL) * (1 - EPS)))
    assert beyond.target_c is None and beyond.text.startswith("spec still scales at the highest tested level (C=20")


def test_an_interval_just_short_of_the_top_is_still_scaling() -> None:
    top = LoadPoint(20, 1000.0, 999.0, 1001.0, 2.0)
    reaches = find_saturation("spec", [LoadPoint(10, 950.0, 900.0, 1000.0, 1.0), top])
    short = find_saturation("spec", [LoadPoint(10, 950.0, 900.0, 998.9, 1.0), top])
    assert reaches.target_c == 10 and short.target_c is None and "still scales" in short.text


def test_two_levels_are_enough_to_judge_one_is_not() -> None:
    assert "too few levels" in find_saturation("spec", [LoadPoint(10, 800.0)]).text
    assert "too few levels" not in find_saturation("spec", [LoadPoint(10, 800.0), LoadPoint(20, 900.0)]).text


def test_skipped_is_said_only_when_the_option_was_on_and_a_level_went_unmeasured() -> None:
    sat = find_saturation("spec", _flat(TTFT_GROWTH))
    assert skipped_statement([5, 10, 20, 40], [5, 10, 20, 40], 0, [sat]) is None  # every level measured
    assert skipped_statement([5, 10, 20, 40], [5, 10, 20], None, [sat]) is None  # option off: a short run
    said = skipped_statement([5, 10, 20, 40], [5, 10, 20], 1, [sat])
    assert said is not None and said.startswith("skipped C=40: more than 1 level beyond the saturation")


# --- verdict, crossover and recommendation (analysis.verdicts.crossover, recommend) ------------------------------

def _priced(points: list[RatioPoint]) -> list[LevelThroughput]:
    return [LevelThroughput(p.target_c, 100.0 * p.ratio, 100.0) for p in points]


def test_a_ratio_that_only_reaches_one_is_no_crossover_just_under_it_is() -> None:
    touches = [RatioPoint(1, 1.3), RatioPoint(10, 1.1), RatioPoint(100, 1.0)]
    verdict = judge(touches)
    assert verdict.kind == "spec_wins_all" and not verdict.crossovers
    assert recommend(verdict, _priced(touches)).kind == "keep_on"
    crosses = [*touches[:2], RatioPoint(100, 1.0 - EPS)]
    verdict = judge(crosses)
    assert verdict.kind == "crossover" and verdict.text.startswith("speculation wins below C≈100")
    assert recommend(verdict, _priced(crosses)).text.startswith("enable speculation only below C = 100")


def test_a_second_crossing_that_falls_just_short_leaves_one_switch_point() -> None:
    once = [RatioPoint(1, 1.2), RatioPoint(10, 0.9), RatioPoint(100, 1.0 - EPS)]
    twice = [*once[:2], RatioPoint(100, 1.0)]
    assert judge(once).kind == "crossover" and recommend(judge(once), _priced(once)).kind == "spec_below"
    verdict = judge(twice)
    assert verdict.kind == "mixed" and verdict.text.startswith("mixed: the ratio crosses 1.0 2 times")
    assert recommend(verdict, _priced(twice)).text.startswith("no single switch point")


def test_an_interval_that_just_misses_one_is_not_called_unclear() -> None:
    clear = [RatioPoint(1, 1.2, 1.0 + EPS, 1.4), RatioPoint(10, 1.3, 1.2, 1.4)]
    touching = [RatioPoint(1, 1.2, 1.0, 1.4), clear[1]]
    assert judge(clear).unclear_levels == () and "no significant difference" not in judge(clear).text
    assert "the difference is within noise" not in recommend(judge(clear), _priced(clear)).text
    verdict = judge(touching)
    assert verdict.unclear_levels == (1,) and "no significant difference at C=1" in verdict.text
    assert "; at C=1 the difference is within noise" in recommend(verdict, _priced(touching)).text


# --- the single-prompt trap note (analysis.verdicts.categories) --------------------------------------------------

def _records(speeds: dict[str, float]) -> list[dict[str, object]]:
    """One ok request per prompt, 10 tokens at the given tokens/s."""
    return [{"prompt_id": pid, "category": "qa", "status": "ok", "output_tokens": 10, "e2e_s": 10 / speed}
            for pid, speed in speeds.items()]


@pytest.mark.parametrize("win", [True, False])
def test_a_prompt_that_only_ties_is_no_trap_just_past_it_is(win: bool) -> None:
    base = _records({"p0": 10.0, "p1": 10.0})

    def traps(edge: float) -> tuple[str, ...]:
        # p1 pulls the mean the other way (0.5x or 1.5x); p0 sits at 1.0x or just past it
        spec = _records({"p0": 10.0 * edge, "p1": 5.0 if win else 15.0})
        return category_spread([LevelRequests(4, base, spec)]).traps  # type: ignore[arg-type]

    assert traps(1.0) == ()
    found = traps(1.0 + EPS if win else 1.0 - EPS)
    assert len(found) == 1 and found[0].startswith(f"single-prompt trap at C=4: prompt 'p0' alone shows "
                                                   f"{'a win' if win else 'a loss'}")


def test_one_matched_prompt_is_never_called_a_trap_two_are() -> None:
    # p0 is 1.1x in both cases and the level's mean is 0.6x; p1 has a spec request only in the second case
    base = _records({"p0": 10.0, "p1": 10.0})
    one = category_spread([LevelRequests(4, base, _records({"p0": 11.0, "p2": 1.0}))])  # type: ignore[arg-type]
    two = category_spread([LevelRequests(4, base, _records({"p0": 11.0, "p1": 1.0}))])  # type: ignore[arg-type]
    assert one.traps == ()
    assert len(two.traps) == 1 and "prompt 'p0' alone shows a win (1.10x" in two.traps[0]


# --- capacity under the SLO (analysis.verdicts.slo_compare) -----------------------------------------------------

def _slo_rows(top: float) -> list[StepRow]:
    return [clean_row(1, slo_attainment=1.0), clean_row(2, slo_attainment=1.0), clean_row(4, slo_attainment=top)]


def test_attainment_at_the_threshold_holds_just_under_misses() -> None:
    held = capacity(_slo_rows(CAPACITY_ATTAINMENT))
    assert held.at_least and held.value == 4.0
    missed = capacity(_slo_rows(CAPACITY_ATTAINMENT * (1 - EPS)))
    assert not missed.at_least and missed.last_held == 2.0 and missed.first_missed == 4.0


def test_below_the_tested_levels_only_when_the_lowest_levels_bound_is_under_the_threshold() -> None:
    # every request met at the lowest level: 35 of 35 has a 95% Wilson lower bound of 90.1%, 34 of 34 of 89.9%
    def cap(n: int) -> str:
        return capacity([clean_row(1, slo_attainment=1.0, slo_requests=n),
                         clean_row(2, slo_attainment=0.5, slo_requests=200)]).text("req/s")

    assert "below the tested levels" not in cap(35) and "(95% 1-" in cap(35)
    assert "(95% below the tested levels to " in cap(34)


def test_keep_speculation_on_under_the_slo_only_when_its_capacity_is_larger() -> None:
    slo = parse_slo("ttft=1s")
    assert slo is not None
    base = _summary("baseline", _slo_rows(CAPACITY_ATTAINMENT * (1 - EPS)))
    same = compare_slo(base, _summary("spec", _slo_rows(CAPACITY_ATTAINMENT * (1 - EPS))), slo)
    assert same.recommendation == "the tested levels do not separate the two capacities; test higher loads to tell"
    more = compare_slo(base, _summary("spec", _slo_rows(CAPACITY_ATTAINMENT)), slo)
    assert more.recommendation == "keep speculation on: it carries more traffic within the SLO"


def _slo_advice(spec_met: list[int], base_met: list[int], n: int = 40) -> str:
    """The SLO recommendation for runs at 1, 2 and 4 req/s with ``*_met`` of ``n`` requests meeting the SLO."""
    slo = parse_slo("ttft=1s")
    assert slo is not None

    def run(name: str, met: list[int]) -> RunSummary:
        rows = [clean_row(c, slo_attainment=k / n, slo_requests=n) for c, k in zip((1, 2, 4), met, strict=True)]
        return _summary(name, rows)

    return compare_slo(run("baseline", base_met), run("spec", spec_met), slo).recommendation


def test_keep_speculation_off_under_the_slo_only_when_fisher_tells_the_miss_from_chance() -> None:
    # only level 2 has the baseline holding and speculation missing: 40 of 40 against 34 of 40 gives a one-sided
    # Fisher p of 0.013, against 35 of 40 (still a miss, 87.5%) 0.027, over the 0.025 a claim needs
    assert _slo_advice([40, 34, 40], [40, 40, 0]) == "keep speculation off above 1 concurrent requests"
    assert _slo_advice([40, 35, 40], [40, 40, 0]) == (
        "the two capacities are not told apart at 95%: at 2 concurrent requests speculation met the SLO on 35 of "
        "40 requests, the baseline on 40 of 40 requests (one-sided Fisher p=0.027 over 1 level); measure more requests "
        "per level (--min-requests) to tell")


def test_each_further_level_that_could_show_the_miss_raises_the_bar() -> None:
    # 34 of 40 at level 2 (p 0.013) stands alone while speculation holds at 4 (36 of 40, 90%); one request fewer
    # there makes 4 a second level tried, and 2 x 0.013 is over 0.025
    assert _slo_advice([40, 34, 36], [40, 40, 40]) == "keep speculation off above 1 concurrent requests"
    assert _slo_advice([40, 34, 35], [40, 40, 40]).startswith(
        "the two capacities are not told apart at 95%: at 2 concurrent requests speculation met the SLO on 34 of "
        "40 requests, the baseline on 40 of 40 requests (one-sided Fisher p=0.026 over 2 levels)")


def test_capacities_ordered_only_inside_one_bracket_are_not_separated_one_level_more_is() -> None:
    # both miss first at 4 (speculation 35 of 40 there, the baseline 0): interpolation alone orders them; with
    # speculation holding at 4 too (36 of 40), 4 is a tested level that shows it, 36 of 40 against 0 of 40
    assert _slo_advice([40, 40, 35], [40, 40, 0]) == (
        "the tested levels do not separate the two capacities: both hold at 2 and miss at 4 concurrent requests; "
        "add levels between them (--refine-levels) to tell")
    assert _slo_advice([40, 40, 36], [40, 40, 0]) == "keep speculation on: it carries more traffic within the SLO"


# --- the many-configuration policy (analysis.verdicts.policy) ---------------------------------------------------

def test_a_configuration_that_only_ties_at_a_level_does_not_make_a_switch() -> None:
    def policy(top: float) -> str:
        return switching_policy({1: [Candidate("a", 2.0), Candidate("b", 1.0)],
                                 2: [Candidate("a", 2.0), Candidate("b", 1.5)],
                                 4: [Candidate("a", 2.0), Candidate("b", top)]}).kind

    assert policy(2.0) == "single"  # a tie goes to the first configuration: no switch claimed
    assert policy(2.0 * (1 + EPS)) == "switch"
