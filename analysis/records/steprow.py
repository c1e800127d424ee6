"""``StepRow``: one step's figures, the row of a run's step table.

Its own module, under both the table that fills it (``analysis.records.summary``) and the checks that read it
(``analysis.records.checks``), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.contract.policy import MIN_PERCENTILE_REQUESTS


@dataclass(frozen=True)
class StepRow:
    """One ladder step's figures. Times in seconds, speeds in output tokens per second; None = no data."""

    step: int
    target_c: int
    achieved_c: float | None  # time-averaged requests in flight in the window, all statuses
    window_start_s: float | None
    window_end_s: float | None
    window_s: float | None
    partial: bool  # window rebuilt from records of a killed run
    requests_ok: int  # ok requests that started and finished in the window (open loop: sent in it)
    requests_total: int  # all requests that started and finished in the window (open loop: sent in it)
    failures: dict[str, int]  # status -> count among requests_total
    error_rate: float | None  # failures / requests_total
    min_requests: int  # requests the step needed: the ladder's min_requests, else max(30, 3*C)
    throughput_tok_s: float | None  # ok-request tokens that arrived in the window / window length
    per_request_tok_s: float | None  # mean over ok requests of output_tokens / e2e_s
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None  # per-token ITL pooled over the step's ok requests
    itl_p99_s: float | None
    tpot_p50_s: float | None  # (e2e - ttft) / (output_tokens - 1) per request
    tpot_p99_s: float | None
    e2e_avg_s: float | None
    e2e_p50_s: float | None
    e2e_p99_s: float | None
    accept_length: float | None  # total output tokens / total verify passes (speculative runs)
    chunk_counted_requests: int  # ok requests whose output_tokens were counted from chunks
    flags: tuple[str, ...] = ()  # warning codes that concern this step
    # The largest (output tokens - 1) / verify passes of one request: what its decode passes yielded, which no
    # pass can make more than its drafts + 1 of (analysis.records.passbound).
    most_tokens_per_pass: float | None = None
    # The server's side of the window (server_metrics.jsonl; analysis.records.server_side), None without samples.
    server_samples: int = 0
    server_running: float | None = None  # mean requests running, as the server counts them
    server_running_max: float | None = None
    server_queued: float | None = None  # mean requests waiting for a batch slot
    server_kv_usage: float | None = None  # mean KV-cache use, 0..1
    server_accept_length: float | None = None  # tokens per verify pass, as the server counts them
    server_accept_by_position: tuple[float, ...] | None = None  # accepted share of verify passes per draft position
    server_gen_tok_s: float | None = None  # the server's generation-token counter as a rate
    server_token_gap: float | None = None  # server_gen_tok_s / server_client_tok_s - 1
    server_client_tok_s: float | None = None  # the client's tokens over the seconds the gap is judged on (#61)
    client_cpu_max: float | None = None  # the busiest load process's CPU over the step, 1.0 = one core
    client_paused_s: float = 0.0  # seconds the load process stood still during the step (steps.jsonl paused_s)
    send_lag_p50_ms: float | None = None  # from a user being ready to its request on the wire (send_lag_ms)
    send_lag_p90_ms: float | None = None
    client_read_lag_p90_ms: float | None = None  # the laggiest load process's event-loop lateness p90 (laghist)
    recv_lag_p90_ms: float | None = None  # p90 over the window's ok requests of recv_lag_ms (receive lag)
    merged_first_share: float | None = None  # first tokens dated with a later chunk (contract.window.merged_firsts)
    merged_first_late_p90_ms: float | None = None  # how late that may date them, p90 (merged_firsts)
    write_p90_ms: float | None = None  # p90 over the window's requests of write_ms (handing a request over)
    receive_clock: str | None = None  # the chunk times' clock ("kernel", "user", "mixed"; None: not said, as "user")
    target_rate: float | None = None  # open loop: requests/s asked for (target_c is then 0)
    achieved_rate: float | None = None  # open loop: requests sent in the window / window length
    dropped: int = 0  # open loop: requests due while every user was busy, never sent
    arrival_dispersion: float | None = None  # open loop: the send count's variance/mean (None: judged as Poisson)
    slo_requests: int | None = None  # with an SLO: requests sent in the window (all statuses)
    slo_attainment: float | None = None  # share of those that met every SLO target
    goodput_req_s: float | None = None  # requests meeting the SLO / window length
    goodput_tok_s: float | None = None  # in-window output tokens of requests meeting the SLO / window length
    # Offered work the server declined at once (status "refused": HTTP 429/503), apart from requests_total and
    # the error rate: how many, their share of requests_refused + requests_total, the client's mean back-off
    # after them (closed loop; 0 in open loop), how many carried a Retry-After, the HTTP statuses and the
    # longest Retry-After asked. A window that measured no work counts the step's own refusals, in it or before
    # it opened, so a server that refused everything is named, not an empty step.
    requests_refused: int = 0
    refused_share: float | None = None
    refusal_backoff_s: float | None = None
    refusals_retry_after: int = 0
    refusal_statuses: tuple[int, ...] = ()
    retry_after_max_s: float | None = None

    @property
    def level(self) -> float:
        """What the step held: its request rate in open loop, its concurrency in closed loop."""
        return self.target_rate if self.target_rate is not None else float(self.target_c)

    @property
    def level_text(self) -> str:
        return f"rate={self.target_rate:g}/s" if self.target_rate is not None else f"C={self.target_c}"
    throughput_ci_rel: float | None = None  # 95% half-width of throughput_tok_s, relative (None: no interval)
    throughput_ci_method: str | None = None  # batch_means, lifetime_batches (fallback) or none
    refined: bool = False  # a level added after the ladder to pin a crossover (steps.jsonl ``refined``)
    # The GPUs' side (--gpu-metrics; analysis.records.energy), summed over the GPUs. None: not measured (no
    # telemetry, or an exporter missed the window: energy_note says which), never zero.
    gpus: int = 0  # GPUs the run's telemetry names
    energy_j: float | None = None  # joules over the window
    energy_source: str | None = None  # counter (DCGM energy counter), power (power gauge integrated), counter+power
    energy_per_token_j: float | None = None  # energy_j / output tokens that arrived in the window
    gpu_power_w: float | None = None  # mean power over the window
    gpu_util_pct: float | None = None  # mean GPU utilisation, 0..100, averaged over the GPUs
    cost_per_mtok_usd: float | None = None  # with --gpu-hour-price: the GPUs' hours per million output tokens
    energy_cost_per_mtok_usd: float | None = None  # with --kwh-price: the GPUs' energy per million output tokens
    energy_note: str | None = None  # why there is no energy figure, when the run had telemetry
    energy_disputed: int = 0  # GPUs whose energy counter was impossible or disagreed with their power gauge

    @property
    def indicative_percentiles(self) -> bool:
        """Latency percentiles rest on ``requests_ok`` complete requests; under 30 they only indicate."""
        return self.requests_ok < MIN_PERCENTILE_REQUESTS
