"""Baseline against speculative: per-level ratios with intervals, the verdict, the policy, the spread.

``compare_runs`` pairs steps by target concurrency and builds every figure ``compare`` prints from the two
runs' step rows (``summary``), so the comparison can never disagree with either run's own table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from specbench.analysis.records.checks import (
    CLIENT_PAUSED,
    MAX_REFUSED_SHARE,
    NO_INTERVAL,
    REFUSED_WORK,
    ValidityWarning,
    refused_notably,
)
from specbench.analysis.records.energy import Prices, gpu_series
from specbench.analysis.records.server_side import in_window, server_accept_source
from specbench.analysis.records.steps import StepWindow, measured_ok, overlapping, step_windows
from specbench.analysis.records.summary import RunSummary, StepRow, run_label, summarize_run
from specbench.analysis.stats.batch_means import BATCH_MEANS, ThroughputEstimate, estimate_throughput, ratio_interval_t
from specbench.analysis.stats.bootstrap import MIN_BATCHES, ratio_interval
from specbench.analysis.verdicts.categories import CategorySpread, LevelRequests, category_spread
from specbench.analysis.verdicts.category_verdict import CategoryVerdict, LevelSides, SideWindow, category_verdict
from specbench.analysis.verdicts.crossover import RatioPoint, Verdict, judge
from specbench.analysis.verdicts.decompose import Decomposition, decompose_level
from specbench.analysis.verdicts.energy import EnergyLevel, energy_level
from specbench.analysis.verdicts.equivalence import Equivalence, check_equivalence
from specbench.analysis.verdicts.equivalence_probe import probe_of, with_probe
from specbench.analysis.verdicts.pair_checks import pair_warnings
from specbench.analysis.verdicts.recommend import LevelThroughput, Recommendation, recommend
from specbench.analysis.verdicts.refine import added_near, crossing_statement
from specbench.analysis.verdicts.saturation import Saturation, saturation_of, skipped_statement
from specbench.analysis.verdicts.slo_compare import SloComparison, compare_slo
from specbench.analysis.verdicts.why import level_why, load_why, well_measured
from specbench.contract.schema import RunData
from specbench.contract.slo import Slo

DEFAULT_SEED = 0
DEFAULT_N_BOOT = 2000
DEFAULT_MAX_ERROR_RATE = 0.05  # the load side's --max-error-rate default; a run's own setting wins
TOO_MANY_ERRORS = "too_many_errors"


@dataclass(frozen=True)
class LevelComparison:
    """Spec against baseline at one target concurrency. Ratios are spec / baseline."""

    target_c: int
    baseline: StepRow
    spec: StepRow
    ratio: float | None  # window throughput ratio
    ratio_low: float | None  # 95% bootstrap interval; None when a window has too few batches
    ratio_high: float | None
    batches_baseline: int
    batches_spec: int
    interval_method: str | None  # batch_means (both runs), lifetime_batches (fallback on a side), None
    per_request_ratio: float | None  # mean per-request tok/s ratio (>1: spec requests are faster)
    ttft_p50_ratio: float | None  # latency ratios: >1 means spec is slower
    ttft_p99_ratio: float | None
    e2e_p50_ratio: float | None
    e2e_p99_ratio: float | None
    # Each window's batch throughputs behind the interval, kept so a many-configuration report can bootstrap
    # any two configurations against each other from the very same batches.
    baseline_batches: tuple[float, ...] = field(default=(), repr=False, compare=False)
    spec_batches: tuple[float, ...] = field(default=(), repr=False, compare=False)
    why: str | None = None  # what the servers' own figures say about this level (``analysis.verdicts.why``)
    decomposition: Decomposition | None = None  # tokens per pass x pass cost (``analysis.verdicts.decompose``)
    energy: EnergyLevel | None = None  # energy per token, spec / baseline (``analysis.verdicts.energy``; --gpu-metrics)

    @property
    def refined(self) -> bool:
        """A level added after the ladder to pin a crossover (on either side; they are run on both)."""
        return self.baseline.refined or self.spec.refined

    @property
    def flags(self) -> tuple[str, ...]:
        """Warning codes that concern this level in either run, plus ``no_interval``."""
        codes = [*self.baseline.flags, *self.spec.flags]
        if self.ratio is not None and self.ratio_low is None:
            codes.append(NO_INTERVAL)
        return tuple(dict.fromkeys(codes))

    @property
    def winner(self) -> str | None:
        """'spec', 'baseline', or 'unclear' when the interval contains 1.0; None without a ratio."""
        if self.ratio is None:
            return None
        if self.ratio_low is not None and self.ratio_high is not None and self.ratio_low <= 1 <= self.ratio_high:
            return "unclear"
        return "spec" if self.ratio > 1 else "baseline"


@dataclass(frozen=True)
class Comparison:
    """Everything ``compare`` reports; renderers and writers only format it."""

    baseline: RunSummary
    spec: RunSummary
    levels: tuple[LevelComparison, ...]
    verdict: Verdict
    recommendation: Recommendation
    categories: CategorySpread
    warnings: tuple[ValidityWarning, ...]  # both runs' warnings, then the pair's
    seed: int
    n_boot: int
    slo: SloComparison | None = None  # goodput and capacity under the SLO, when the runs had (or got) one
    equivalence: Equivalence | None = None  # do the servers give the same answers (``analysis.verdicts.equivalence``)
    saturation: tuple[Saturation, ...] = ()  # baseline's, then spec's (``analysis.verdicts.saturation``)
    crossover_lines: tuple[str, ...] = ()  # each crossover with its interval and how it was found
    skipped: str | None = None  # ladder levels --stop-after-saturation skipped, and why
    by_category: CategoryVerdict | None = None  # per category and level, with intervals (closed loop)

    @property
    def open_loop(self) -> bool:
        return self.baseline.open_loop or self.spec.open_loop


def compare_runs(
    base: RunData, spec: RunData, *, seed: int = DEFAULT_SEED, n_boot: int = DEFAULT_N_BOOT,
    max_error_rate: float | None = None,
    slo: Slo | None = None,
    prices: Prices | None = None,
) -> Comparison:
    """Compare a baseline run with a speculative run level by level (bootstrap seeded for repeatability).

    Closed-loop levels are paired by concurrency and judged on throughput. Open-loop levels (request rates)
    offer both servers the same traffic, so throughput says little: they are judged on goodput and capacity
    under the SLO (``slo``, else the one the baseline run was started with), which replaces the verdict and
    recommendation. With an SLO, closed-loop comparisons get the SLO section too. ``prices``: cost both runs at
    these prices instead of their own.
    """
    base_sum = summarize_run(base, name=_role_name("baseline", base), slo=slo, prices=prices)
    spec_sum = summarize_run(spec, name=_role_name("spec", spec), slo=slo or base_sum.slo, prices=prices)
    base_windows = {w.index: w for w in step_windows(base)}
    spec_windows = {w.index: w for w in step_windows(spec)}
    levels: list[LevelComparison] = []
    requests: list[LevelRequests] = []
    sides: list[LevelSides] = []
    notes: list[ValidityWarning] = []
    common = sorted({r.target_c for r in base_sum.rows if r.target_rate is None}
                    & {r.target_c for r in spec_sum.rows if r.target_rate is None})
    caps = (_declared_cap(base), _declared_cap(spec))
    gpus = (gpu_series(base.gpu_samples), gpu_series(spec.gpu_samples))
    for c in common:
        b_row, s_row = base_sum.row_at(c), spec_sum.row_at(c)
        if b_row is None or s_row is None:
            continue
        b_win, s_win = base_windows[b_row.step], spec_windows[s_row.step]
        b_est = _estimate(base, b_win, b_row)
        s_est = _estimate(spec, s_win, s_row)
        interval, method = level_interval(b_est, s_est, np.random.default_rng([seed, c]), n_boot)
        if interval is None:
            notes.append(_no_interval(c, (base_sum, b_est), (spec_sum, s_est)))
        levels.append(LevelComparison(
            target_c=c, baseline=b_row, spec=s_row,
            ratio=_ratio(s_row.throughput_tok_s, b_row.throughput_tok_s),
            ratio_low=interval[0] if interval else None,
            ratio_high=interval[1] if interval else None,
            batches_baseline=b_est.n, batches_spec=s_est.n, interval_method=method,
            per_request_ratio=_ratio(s_row.per_request_tok_s, b_row.per_request_tok_s),
            ttft_p50_ratio=_ratio(s_row.ttft_p50_s, b_row.ttft_p50_s),
            ttft_p99_ratio=_ratio(s_row.ttft_p99_s, b_row.ttft_p99_s),
            e2e_p50_ratio=_ratio(s_row.e2e_p50_s, b_row.e2e_p50_s),
            e2e_p99_ratio=_ratio(s_row.e2e_p99_s, b_row.e2e_p99_s),
            baseline_batches=tuple(float(v) for v in b_est.batches),
            spec_batches=tuple(float(v) for v in s_est.batches),
            why=level_why(b_row, s_row, spec_sum.rows, caps=caps),
            decomposition=_decompose(c, base, spec, b_win, s_win, seed),
            energy=energy_level(c, b_row, s_row, overlapping(base.records, *b_win.bounds) if b_win.bounds else [],
                                overlapping(spec.records, *s_win.bounds) if s_win.bounds else [], *gpus,
                                np.random.default_rng([seed, c, 4]), n_boot),
        ))
        requests.append(LevelRequests(c, measured_ok(base.records, b_win), measured_ok(spec.records, s_win)))
        if b_win.bounds and s_win.bounds:
            sides.append(LevelSides(c, SideWindow(requests[-1].baseline, *b_win.bounds, b_row.achieved_c),
                                    SideWindow(requests[-1].spec, *s_win.bounds, s_row.achieved_c)))
    levels = _with_load_why(levels, spec_sum.rows, caps)
    limit = _error_limit(base, spec) if max_error_rate is None else max_error_rate
    judged, held_back = judge_levels(levels, limit)
    notes.extend(held_back)
    points = [RatioPoint(lv.target_c, lv.ratio, lv.ratio_low, lv.ratio_high) for lv in judged
              if lv.ratio is not None]
    verdict = judge(points)
    if not points and len(judged) < len(levels):
        withheld = {w.code for w in notes if w.code in (TOO_MANY_ERRORS, CLIENT_PAUSED, REFUSED_WORK)}
        why = " or ".join(([f"had an error rate above {limit:.0%}"] if TOO_MANY_ERRORS in withheld else [])
                          + (["ran while a load process stood still"] if CLIENT_PAUSED in withheld else [])
                          + (["favoured a server that refused part of the work"] if REFUSED_WORK in withheld
                             else []))
        verdict = Verdict("no_levels", f"no verdict: every level measured in both runs {why}; see the warnings, "
                          "fix what they name and run again")
    priced = [LevelThroughput(lv.target_c, lv.spec.throughput_tok_s, lv.baseline.throughput_tok_s)
              for lv in judged if lv.spec.throughput_tok_s is not None and lv.baseline.throughput_tok_s is not None]
    warnings = (*base_sum.warnings, *spec_sum.warnings, *pair_warnings(base_sum, spec_sum), *notes)
    recommendation = recommend(verdict, priced)
    run_slo = base_sum.slo or spec_sum.slo
    under_slo = compare_slo(base_sum, spec_sum, run_slo) if run_slo is not None else None
    if base_sum.open_loop or spec_sum.open_loop:
        if under_slo is not None:
            verdict = Verdict("slo_capacity", under_slo.verdict)
            recommendation = Recommendation("slo_capacity", None, under_slo.recommendation)
        else:
            verdict = Verdict("no_slo", "open-loop runs offer both servers the same traffic and are compared on "
                              "goodput under an SLO; none was given (run with --slo, or compare with --slo)")
            recommendation = Recommendation("none", None, "no recommendation without an SLO")
    return Comparison(
        baseline=base_sum, spec=spec_sum, levels=tuple(levels), verdict=verdict,
        recommendation=recommendation, categories=category_spread(requests),
        warnings=warnings, seed=seed, n_boot=n_boot, slo=under_slo,
        equivalence=with_probe(check_equivalence(base, spec), probe_of(base, spec)),
        saturation=(saturated := (saturation_of(base_sum), saturation_of(spec_sum))),
        crossover_lines=_crossover_lines(verdict, levels),
        by_category=category_verdict(sides) if sides else None,
        skipped=skipped_statement(sorted({*base.meta.ladder, *spec.meta.ladder}), common,
                                  _stop_after(base), saturated),
    )


def judge_levels(levels: list[LevelComparison], limit: float
                 ) -> tuple[list[LevelComparison], list[ValidityWarning]]:
    """The levels the verdict may rest on, and a note for each one withheld: an error rate above ``limit``, a
    load process that stood still, a ratio that favours a server that refused part of the work."""
    notes: list[ValidityWarning] = []
    judged = []
    for lv in levels:
        bad = [(name, row) for name, row in (("baseline", lv.baseline), ("spec", lv.spec))
               if row.error_rate is not None and row.error_rate > limit]
        paused = [(name, row) for name, row in (("baseline", lv.baseline), ("spec", lv.spec)) if row.client_paused_s]
        if bad:
            why = ", ".join(f"{name} {row.error_rate:.0%} of {row.requests_total} requests failed"
                            for name, row in bad)
            notes.append(ValidityWarning(TOO_MANY_ERRORS, f"C={lv.target_c}: no verdict at this level: {why} "
                                         f"(above --max-error-rate {limit:.0%})", None, lv.target_c))
        elif paused:
            why = ", ".join(f"{name}'s load process stood still {row.client_paused_s:.1f} s" for name, row in paused)
            notes.append(ValidityWarning(CLIENT_PAUSED, f"C={lv.target_c}: no verdict at this level: {why} (the "
                                         "figures measure the client); run it again", None, lv.target_c))
        elif (refusal := refusal_withheld(lv)) is not None:
            notes.append(refusal)
        else:
            judged.append(lv)
    return judged, notes


def refusal_withheld(lv: LevelComparison) -> ValidityWarning | None:
    """A level whose ratio favours a server that refused a notable share of the work offered to it: no verdict
    there. Refused work is work it never did (its figures are those of a lighter load than asked), so being
    ahead while refusing is no win; a server that refused and still fell behind keeps its loss."""
    if lv.ratio is None:
        return None
    refusing = {name: row for name, row in (("baseline", lv.baseline), ("spec", lv.spec)) if refused_notably(row)}
    favoured = "spec" if lv.ratio > 1 else "baseline"
    if favoured not in refusing:
        return None
    why = ", ".join(f"{name} refused {row.refused_share or 0:.1%} of the work offered to it" for name, row in
                    refusing.items())
    return ValidityWarning(REFUSED_WORK, f"C={lv.target_c}: no verdict at this level: {why} (over "
                           f"{MAX_REFUSED_SHARE:.0%}); its {lv.ratio:.2f}x ratio is no win for {favoured}, which took "
                           "on less work than was asked of it; raise its queue limit or compare at a lower level",
                           None, lv.target_c)


def _stop_after(run: RunData) -> int | None:
    """The run's --stop-after-saturation, None when off (or a run without settings)."""
    settings = run.meta.settings
    return settings.stop_after_saturation if settings is not None and settings.stop_after_saturation >= 0 else None


def _crossover_lines(verdict: Verdict, levels: list[LevelComparison]) -> tuple[str, ...]:
    """'C = 6.1 (5.5-6.8), from 3 added levels' for each crossover of the verdict."""
    cs = [lv.target_c for lv in levels]
    refined = [lv.target_c for lv in levels if lv.refined]
    return tuple(crossing_statement(x, added_near(x, cs, refined)) for x in verdict.crossovers)


def _decompose(c: int, base: RunData, spec: RunData, b_win: StepWindow, s_win: StepWindow,
               seed: int) -> Decomposition | None:
    """The level's decomposition from the same measured ok requests the per-request figures use."""
    server = server_accept_source(in_window(spec.server_samples, *s_win.bounds)) if s_win.bounds else None
    return decompose_level(c, measured_ok(base.records, b_win), measured_ok(spec.records, s_win),
                           server_accept=server, seed=seed)


def _with_load_why(levels: list[LevelComparison], spec_rows: list[StepRow],
                   caps: tuple[int | None, int | None]) -> list[LevelComparison]:
    """Each level's why line, extended by what moved its ratio since the lowest level (``why.load_why``; only
    levels both runs measured in full take part, ``why.well_measured``), which then replaces the line's own note
    on the server's acceptance."""
    found = [lv.decomposition for lv in levels
             if lv.decomposition is not None and well_measured(lv.baseline, lv.spec)]
    out = []
    for lv in levels:
        extra = load_why(found, lv.target_c)
        if extra:
            own = level_why(lv.baseline, lv.spec, spec_rows, acceptance=False, caps=caps)
            lv = replace(lv, why="; ".join(t for t in (own, extra) if t))
        out.append(lv)
    return out


def _declared_cap(run: RunData) -> int | None:
    """The server's declared cap on running requests (meta.json ``max_running_requests``), None if not an integer."""
    cap = run.meta.server.get("max_running_requests")
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None


def _error_limit(*runs: RunData) -> float:
    """The strictest --max-error-rate either run was made with (the default for older runs)."""
    given = [r.meta.settings.max_error_rate for r in runs if r.meta.settings is not None]
    return min(given) if given else DEFAULT_MAX_ERROR_RATE


def _role_name(role: str, run: RunData) -> str:
    label = run_label(run) or run.path.name
    return role if label == role else f"{role} ({label})"


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def level_interval(base: ThroughputEstimate, spec: ThroughputEstimate, rng: np.random.Generator,
                   n_boot: int) -> tuple[tuple[float, float] | None, str | None]:
    """The ratio interval and its method: Welch t on batch means when both runs support them, else the
    conservative bootstrap over whatever batches each run has (the old method; needs >= 5 a side)."""
    if base.method == BATCH_MEANS and spec.method == BATCH_MEANS:
        found = ratio_interval_t(base, spec)
        if found is not None:
            return found, BATCH_MEANS
    found = ratio_interval(base.batches, spec.batches, rng=rng, n_boot=n_boot)
    return (found, "lifetime_batches") if found is not None else (None, None)


def _estimate(run: RunData, window: StepWindow, row: StepRow) -> ThroughputEstimate:
    if window.bounds is None:
        return estimate_throughput([], 0.0, 0.0, None)
    t0, t1 = window.bounds
    return estimate_throughput(overlapping(run.records, t0, t1), t0, t1, row.e2e_p50_s)


def _no_interval(c: int, *sides: tuple[RunSummary, ThroughputEstimate]) -> ValidityWarning:
    short = [f"{summary.name}'s {est.reason}" for summary, est in sides if est.n < MIN_BATCHES]
    reason = "; ".join(short) or "no throughput in a window"
    return ValidityWarning(NO_INTERVAL, f"C={c}: no 95% interval for the ratio: {reason}; run the step longer",
                           None, c)
