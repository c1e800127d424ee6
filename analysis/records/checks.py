"""Validity checks on one run: each problem becomes a warning with a stable code and a sentence.

The codes are part of the output contract (JSON, CSV flags, report); the sentences name the run and level
so a reader knows which number to distrust. Pairwise checks (two runs' settings) live in ``pair_checks``.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.analysis.records.energy import gpu_series
from specbench.analysis.records.server_side import MAX_TOKEN_GAP
from specbench.analysis.records.steprow import StepRow
from specbench.contract.evidence import DUPLICATE, left_out_text
from specbench.contract.gpu_metrics import MAX_GPU_POWER_W
from specbench.contract.policy import (
    CLIENT_BOUND_CPU,
    MIN_ACHIEVED_FRACTION,
    RETRY_AFTER_MAX_S,
    client_lag_limit_ms,
    client_lagged,
    lag_in_figures_ms,
    rate_held,
    read_lag_limit_ms,
    read_lagged,
)
from specbench.contract.schema import RunData

MAX_ERROR_RATE = 0.01  # more failures than this share of the window's requests
MAX_REFUSED_SHARE = 0.01  # more refusals (429/503 at once) than this share of the offered work: a notable share

# Stable warning codes (documented in analysis/README.md).
LOW_CONCURRENCY = "low_concurrency"
FEW_REQUESTS = "few_requests"
SINGLE_PROMPT = "single_prompt"
CHUNK_COUNTED_TOKENS = "chunk_counted_tokens"
ERROR_RATE = "error_rate"
PARTIAL_RUN = "partial_run"
NO_WINDOW = "no_window"
MISSING_META = "missing_meta"
SETTINGS_MISMATCH = "settings_mismatch"
SPEC_NOT_SPECULATIVE = "spec_not_speculative"
BASELINE_SPECULATIVE = "baseline_speculative"
SPEC_MAX_RUNNING_LOWER = "spec_max_running_lower"
UNMATCHED_LEVEL = "unmatched_level"
NO_INTERVAL = "no_interval"
PROMPT_CACHE_MISMATCH = "prompt_cache_mismatch"
SERVER_TOKEN_GAP = "server_token_gap"
CLIENT_BOUND = "client_bound"
CLIENT_LAG = "client_lag"
CLIENT_PAUSED = "client_paused"
CLIENT_READ_LAG = "client_read_lag"
DROPPED_REQUESTS = "dropped_requests"
LOW_RATE = "low_rate"
DUPLICATE_RECORDS = "duplicate_records"
IMPOSSIBLE_RECORDS = "impossible_records"
GPU_READINGS_REJECTED = "gpu_readings_rejected"
GPU_ENERGY_MISMATCH = "gpu_energy_mismatch"
NO_FINISHED_REQUESTS = "no_finished_requests"
IMPOSSIBLE_ACCEPT_LENGTH = "impossible_accept_length"
SERVER_GAUGE_STALE = "server_gauge_stale"
REFUSED_WORK = "refused_work"
CACHE_WITNESSES_DISAGREE = "cache_witnesses_disagree"
META_CONTRADICTED = "meta_contradicted"  # meta.json states a setting its records contradict (records.metafacts)
WARNING_CODES: tuple[str, ...] = (
    LOW_CONCURRENCY, FEW_REQUESTS, SINGLE_PROMPT, CHUNK_COUNTED_TOKENS, ERROR_RATE, PARTIAL_RUN, NO_WINDOW,
    MISSING_META, SETTINGS_MISMATCH, SPEC_NOT_SPECULATIVE, BASELINE_SPECULATIVE, SPEC_MAX_RUNNING_LOWER,
    UNMATCHED_LEVEL, NO_INTERVAL, PROMPT_CACHE_MISMATCH, SERVER_TOKEN_GAP, CLIENT_BOUND,
    DROPPED_REQUESTS, LOW_RATE, CLIENT_LAG, CLIENT_PAUSED, CLIENT_READ_LAG, DUPLICATE_RECORDS, IMPOSSIBLE_RECORDS,
    GPU_READINGS_REJECTED, GPU_ENERGY_MISMATCH, NO_FINISHED_REQUESTS, IMPOSSIBLE_ACCEPT_LENGTH, SERVER_GAUGE_STALE,
    REFUSED_WORK, CACHE_WITNESSES_DISAGREE, META_CONTRADICTED,
)


@dataclass(frozen=True)
class ValidityWarning:
    """A reason to distrust part of a result. ``run``/``target_c`` are None when the warning is broader."""

    code: str
    message: str
    run: str | None = None
    target_c: int | None = None


def step_warnings(run_name: str, row: StepRow) -> list[ValidityWarning]:
    """Warnings about one step's window: held concurrency, enough requests, errors, partial data; and, window or
    not, whether the load side limited it (a step with no window still says why it may have had none)."""
    where = f"{run_name}, {row.level_text}"
    problems: list[tuple[str, str]] = []
    if row.partial:
        rebuilt = "its window was rebuilt from its measured records" if row.window_s else "nothing was measured"
        problems.append((PARTIAL_RUN, f"the run was killed during this step (no steps.jsonl line); {rebuilt}"))
    if row.window_s is None:
        problems.append((NO_WINDOW, "no measured window (the step never reached steady state); no figures"))
    else:
        problems.extend(window_problems(row))
    problems.extend(client_problems(row))
    return [ValidityWarning(code, f"{where}: {text}", run_name, row.target_c) for code, text in problems]


def window_problems(row: StepRow) -> list[tuple[str, str]]:
    """What a step's measured window falls short of: its concurrency, rate, requests, errors, token counts."""
    found = []
    if row.achieved_c is not None and row.achieved_c < MIN_ACHIEVED_FRACTION * row.target_c:
        found.append((LOW_CONCURRENCY, f"achieved concurrency {row.achieved_c:.1f} is "
                      f"{row.achieved_c / row.target_c:.0%} of the target {row.target_c} (below 95%)"))
    found.extend(open_loop_problems(row))
    if row.requests_ok == 0 and row.target_rate is None:
        found.append((NO_FINISHED_REQUESTS, finished_none_text(row)))
    elif row.requests_ok < row.min_requests:
        found.append((FEW_REQUESTS, f"{row.requests_ok} successful requests measured, {row.min_requests} needed"))
    if row.error_rate is not None and row.error_rate > MAX_ERROR_RATE:
        kinds = ", ".join(f"{n} {status}" for status, n in row.failures.items())
        found.append((ERROR_RATE, f"error rate {row.error_rate:.1%} ({kinds} of {row.requests_total} requests)"))
    if refused_notably(row):
        found.append((REFUSED_WORK, refused_text(row)))
    if row.server_token_gap is not None and abs(row.server_token_gap) > MAX_TOKEN_GAP:
        found.append((SERVER_TOKEN_GAP, f"the server's generation-token counter ({row.server_gen_tok_s:.1f} tok/s) "
                      f"and the client's output tokens differ by {row.server_token_gap:+.1%} over the same seconds "
                      f"(over {MAX_TOKEN_GAP:.0%}): one of the two counts is wrong"))
    if row.energy_disputed:
        found.append((GPU_ENERGY_MISMATCH, f"energy {row.energy_note}"))
    return found


def refused_notably(row: StepRow) -> bool:
    """The server declined more than ``MAX_REFUSED_SHARE`` of the work offered at this level."""
    return row.refused_share is not None and row.refused_share > MAX_REFUSED_SHARE


def refused_text(row: StepRow) -> str:
    """What a level's refusals mean: the figures are those of the work the server took on, at less than the load
    asked for; how the client waited after them; the error rate leaves them out."""
    share = f"{row.refused_share or 0:.1%}"
    offered = row.requests_refused + row.requests_total
    if row.target_rate is not None:
        return (f"the server refused {share} of the arrivals ({row.requests_refused} of {offered} sent, answered "
                "429/503 at once; none was sent again): under an SLO they are misses, and the other figures "
                "describe only the work it took on; read this rate as past the server's queue limit")
    asked = (f" (it asked for up to {row.retry_after_max_s:g} s; honoured up to {RETRY_AFTER_MAX_S:g} s)"
             if row.retry_after_max_s is not None else "")
    retry = f", at least the server's Retry-After on {row.refusals_retry_after}{asked}" if row.refusals_retry_after \
        else ""
    return (f"the server refused {share} of the offered work ({row.requests_refused} of {offered} requests "
            f"answered {refusal_statuses_text(row)} at once, counted apart from failures); each refused user waited "
            f"{row.refusal_backoff_s or 0:.2f} s on average before sending again{retry}, so the server ran less "
            f"than C={row.target_c} and this level's figures are those of the work it took on: read it as past "
            "the server's queue limit, not as its speed at this load")


def refusal_statuses_text(row: StepRow) -> str:
    """'HTTP 503', 'HTTP 429/503': the statuses a level's refusals carried ('429/503' where none said: refusals
    inside a begun stream)."""
    return "HTTP " + "/".join(map(str, row.refusal_statuses)) if row.refusal_statuses else "429/503"


def finished_none_text(row: StepRow) -> str:
    """What a window without one finished request rests on (#61): its tok/s counts the tokens that arrived in it,
    honest as far as it goes, while per-request figures have no request to rest on and are left out."""
    tput = f"{row.throughput_tok_s:.1f} tok/s" if row.throughput_tok_s is not None else "its tok/s"
    return (f"no request started and finished inside its {row.window_s or 0:.1f} s window ({row.min_requests} "
            f"needed): {tput} rests only on the tokens that arrived in it from requests that finished after it "
            f"(achieved C {row.achieved_c or 0:.1f}); TTFT, per-request speed and latency have no request to rest "
            "on and are left out; give the level more time")


def client_problems(row: StepRow) -> list[tuple[str, str]]:
    """The load side limited the step: it stood still, a process ran hot over it, or requests went on the wire
    late."""
    found = []
    if row.client_paused_s > 0:
        found.append((CLIENT_PAUSED, f"the load process stood still for {row.client_paused_s:.1f} s during this step "
                      "(paused, suspended or frozen): no request was sent or read meanwhile, so its throughput and "
                      "latencies measure the client; no verdict at this level; run it again"))
    if row.client_cpu_max is not None and row.client_cpu_max > CLIENT_BOUND_CPU:
        found.append((CLIENT_BOUND, f"a load process used {row.client_cpu_max:.0%} of a core (over "
                      f"{CLIENT_BOUND_CPU:.0%}): the client may have limited this step (late reads inflate TTFT and "
                      "ITL, late sends lower throughput); run more load processes (--processes)"))
    if client_lagged(row.send_lag_p90_ms, row.ttft_p50_s):
        found.append((CLIENT_LAG, client_lag_text(row)))
    if read_lagged(row_read_lag_ms(row), row.ttft_p50_s):
        found.append((CLIENT_READ_LAG, merged_first_text(row) if row.receive_clock == "kernel" else read_lag_text(row)))
    return found


def row_read_lag_ms(row: StepRow) -> float | None:
    """The client's read lag that is in this step's TTFT and ITL (``contract.policy.lag_in_figures_ms``)."""
    return lag_in_figures_ms(row.client_read_lag_p90_ms, row.recv_lag_p90_ms, row.receive_clock,
                             row.merged_first_late_p90_ms)


def read_lag_text(row: StepRow) -> str:
    """Why a step's read lag matters, with its figures, its limit and the fix."""
    seen = []
    if row.recv_lag_p90_ms is not None:
        seen.append(f"stream bytes were read {row.recv_lag_p90_ms:.0f} ms after the kernel received them")
    if row.client_read_lag_p90_ms is not None:
        seen.append(f"a load process's event loop served ready streams {row.client_read_lag_p90_ms:.0f} ms late")
    return (f"{' and '.join(seen)} (p90; limit {read_lag_limit_ms(row.ttft_p50_s):.0f} ms: 10 ms or 5% of the "
            "median TTFT): TTFT and ITL as measured on the event loop's clock may be that much too long; run more "
            "load processes (--processes), or measure on the kernel's clock (--receive-clock kernel, Linux)")


def merged_first_text(row: StepRow) -> str:
    """On the kernel's clock: why first tokens dated with later chunks matter, with the figures and the fix."""
    assert row.merged_first_share is not None and row.merged_first_late_p90_ms is not None
    return (f"{row.merged_first_share:.0%} of the first tokens were read only after the next chunk had come, which "
            f"may date them up to {row.merged_first_late_p90_ms:.0f} ms late (p90, a chunk interval per chunk dated "
            f"with the first; limit {read_lag_limit_ms(row.ttft_p50_s):.0f} ms: 10 ms or 5% of the median TTFT): "
            "the kernel dates bytes that wait unread in a socket by the last arrival; run more load processes "
            "(--processes)")


def client_lag_text(row: StepRow) -> str:
    """Why a step's send lag matters, with its figure and the fix."""
    assert row.send_lag_p90_ms is not None
    return (f"send lag p90 {row.send_lag_p90_ms:.0f} ms (median {row.send_lag_p50_ms or 0:.0f} ms; limit "
            f"{client_lag_limit_ms(row.ttft_p50_s):.0f} ms): users' requests went on the wire late after they were "
            "ready, so the server saw less than the offered load (and ends that come in bursts pushed later sends "
            "further); run more load processes (--processes)")


def open_loop_problems(row: StepRow) -> list[tuple[str, str]]:
    """A rate step's drops, and a send rate short of the asked one beyond what chance explains."""
    found = []
    if row.dropped:
        found.append((DROPPED_REQUESTS, f"{row.dropped} request(s) fell due while all --max-in-flight users were "
                      "busy and were never sent; the server did not see the asked rate (raise --max-in-flight, "
                      "or read this level as overload)"))
    if row.target_rate is not None and row.achieved_rate is not None and row.window_s and not rate_held(
            round(row.achieved_rate * row.window_s), row.target_rate, row.window_s,
            1.0 if row.arrival_dispersion is None else row.arrival_dispersion):
        found.append((LOW_RATE, f"requests were sent at {row.achieved_rate:.3g}/s, short of the asked "
                      f"{row.target_rate:g}/s beyond what chance explains"))
    return found


def run_warnings(run_name: str, run: RunData, *, has_meta: bool, rows: list[StepRow]) -> list[ValidityWarning]:
    """Warnings about a whole run: missing or partial files, prompt diversity, token counting."""
    found: list[ValidityWarning] = []
    if not has_meta:
        found.append(ValidityWarning(MISSING_META, f"{run_name}: no meta.json; settings and server identity "
                                     "are unknown and cannot be checked", run_name))
    elif run.meta.partial and not any(r.partial for r in rows):
        found.append(ValidityWarning(PARTIAL_RUN, f"{run_name}: meta.json says the run did not end on its own",
                                     run_name))
    if run.skipped_lines:
        found.append(ValidityWarning(PARTIAL_RUN, f"{run_name}: {run.skipped_lines} torn line(s) in records.jsonl "
                                     "skipped (killed mid-write)", run_name))
    found.extend(left_out_warnings(run_name, run.left_out))
    rejected = sum(s.rejected for s in gpu_series(run.gpu_samples))
    if rejected:
        found.append(ValidityWarning(GPU_READINGS_REJECTED, f"{run_name}: {rejected} GPU reading(s) left out of the "
                                     "energy figures because no GPU can give them: not a finite number, negative, or "
                                     f"a power above {MAX_GPU_POWER_W:.0f} W", run_name))
    prompts = {r.get("prompt_id") for r in run.records if r.get("prompt_id") is not None}
    if len(prompts) == 1:
        found.append(ValidityWarning(SINGLE_PROMPT, f"{run_name}: every request used the same prompt "
                                     f"({next(iter(prompts))!r}); one prompt's acceptance rate is not the "
                                     "workload's", run_name))
    counted = [r for r in rows if r.chunk_counted_requests]
    if counted:
        total = sum(r.chunk_counted_requests for r in counted)
        levels = ", ".join(f"C={r.target_c}" for r in counted)
        found.append(ValidityWarning(CHUNK_COUNTED_TOKENS, f"{run_name}: {total} measured request(s) at {levels} "
                                     "counted output tokens from stream chunks (no server count); multi-token "
                                     "chunks make tok/s too low", run_name))
    return found


def left_out_warnings(run_name: str, left_out: dict[str, int]) -> list[ValidityWarning]:
    """The records ``load_run`` kept out of every figure (``contract.evidence``): repeated lines, and values no
    request can have, each with its count."""
    found = []
    if left_out.get(DUPLICATE):
        found.append(ValidityWarning(DUPLICATE_RECORDS, f"{run_name}: {left_out[DUPLICATE]} record line(s) repeat a "
                                     "request_id already read (records.jsonl written twice or concatenated); each "
                                     "request counted once", run_name))
    impossible = {k: n for k, n in left_out.items() if k != DUPLICATE}
    if impossible:
        found.append(ValidityWarning(IMPOSSIBLE_RECORDS, f"{run_name}: {sum(impossible.values())} record(s) left out "
                                     f"of every figure because no request can have them: {left_out_text(impossible)}",
                                     run_name))
    return found
