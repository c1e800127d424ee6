"""The columns of every printed table, defined once for the terminal and report.md alike."""

from __future__ import annotations

from specbench.analysis.records.summary import RunSummary, StepRow
from specbench.analysis.reporting.energy_report import energy_columns
from specbench.analysis.table import Column, fmt_interval, fmt_ms, fmt_num, fmt_pct, fmt_ratio, fmt_s, joined
from specbench.analysis.verdicts.categories import CategoryRow
from specbench.analysis.verdicts.compare import LevelComparison
from specbench.analysis.verdicts.recommend import SwitchLevel
from specbench.analysis.verdicts.slo_compare import SloLevel

METHOD_TAGS = {"batch_means": "bm", "lifetime_batches": "life"}


def _ci_cell(row: StepRow) -> str:
    if row.throughput_ci_rel is None:
        return "-"
    return f"+-{row.throughput_ci_rel:.1%} {METHOD_TAGS.get(row.throughput_ci_method or '', '')}".rstrip()


def _percentiles(row: StepRow, *cells: str) -> str:
    """Percentile cells, marked ``~`` when they rest on fewer than 30 complete requests (indicative)."""
    text = joined(*cells)
    return f"~{text}" if row.indicative_percentiles and text != joined() else text


#: Marks a level added after the ladder to pin a crossover (``REFINED_NOTE`` explains it under a table).
REFINED_MARK = "*"
REFINED_NOTE = "* level added after the ladder to pin the crossover (same settings and prompt order on every server)"
REFINED_RATE_NOTE = ("* rate added after the ladder to pin a capacity under the SLO (same settings and prompt order "
                     "on every server)")


STEP_COLUMNS: list[Column[StepRow]] = [
    Column("step", lambda r: str(r.step)),
    Column("C", lambda r: f"{r.target_c}{REFINED_MARK if r.refined else ''}"),
    Column("achieved C", lambda r: fmt_num(r.achieved_c)),
    Column("ok/total", lambda r: f"{r.requests_ok}/{r.requests_total}"),
    Column("tok/s", lambda r: fmt_num(r.throughput_tok_s)),
    Column("tok/s 95% CI", _ci_cell),
    Column("per-req tok/s", lambda r: fmt_num(r.per_request_tok_s)),
    Column("pct reqs", lambda r: str(r.requests_ok)),
    Column("TTFT p50/p99 ms", lambda r: _percentiles(r, fmt_ms(r.ttft_p50_s), fmt_ms(r.ttft_p99_s))),
    Column("ITL p50/p99 ms", lambda r: _percentiles(r, fmt_ms(r.itl_p50_s), fmt_ms(r.itl_p99_s))),
    Column("TPOT p50/p99 ms", lambda r: _percentiles(r, fmt_ms(r.tpot_p50_s), fmt_ms(r.tpot_p99_s))),
    Column("latency avg/p50/p99 s",
           lambda r: _percentiles(r, fmt_s(r.e2e_avg_s), fmt_s(r.e2e_p50_s), fmt_s(r.e2e_p99_s))),
    Column("accept len", lambda r: fmt_num(r.accept_length, 2)),
    Column("flags", lambda r: ",".join(r.flags), left=True),
]

RATE_COLUMNS: list[Column[StepRow]] = [
    Column("rate req/s", lambda r: f"{r.target_rate:g}" if r.target_rate is not None else "-"),
    Column("sent req/s", lambda r: fmt_num(r.achieved_rate, 2)),
    Column("dropped", lambda r: str(r.dropped)),
]

REFUSAL_COLUMNS: list[Column[StepRow]] = [
    Column("refused", lambda r: f"{r.requests_refused} ({fmt_pct(r.refused_share)})" if r.requests_refused else "0"),
    Column("back-off s", lambda r: fmt_num(r.refusal_backoff_s, 2)),
]

SLO_COLUMNS: list[Column[StepRow]] = [
    Column("SLO met", lambda r: fmt_pct(r.slo_attainment)),
    Column("goodput req/s", lambda r: fmt_num(r.goodput_req_s, 2)),
    Column("goodput tok/s", lambda r: fmt_num(r.goodput_tok_s)),
]


def step_columns(summary: RunSummary) -> list[Column[StepRow]]:
    """The step table's columns: open-loop runs show rates instead of C, runs judged by an SLO add its figures."""
    cols = list(STEP_COLUMNS)
    if summary.open_loop:
        cols[1:2] = RATE_COLUMNS
    if summary.slo is not None:
        cols[-1:-1] = SLO_COLUMNS
    cols[-1:-1] = energy_columns(summary.rows)  # with --gpu-metrics telemetry
    if any(r.requests_refused for r in summary.rows):  # a server that declined work at once (429/503)
        cols[-1:-1] = REFUSAL_COLUMNS
    return cols


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def fmt_positions(rates: tuple[float, ...] | None) -> str:
    """'0.82/0.61/0.40': the acceptance rate at draft positions 0, 1, 2...; '-' when not exported."""
    return "-" if rates is None else "/".join(f"{v:.2f}" for v in rates)


def _gap(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


SERVER_COLUMNS: list[Column[StepRow]] = [
    Column("step", lambda r: str(r.step)),
    Column("C", lambda r: str(r.target_c)),
    Column("samples", lambda r: str(r.server_samples)),
    Column("running avg/max", lambda r: joined(fmt_num(r.server_running), fmt_num(r.server_running_max, 0))),
    Column("queued avg", lambda r: fmt_num(r.server_queued)),
    Column("KV use", lambda r: _pct(r.server_kv_usage)),
    Column("server accept len", lambda r: fmt_num(r.server_accept_length, 2)),
    Column("accept by position", lambda r: fmt_positions(r.server_accept_by_position)),
    Column("server tok/s", lambda r: fmt_num(r.server_gen_tok_s)),
    Column("client tok/s same span", lambda r: fmt_num(r.server_client_tok_s)),
    Column("token gap", lambda r: _gap(r.server_token_gap)),
    Column("client CPU", lambda r: _pct(r.client_cpu_max)),
    Column("send lag p50/p90 ms", lambda r: joined(fmt_num(r.send_lag_p50_ms, 1), fmt_num(r.send_lag_p90_ms, 1))),
    Column("read lag p90 ms", lambda r: fmt_num(r.client_read_lag_p90_ms, 1)),
    Column("write p90 ms", lambda r: fmt_num(r.write_p90_ms, 2)),
]


def server_columns(summary: RunSummary) -> list[Column[StepRow]]:
    """The server-side table's columns: an open-loop run's steps are named by rate (their C is 0)."""
    cols = list(SERVER_COLUMNS)
    if summary.open_loop:
        cols[1] = RATE_COLUMNS[0]
    return cols


def has_server_side(rows: list[StepRow]) -> bool:
    """Whether the server-side table has anything to show (samples, or the client's CPU)."""
    return any(r.server_samples or r.client_cpu_max is not None or r.send_lag_p90_ms is not None for r in rows)


LEVEL_COLUMNS: list[Column[LevelComparison]] = [
    Column("C", lambda lv: f"{lv.target_c}{REFINED_MARK if lv.refined else ''}"),
    Column("spec tok/s", lambda lv: fmt_num(lv.spec.throughput_tok_s)),
    Column("base tok/s", lambda lv: fmt_num(lv.baseline.throughput_tok_s)),
    Column("ratio", lambda lv: fmt_ratio(lv.ratio)),
    Column("95% CI", lambda lv: fmt_interval(lv.ratio_low, lv.ratio_high)),
    Column("CI method", lambda lv: METHOD_TAGS.get(lv.interval_method or "", "-"), left=True),
    Column("per-req ratio", lambda lv: fmt_ratio(lv.per_request_ratio)),
    Column("TTFT p50 ratio", lambda lv: fmt_ratio(lv.ttft_p50_ratio)),
    Column("latency p50 ratio", lambda lv: fmt_ratio(lv.e2e_p50_ratio)),
    Column("latency p99 ratio", lambda lv: fmt_ratio(lv.e2e_p99_ratio)),
    Column("spec accept len", lambda lv: fmt_num(lv.spec.accept_length, 2)),
    Column("winner", lambda lv: lv.winner or "-", left=True),
]

SWITCH_COLUMNS: list[Column[SwitchLevel]] = [
    Column("C", lambda s: str(s.target_c)),
    Column("runs", lambda s: s.uses, left=True),
    Column("policy tok/s", lambda s: fmt_num(s.switch_tok_s)),
    Column("always-on tok/s", lambda s: fmt_num(s.always_on_tok_s)),
    Column("always-off tok/s", lambda s: fmt_num(s.always_off_tok_s)),
    Column("vs always-on", lambda s: fmt_ratio(s.vs_always_on)),
    Column("vs always-off", lambda s: fmt_ratio(s.vs_always_off)),
]


def _prompt_cell(pid: str | None, value: float | None) -> str:
    return "-" if pid is None else f"{pid} {fmt_ratio(value)}"


CATEGORY_COLUMNS: list[Column[CategoryRow]] = [
    Column("category", lambda r: r.category, left=True, data=True),  # a prompt file's own label
    Column("prompts", lambda r: str(r.prompts)),
    Column("spec/base reqs", lambda r: f"{r.spec_requests}/{r.baseline_requests}"),
    Column("spec accept len", lambda r: fmt_num(r.accept_length, 2)),
    Column("spec per-req tok/s", lambda r: fmt_num(r.spec_per_request_tok_s)),
    Column("base per-req tok/s", lambda r: fmt_num(r.baseline_per_request_tok_s)),
    Column("speed-up", lambda r: fmt_ratio(r.speedup)),
    Column("best prompt", lambda r: _prompt_cell(r.best_prompt_id, r.best_prompt_speedup), left=True,
           data=True),
    Column("worst prompt", lambda r: _prompt_cell(r.worst_prompt_id, r.worst_prompt_speedup), left=True,
           data=True),
]


def slo_level_columns(open_loop: bool) -> list[Column[SloLevel]]:
    """The SLO table of a comparison: attainment and goodput of both servers per level."""
    return [
        Column("rate req/s" if open_loop else "C",
               lambda lv: f"{lv.level:g}{REFINED_MARK if lv.baseline.refined or lv.spec.refined else ''}"),
        Column("spec SLO met", lambda lv: fmt_pct(lv.spec.slo_attainment)),
        Column("base SLO met", lambda lv: fmt_pct(lv.baseline.slo_attainment)),
        Column("spec goodput req/s", lambda lv: fmt_num(lv.spec.goodput_req_s, 2)),
        Column("base goodput req/s", lambda lv: fmt_num(lv.baseline.goodput_req_s, 2)),
        Column("goodput ratio", lambda lv: fmt_ratio(lv.goodput_ratio)),
        Column("spec goodput tok/s", lambda lv: fmt_num(lv.spec.goodput_tok_s)),
        Column("base goodput tok/s", lambda lv: fmt_num(lv.baseline.goodput_tok_s)),
        Column("spec/base TTFT p99 ms", lambda lv: joined(fmt_ms(lv.spec.ttft_p99_s), fmt_ms(lv.baseline.ttft_p99_s))),
        Column("dropped spec/base", lambda lv: f"{lv.spec.dropped}/{lv.baseline.dropped}"),
    ]
