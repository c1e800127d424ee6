"""One run's per-step table: the figures ``summarize`` prints, the reports reuse and ``compare`` pairs up.

Every figure comes from the records through one definition (``contract.window`` for window figures,
``analysis.records.request_metrics`` for per-request ones); nothing is taken from the live ladder's own numbers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specbench.analysis.records.cacheshare import CacheShare, run_cache_share, witness_disagreement
from specbench.analysis.records.checks import (
    CACHE_WITNESSES_DISAGREE,
    CHUNK_COUNTED_TOKENS,
    IMPOSSIBLE_ACCEPT_LENGTH,
    META_CONTRADICTED,
    SERVER_GAUGE_STALE,
    ValidityWarning,
    run_warnings,
    step_warnings,
)
from specbench.analysis.records.energy import Prices, gpu_series, with_energy
from specbench.analysis.records.gaugecheck import stale_gauges
from specbench.analysis.records.goodput import sent_in, slo_figures
from specbench.analysis.records.metafacts import contradiction, requested_max_tokens
from specbench.analysis.records.passbound import bound_accept_lengths, pass_limit
from specbench.analysis.records.request_metrics import (
    acceptance_length,
    itl_percentiles_s,
    mean_or_none,
    most_tokens_per_pass,
    per_request_tok_s,
    percentile_or_none,
    tpot_s,
    ttft_s,
)
from specbench.analysis.records.server_side import server_step
from specbench.analysis.records.steprow import StepRow
from specbench.analysis.records.steps import StepWindow, overlapping, step_windows, window_from_step
from specbench.analysis.stats.batch_means import estimate_throughput
from specbench.contract.policy import default_min_requests, default_min_requests_at_rate
from specbench.contract.rundir import RunDir
from specbench.contract.schema import NOT_SERVER_FAILURES, REFUSED, RequestRecord, RunData, RunMeta, StepRecord
from specbench.contract.server_metrics import ServerMetricsSample
from specbench.contract.slo import Slo, SloError, parse_slo
from specbench.contract.window import (
    achieved_concurrency,
    measured_in_window,
    merged_firsts,
    recv_lag_p90,
    send_lag_percentiles,
    window_throughput,
    write_p90,
)


@dataclass(frozen=True)
class RunSummary:
    """A run's identity, its per-step rows and every validity warning about it."""

    name: str  # how outputs refer to the run: meta label, else the directory name
    path: Path
    meta: RunMeta
    has_meta: bool
    rows: list[StepRow]
    warnings: list[ValidityWarning] = field(default_factory=list)
    skipped_lines: int = 0
    cached_share: float | None = None  # prompt tokens the server served from its cache: requests, else counters
    server_samples: list[ServerMetricsSample] = field(default_factory=list)  # for the timeline plot
    slo: Slo | None = None  # the SLO the rows' attainment and goodput were judged by
    cache: CacheShare | None = None  # cached_share's source and both witnesses (analysis.records.cacheshare)
    requested_max_tokens: tuple[int, ...] = ()  # what the requests asked for (analysis.records.metafacts, #70)

    @property
    def open_loop(self) -> bool:
        return any(r.target_rate is not None for r in self.rows)

    def row_at(self, target_c: int) -> StepRow | None:
        """The last step with this target concurrency that has a window (a re-run step wins)."""
        rows = [r for r in self.rows if r.target_c == target_c and r.window_s]
        return rows[-1] if rows else None


def superseded(rows: Sequence[StepRow]) -> set[int]:
    """Steps measured again later (#61): a closed-loop step with no window, or none finished in it, when a later
    step at the same level finished requests in its window. The later one is the level's row; the earlier is
    history (its line in steps.jsonl stays), not a second row or a warning about a level that was measured."""
    gone = set()
    for i, row in enumerate(rows):
        if row.target_rate is None and (not row.window_s or row.requests_ok == 0) and any(
                later.target_rate is None and later.target_c == row.target_c and later.window_s
                and later.requests_ok > 0 for later in rows[i + 1:]):
            gone.add(row.step)
    return gone


def run_label(run: RunData) -> str:
    """The run's --label ('' when it has no meta.json)."""
    return run.meta.settings.label if run.meta.settings else ""


def run_slo(run: RunData) -> Slo | None:
    """The SLO the run was started with (meta.json settings), None when it had none or it does not parse."""
    try:
        return parse_slo(run.meta.settings.slo if run.meta.settings else "")
    except SloError:
        return None


def summarize_run(run: RunData, *, name: str | None = None, slo: Slo | None = None,
                  prices: Prices | None = None) -> RunSummary:
    """Per-step rows and validity warnings for one run directory's data.

    ``slo``: judge attainment and goodput by this SLO; default: the one the run was started with (if any).
    ``prices``: cost the steps at these prices; default: the run's own ``--gpu-hour-price`` / ``--kwh-price``.
    """
    run_name = name or run_label(run) or run.path.name
    slo = slo if slo is not None else run_slo(run)
    rows: list[StepRow] = []
    warnings: list[ValidityWarning] = []
    step_lines = {s["index"]: s for s in run.steps}
    gpus = gpu_series(run.gpu_samples)
    hour_price, kwh_price = (prices or Prices()).for_run(run.meta.settings)
    flagged = []
    for window in step_windows(run):
        row = with_energy(with_server_side(summarize_step(run, window, slo), run, window), gpus, hour_price,
                          kwh_price)
        flagged.append(flag_step(run_name, with_step_line(row, step_lines.get(window.index))))
    gone = superseded([row for row, _ in flagged])
    for row, found in flagged:
        if row.step not in gone:
            warnings.extend(found)
            rows.append(row)
    # An acceptance length no pass can give is a counting error: flagged and left out, never shown (#60).
    rows, impossible = bound_accept_lengths(rows, pass_limit(run.meta.server.get("speculative"), run.server_samples))
    warnings.extend(ValidityWarning(IMPOSSIBLE_ACCEPT_LENGTH, f"{run_name}, {text}", run_name) for text in impossible)
    # Running/waiting gauges far below the client's concurrency while the server's counter agrees: not current.
    rows, stale = stale_gauges(rows)
    warnings.extend(ValidityWarning(SERVER_GAUGE_STALE, f"{run_name}, {text}", run_name) for text in stale)
    has_meta = RunDir(run.path).has_meta()
    warnings.extend(run_warnings(run_name, run, has_meta=has_meta, rows=rows))
    requested = requested_max_tokens(run.records)
    contradicted = contradiction(run.meta.settings, requested) if has_meta else None
    if contradicted:
        warnings.append(ValidityWarning(META_CONTRADICTED, f"{run_name}: {contradicted}", run_name))
    cache = run_cache_share(run.records, run.server_samples, run.meta.server.get("kind"))
    disagreement = witness_disagreement(cache)
    if disagreement:
        warnings.append(ValidityWarning(CACHE_WITNESSES_DISAGREE, f"{run_name}: {disagreement}", run_name))
    return RunSummary(run_name, run.path, run.meta, has_meta, rows, warnings, run.skipped_lines,
                      cache.share, run.server_samples, slo, cache, requested)


def with_step_line(row: StepRow, step: StepRecord | None) -> StepRow:
    """The row with what its steps.jsonl line adds to the records: the load processes' CPU, standstill and read lag
    over the step, and whether it was added by refinement. One place, so the web UI's final rows flag a step as
    ``summarize`` does."""
    if step is None:
        return replace(row, client_cpu_max=None, client_paused_s=0.0, client_read_lag_p90_ms=None, refined=False)
    load_cpu, read_lag = step.get("load_cpu"), step.get("read_lag_p90_ms")
    return replace(row, client_cpu_max=max(load_cpu.values()) / 100.0 if load_cpu else None,
                   client_paused_s=float(step.get("paused_s") or 0.0),
                   client_read_lag_p90_ms=max(read_lag.values()) if read_lag else None,
                   refined=bool(step.get("refined")))


def closed_step_row(run_name: str, step: StepRecord, records: Sequence[RequestRecord]
                    ) -> tuple[StepRow, list[ValidityWarning]]:
    """A closed step's row and warnings from its steps.jsonl line and the records in flight during its window:
    what ``summarize`` prints for it, less the server's and the GPUs' figures. The ladder's step line and the web
    UI's final row are this, so the terminal, the tab and the report say one thing about a step (#61)."""
    return flag_step(run_name, with_step_line(step_figures(records, window_from_step(step)), step))


def flag_step(run_name: str, row: StepRow) -> tuple[StepRow, list[ValidityWarning]]:
    """The row with its flags filled in, and the warnings behind them."""
    found = step_warnings(run_name, row)
    codes = [w.code for w in found] + ([CHUNK_COUNTED_TOKENS] if row.chunk_counted_requests else [])
    return replace(row, flags=tuple(dict.fromkeys(codes))), found


def summarize_step(run: RunData, window: StepWindow, slo: Slo | None = None) -> StepRow:
    """The figures of one step (flags are filled in by ``summarize_run``)."""
    return step_figures(run.records, window, slo)


def step_figures(records: Sequence[RequestRecord], window: StepWindow, slo: Slo | None = None) -> StepRow:
    """A step's figures from any set of records holding those in flight during its window.

    The live web-UI tab calls this on the master's records as a run goes, ``summarize`` on the run directory.
    """
    if window.min_requests:
        min_requests = window.min_requests
    elif window.target_rate is not None:
        min_requests = default_min_requests_at_rate(window.target_rate)
    else:
        min_requests = default_min_requests(window.target_c)
    if window.bounds is None:
        return replace(_empty_row(window, min_requests), target_rate=window.target_rate, dropped=window.dropped,
                       arrival_dispersion=window.arrival_dispersion, receive_clock=window.receive_clock,
                       **refusal_figures(own_refused(records, window), 0))
    t0, t1 = window.bounds
    nearby = overlapping(records, t0, t1)
    # Closed loop: requests that started and finished in the window. Open loop: every request sent in it (the
    # slowest finish after the window; leaving them out would flatter an overloaded level's latencies).
    inside = sent_in(nearby, t0, t1) if window.target_rate is not None else measured_in_window(nearby, t0, t1)
    inside = [r for r in inside if r["status"] not in NOT_SERVER_FAILURES]
    refused = [r for r in inside if r["status"] == REFUSED]  # offered work declined at once: not a failure
    inside = [r for r in inside if r["status"] != REFUSED]
    if not inside:  # a window that measured no work: the step's refusals, in its window or before it opened
        refused = own_refused(records, window) or refused
    ok = [r for r in inside if r["status"] == "ok"]
    failures = Counter(r["status"] for r in inside if r["status"] != "ok")
    speeds = [s for s in (per_request_tok_s(r) for r in ok) if s is not None]
    ttfts = [t for t in (ttft_s(r) for r in ok) if t is not None]
    tpots = [t for t in (tpot_s(r) for r in ok) if t is not None]
    itl_p50, itl_p99 = itl_percentiles_s(ok, (50, 99))
    e2es = [r["e2e_s"] for r in ok]
    median_e2e = percentile_or_none(e2es, 50)
    estimate = estimate_throughput(nearby, t0, t1, median_e2e)
    ci = estimate.relative_halfwidth()
    lag_p50, lag_p90 = send_lag_percentiles(inside)
    merged = merged_firsts(inside)
    row = StepRow(
        step=window.index,
        target_c=window.target_c,
        achieved_c=achieved_concurrency(nearby, t0, t1),
        window_start_s=t0,
        window_end_s=t1,
        window_s=t1 - t0,
        partial=window.partial,
        requests_ok=len(ok),
        requests_total=len(inside),
        failures=dict(sorted(failures.items())),
        error_rate=sum(failures.values()) / len(inside) if inside else None,
        min_requests=min_requests,
        throughput_tok_s=window_throughput(nearby, t0, t1),
        per_request_tok_s=mean_or_none(speeds),
        ttft_p50_s=percentile_or_none(ttfts, 50),
        ttft_p99_s=percentile_or_none(ttfts, 99),
        itl_p50_s=itl_p50,
        itl_p99_s=itl_p99,
        tpot_p50_s=percentile_or_none(tpots, 50),
        tpot_p99_s=percentile_or_none(tpots, 99),
        e2e_avg_s=mean_or_none(e2es),
        e2e_p50_s=percentile_or_none(e2es, 50),
        e2e_p99_s=percentile_or_none(e2es, 99),
        accept_length=acceptance_length(ok),
        most_tokens_per_pass=most_tokens_per_pass(ok),
        chunk_counted_requests=sum(r.get("output_tokens_source") == "chunks" for r in ok),
        target_rate=window.target_rate,
        achieved_rate=len(sent_in(nearby, t0, t1)) / (t1 - t0) if window.target_rate is not None else None,
        dropped=window.dropped,
        arrival_dispersion=window.arrival_dispersion,
        throughput_ci_rel=ci if math.isfinite(ci) else None,
        throughput_ci_method=estimate.method,
        send_lag_p50_ms=lag_p50,
        send_lag_p90_ms=lag_p90,
        recv_lag_p90_ms=recv_lag_p90(inside),
        merged_first_share=merged.share if merged else None,
        merged_first_late_p90_ms=merged.late_p90_ms if merged else None,
        write_p90_ms=write_p90(inside),
        receive_clock=window.receive_clock,
        **refusal_figures(refused, len(inside)),
    )
    if slo is None:
        return row
    figures = slo_figures(nearby, t0, t1, slo)
    return replace(row, slo_requests=figures.requests, slo_attainment=figures.attainment,
                   goodput_req_s=figures.goodput_req_s, goodput_tok_s=figures.goodput_tok_s)


def own_refused(records: Sequence[RequestRecord], window: StepWindow) -> list[RequestRecord]:
    """The step's own refused requests, where its steps.jsonl line counts some: a window that opened after them
    (a server refusing everything lets the users' first requests end at once) would leave them unnamed, or
    name a few of them."""
    if not window.refused:
        return []
    return [r for r in records if r.get("step") == window.index and r["status"] == REFUSED]


def refusal_figures(refused: Sequence[RequestRecord], served: int) -> dict[str, Any]:
    """The row's refusals: how many, their share of the offered work (refused + served), the mean back-off the
    client applied after them, how many carried the server's Retry-After, their HTTP statuses and the longest
    Retry-After asked."""
    if not refused:
        return {}
    waits = [float(w) for r in refused if isinstance(w := r.get("backoff_s"), (int, float))]
    asked = [float(a) for r in refused if isinstance(a := r.get("retry_after_s"), (int, float))]
    return {"requests_refused": len(refused), "refused_share": len(refused) / (len(refused) + served),
            "refusal_backoff_s": mean_or_none(waits), "refusals_retry_after": len(asked),
            "refusal_statuses": tuple(sorted({int(s) for r in refused if (s := r.get("http_status")) in (429, 503)})),
            "retry_after_max_s": max(asked) if asked else None}


def with_server_side(row: StepRow, run: RunData, window: StepWindow) -> StepRow:
    """The row with the server's own figures over its window, when the run sampled ``/metrics``."""
    if window.bounds is None or not run.server_samples:
        return row
    t0, t1 = window.bounds
    side = server_step(run.server_samples, overlapping(run.records, t0, t1), t0, t1)
    if side is None:
        return row
    return replace(row, server_samples=side.samples, server_running=side.running,
                   server_running_max=side.running_max, server_queued=side.queued,
                   server_kv_usage=side.kv_cache_usage, server_accept_length=side.accept_length,
                   server_accept_by_position=side.accept_by_position,
                   server_gen_tok_s=side.gen_tok_s, server_token_gap=side.token_gap,
                   server_client_tok_s=side.client_tok_s)


def _empty_row(window: StepWindow, min_requests: int) -> StepRow:
    return StepRow(
        step=window.index, target_c=window.target_c, achieved_c=None, window_start_s=window.t0,
        window_end_s=window.t1, window_s=None, partial=window.partial, requests_ok=0, requests_total=0,
        failures={}, error_rate=None, min_requests=min_requests, throughput_tok_s=None,
        per_request_tok_s=None, ttft_p50_s=None, ttft_p99_s=None, itl_p50_s=None, itl_p99_s=None,
        tpot_p50_s=None, tpot_p99_s=None, e2e_avg_s=None, e2e_p50_s=None, e2e_p99_s=None,
        accept_length=None, chunk_counted_requests=0,
    )
