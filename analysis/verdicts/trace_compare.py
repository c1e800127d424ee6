"""Which server serves a replayed trace better (#28): goodput under the SLO per side, with intervals, and a verdict.

Both runs replayed the same trace rows (``--trace``): row k of window w is the same request, sent at the same
moment of its window, on both servers, so the comparison is paired by row. Per side: SLO attainment (rows that
met every target / rows of the trace; a row never sent, or failed, counts as a miss), goodput (rows that met the
SLO per second of replayed window), latency percentiles and output throughput over the replay's makespan (first
send to last answer). Intervals: a paired moving-block bootstrap over the rows in trace order (blocks of about
sqrt(n) consecutive rows, resampled with replacement, the same blocks on both sides), because the rows of one
burst queue together and are not independent. The verdict names the server with more goodput when the 95%
interval of the goodput difference excludes 0, else says the trace does not separate them. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.records.goodput import meets_slo
from specbench.analysis.records.request_metrics import percentile_or_none, tpot_s, ttft_s
from specbench.contract.schema import RequestRecord, RunData
from specbench.contract.slo import Slo, parse_slo

N_BOOT = 2000


@dataclass(frozen=True)
class TraceSide:
    name: str
    rows: int  # rows of the replayed windows
    sent: int
    good: int  # rows that met the SLO
    window_s: float
    goodput_req_s: float
    goodput_ci: tuple[float, float] | None
    attainment: float
    attainment_ci: tuple[float, float] | None
    throughput_tok_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p99_s: float | None
    late_p50_s: float | None = None  # sent after the row's due time (start_s - scheduled_s)
    late_p99_s: float | None = None


@dataclass(frozen=True)
class TraceComparison:
    trace: str
    slo: str
    baseline: TraceSide
    spec: TraceSide
    goodput_ratio: float | None  # spec / baseline
    diff_ci: tuple[float, float] | None  # 95% interval of spec - baseline goodput, req/s
    verdict: str

    def lines(self) -> list[str]:
        """The report's lines: one per side, then the verdict."""
        out = [f"Trace replay of {self.trace} under {self.slo}:"]
        for side in (self.baseline, self.spec):
            out.append(f"  {side.name}: goodput {side.goodput_req_s:.3g} req/s{_ci(side.goodput_ci)}, "
                       f"attainment {side.attainment:.1%}{_ci(side.attainment_ci, pct=True)} of {side.rows} rows "
                       f"({side.sent} sent, {side.rows - side.sent} dropped or lost, sent late by p50/p99 "
                       f"{_ms(side.late_p50_s, 1)}/{_ms(side.late_p99_s, 1)}), {side.throughput_tok_s:.0f} tok/s, "
                       "TTFT p50/p99 "
                       f"{_ms(side.ttft_p50_s)}/{_ms(side.ttft_p99_s)}, TPOT p50/p99 {_ms(side.tpot_p50_s)}/"
                       f"{_ms(side.tpot_p99_s)}, E2E p50/p99 {_ms(side.e2e_p50_s)}/{_ms(side.e2e_p99_s)}")
        ratio = f"{self.goodput_ratio:.3g}" if self.goodput_ratio is not None else "-"
        diff = self.spec.goodput_req_s - self.baseline.goodput_req_s
        out.append(f"  goodput {self.spec.name} - {self.baseline.name}: {diff:+.3g} req/s{_ci(self.diff_ci)}, ratio "
                   f"{ratio}. Verdict: {self.verdict}")
        return out

    def to_json(self) -> dict[str, object]:
        from dataclasses import asdict

        return asdict(self)


def _ci(ci: tuple[float, float] | None, pct: bool = False) -> str:
    if ci is None:
        return ""
    return f" (95% CI {ci[0]:.1%} to {ci[1]:.1%})" if pct else f" (95% CI {ci[0]:.3g} to {ci[1]:.3g})"


def _ms(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value * 1000:.{digits}f} ms"


def _trace_rows(run: RunData) -> tuple[dict[tuple[int, int], RequestRecord], int, float, list[tuple[int, int]]]:
    """The run's replayed rows by (step, row): their records, the row count, the windows' length, row order."""
    rows: dict[tuple[int, int], RequestRecord] = {}
    keys: list[tuple[int, int]] = []
    window = 0.0
    for step in run.steps:
        if (steady_start := step.get("steady_start_s")) is None:
            continue
        window += step["end_s"] - steady_start
        keys += [(step["index"], k) for k in range(step["min_requests"])]
    for rec in run.records:
        if (step_index := rec.get("step")) is not None and rec.get("scheduled_s") is not None:
            rows[(step_index, rec["prompt_seq"])] = rec
    return rows, len(keys), window, keys


def _side(name: str, recs: dict[tuple[int, int], RequestRecord], keys: list[tuple[int, int]], window_s: float,
          good: np.ndarray, goodput_ci: tuple[float, float] | None, att_ci: tuple[float, float] | None) -> TraceSide:
    done = [recs[k] for k in keys if k in recs]
    ok = [r for r in done if r["status"] == "ok"]
    ttfts = [t for r in ok if (t := ttft_s(r)) is not None]
    tpots = [t for r in ok if (t := tpot_s(r)) is not None]
    e2es = [r["e2e_s"] for r in ok]
    late = [r["start_s"] - scheduled for r in done if (scheduled := r.get("scheduled_s")) is not None]
    tokens = sum(r.get("output_tokens") or 0 for r in ok)
    first = min((r["start_s"] for r in done), default=0.0)
    makespan = max((r["start_s"] + r["e2e_s"] for r in done), default=first) - first
    n_good = int(good.sum())
    return TraceSide(name, len(keys), len(done), n_good, window_s, n_good / window_s if window_s else 0.0,
                     goodput_ci, n_good / len(keys) if keys else 0.0, att_ci,
                     tokens / makespan if makespan > 0 else 0.0,
                     percentile_or_none(ttfts, 50), percentile_or_none(ttfts, 99),
                     percentile_or_none(tpots, 50), percentile_or_none(tpots, 99),
                     percentile_or_none(e2es, 50), percentile_or_none(e2es, 99),
                     percentile_or_none(late, 50), percentile_or_none(late, 99))


def _block_boot(good_b: np.ndarray, good_s: np.ndarray, seed: int = 0) -> np.ndarray:
    """Paired moving-block bootstrap: (N_BOOT, 2) resampled good counts of both sides."""
    n = len(good_b)
    size = max(1, round(math.sqrt(n)))
    starts = np.arange(0, n - size + 1)
    per = math.ceil(n / size)
    rng = np.random.default_rng(seed)
    picks = rng.choice(starts, size=(N_BOOT, per))
    idx = (picks[:, :, None] + np.arange(size)[None, None, :]).reshape(N_BOOT, -1)[:, :n]
    return np.stack([good_b[idx].sum(axis=1), good_s[idx].sum(axis=1)], axis=1)


def compare_trace(base: RunData, spec: RunData, names: Sequence[str] = ("baseline", "spec"),
                  slo: Slo | None = None) -> TraceComparison | None:
    """None unless both runs replayed the same trace; without an SLO in either run, the verdict says so."""
    b, s = base.meta.settings, spec.meta.settings
    if b is None or s is None or not b.trace or s.trace != b.trace:
        return None
    slo = slo or parse_slo(b.slo or s.slo)
    recs_b, n_b, win_b, keys = _trace_rows(base)
    recs_s, _n_s, win_s, _keys_s = _trace_rows(spec)
    judged = slo or Slo()  # without an SLO every successful row counts: the figures stay, the verdict does not
    verdict = "" if slo is not None else "no verdict: give an SLO (--slo) to judge goodput"
    good_b = np.array([k in recs_b and meets_slo(recs_b[k], judged) for k in keys], dtype=float)
    good_s = np.array([k in recs_s and meets_slo(recs_s[k], judged) for k in keys], dtype=float)
    ci_b = ci_s = att_b = att_s = diff_ci = None
    ratio = (good_s.sum() / win_s) / (good_b.sum() / win_b) if good_b.sum() and win_b and win_s else None
    if n_b >= 10 and win_b and win_s:
        boot = _block_boot(good_b, good_s)
        q = (2.5, 97.5)
        ci_b = tuple(np.percentile(boot[:, 0] / win_b, q))
        ci_s = tuple(np.percentile(boot[:, 1] / win_s, q))
        att_b = tuple(np.percentile(boot[:, 0] / n_b, q))
        att_s = tuple(np.percentile(boot[:, 1] / n_b, q))
        d = boot[:, 1] / win_s - boot[:, 0] / win_b
        diff_ci = (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5)))
    side_b = _side(names[0], recs_b, keys, win_b, good_b, ci_b, att_b)
    side_s = _side(names[1], recs_s, keys, win_s, good_s, ci_s, att_s)
    if not verdict:
        verdict = _verdict(side_b, side_s, diff_ci)
    return TraceComparison(b.trace, judged.text(), side_b, side_s, ratio, diff_ci, verdict)


def _verdict(b: TraceSide, s: TraceSide, ci: tuple[float, float] | None) -> str:
    """The server with more goodput when the interval of the difference excludes 0."""
    if b.good == 0 and s.good == 0:
        return "neither server meets the SLO on this trace"
    if ci is None:
        return "no verdict: too few rows for an interval (10 needed)"
    if ci[0] > 0:
        return f"{s.name} serves this traffic better (more goodput under the SLO)"
    if ci[1] < 0:
        return f"{b.name} serves this traffic better (more goodput under the SLO)"
    return "the trace does not separate the two servers: the goodput difference's interval includes 0"
