"""Calibration benchmark: drive profiles closed-loop and compare measured, analytic and seed tok/s.

``python benchmarks/calibrate.py [--speed N] [--levels 1,2,5,10,30,70,100,250] [--profiles baseline,eagle3]``

Each profile runs as a child process; C greenlet clients stream chat completions (max_tokens 512,
ignore_eos, the suite's prompts spread over the clients) and send the next request as soon as the
previous one ends. tok/s is counted in a steady window (from when every client is generating, or the
first completion above ``max_running_requests``, to a hard stop) from cumulative usage counts.
Columns: measured; ``analytic`` for the exact prompt mix in the window (weighting each request by the
share of its tokens inside the window); ``realized``, the same with the step counts the server really
drew (from its ledger), which isolates timing fidelity from acceptance sampling noise; ``suite`` =
analytic over all suite prompts; ``seed`` = the seed's figure x speed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gevent

from specbench.emulator import costmodel
from specbench.emulator.profile import Profile, ProfileError, load_profile
from specbench.emulator.textmodel import prompt_tokens
from specbench.locustfiles.target import start_emulator_process

from loadclient import Connection, StreamResult, closed_loop, window_throughput
from suiteprompts import PromptLike, load_suite_prompts

__all__ = ["SEED_TPS", "LevelResult", "as_chat", "format_table", "main", "measure_level", "run_profile",
           "seed_tps"]

SEED_TPS: dict[str, dict[int, float]] = {
    "baseline": {1: 92.6, 2: 159.7, 5: 292.5, 10: 457.2, 30: 711.0, 70: 784.2, 100: 761.6, 250: 772.1},
    "eagle3": {1: 77.5, 2: 125.1, 5: 183.2, 10: 239.6, 30: 299.5, 70: 337.7, 100: 338.8, 250: 340.9},
}
DEFAULT_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
CHAT_PATH = "/v1/chat/completions"


def as_chat(prompt: PromptLike) -> list[dict[str, Any]]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt


def seed_tps(profile_name: str, concurrency: int, speed: float) -> float | None:
    figure = SEED_TPS.get(profile_name, {}).get(concurrency)
    return None if figure is None else figure * speed


@dataclass
class LevelResult:
    profile: str
    concurrency: int
    measured_tps: float
    analytic_tps: float
    realized_tps: float
    suite_tps: float
    seed_tps: float | None
    window_s: float
    requests: int

    @property
    def error_vs_analytic(self) -> float:
        return self.measured_tps / self.analytic_tps - 1.0

    @property
    def error_vs_realized(self) -> float:
        return self.measured_tps / self.realized_tps - 1.0

    @property
    def suite_vs_seed(self) -> float | None:
        return None if self.seed_tps is None else self.suite_tps / self.seed_tps - 1.0


@dataclass
class _Sent:
    rid: str
    prompt: PromptLike
    result: StreamResult | None = None


def _window_start(results: list[list[StreamResult]], stop_s: float) -> float:
    """When every client is generating, or the first completion if some clients are still queued."""
    firsts = [c[0].first_token_s for c in results if c and c[0].first_token_s is not None]
    ends = [r.end_s for c in results for r in c if r.done]
    all_in = max(firsts) if len(firsts) == len(results) else stop_s
    return min(all_in, min(ends, default=stop_s))


def _tokens_inside(res: StreamResult, t0: float, t1: float) -> int:
    previous, inside = 0, 0
    for when, count in zip(res.chunk_times, res.chunk_tokens, strict=True):
        if t0 < when <= t1:
            inside += count - previous
        previous = count
    return inside


def _realized_steps(record: dict[str, Any] | None, max_tokens: int) -> float | None:
    """Steps the request really needed (extrapolated to max_tokens if it was cut off at the stop)."""
    if not record or not record["tokens_per_step"]:
        return None
    steps, produced = record["tokens_per_step"], sum(record["tokens_per_step"])
    return len(steps) * max_tokens / produced


def _analytic(profile: Profile, concurrency: int, sent: list[_Sent], ledger: dict[str, dict[str, Any]],
              t0: float, t1: float, max_tokens: int) -> tuple[float, float]:
    """Analytic tok/s for the requests in the window, each weighted by its token share in the window:
    with the expected step counts of their prompts, and with the step counts the server really drew."""
    weight_sum = expected_sum = realized_sum = prompt_sum = 0.0
    for item in sent:
        inside = _tokens_inside(item.result, t0, t1) if item.result else 0
        if not inside:
            continue
        weight = inside / max_tokens
        expected = costmodel.expected_request_steps(profile, item.prompt, max_tokens)
        realized = _realized_steps(ledger.get(item.rid), max_tokens)
        weight_sum += weight
        expected_sum += weight * expected
        realized_sum += weight * (realized if realized is not None else expected)
        prompt_sum += weight * prompt_tokens(item.prompt, profile.chars_per_token)
    prompt_mean, n = prompt_sum / weight_sum, float(max_tokens)
    return (costmodel.closed_loop_throughput(profile, concurrency, n, expected_sum / weight_sum, prompt_mean),
            costmodel.closed_loop_throughput(profile, concurrency, n, realized_sum / weight_sum, prompt_mean))


def measure_level(url: str, profile: Profile, concurrency: int, prompts: Sequence[PromptLike], max_tokens: int,
                  duration_s: float) -> tuple[float, float, float, float, int]:
    """Run one closed-loop level.

    Returns (measured tok/s, analytic for the mix, analytic with the realized acceptance, window s, requests).
    """
    chats = [as_chat(p) for p in prompts]
    stride = max(1, len(chats) // concurrency)
    sent: dict[tuple[int, int], _Sent] = {}
    _fetch_ledger(url, clear=True)

    def payload(client: int, k: int) -> tuple[str, dict[str, Any]]:
        item = _Sent(f"cal-{client}-{k}", chats[(client * stride + k) % len(chats)])
        sent[client, k] = item
        return CHAT_PATH, {"messages": item.prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                           "rid": item.rid, "stream_options": {"continuous_usage_stats": True}}

    stop_s = time.time() + duration_s
    results = closed_loop(url, concurrency, payload, stop_at_s=stop_s)
    for client, client_results in enumerate(results):
        for k, res in enumerate(client_results):
            sent[client, k].result = res
    wait_idle(url)
    ledger = {r["rid"]: r for r in _fetch_ledger(url, clear=True)}
    t0 = _window_start(results, stop_s)
    measured = window_throughput(results, t0, stop_s)
    analytic, realized = _analytic(profile, concurrency, list(sent.values()), ledger, t0, stop_s, max_tokens)
    return measured, analytic, realized, stop_s - t0, len(sent)


def _fetch_ledger(url: str, *, clear: bool) -> list[dict[str, Any]]:
    conn = Connection(url)
    try:
        status, body = conn.request("GET", "/_emulator/requests" + ("?clear=1" if clear else ""))
        return json.loads(body) if status == 200 else []
    finally:
        conn.close()


def wait_idle(url: str, timeout_s: float = 30.0) -> None:
    """Wait until the server has neither running nor queued requests (after a level was cut off)."""
    conn = Connection(url)
    deadline = time.time() + timeout_s
    try:
        while time.time() < deadline:
            status, body = conn.request("GET", "/_emulator/stats")
            stats = json.loads(body)
            if status == 200 and stats["running"] == 0 and stats["waiting"] == 0:
                return
            gevent.sleep(0.05)
    finally:
        conn.close()


def run_profile(name: str, *, speed: float, levels: Sequence[int], max_tokens: int = 512,
                prompts: Sequence[PromptLike] | None = None, lifetimes: float = 2.5, min_window_s: float = 1.0,
                max_level_s: float = 120.0) -> list[LevelResult]:
    """Calibrate one profile at each concurrency level; each level lasts about ``lifetimes`` request lives."""
    profile = load_profile(name, speed=speed)
    prompts = list(prompts) if prompts is not None else load_suite_prompts()[0]
    chats = [as_chat(p) for p in prompts]
    out: list[LevelResult] = []
    with start_emulator_process(name, speed=speed) as emu:
        url = emu.url
        for level in levels:
            suite = costmodel.expected_throughput_for_prompts(profile, level, chats, max_tokens)
            in_batch = min(level, profile.max_running_requests)
            lifetime_s = in_batch * max_tokens / suite
            duration = min(max_level_s, max(min_window_s, lifetimes * lifetime_s) + lifetime_s)
            measured, analytic, realized, window, count = measure_level(url, profile, level, prompts, max_tokens,
                                                                        duration)
            out.append(LevelResult(name, level, measured, analytic, realized, suite, seed_tps(name, level, speed),
                                   window, count))
    return out


def format_table(rows: Sequence[LevelResult], speed: float) -> str:
    lines = [f"tok/s at speed {speed:g} (divide by {speed:g} for real-time figures)",
             f"{'profile':<12}{'C':>5}{'measured':>10}{'analytic':>10}{'meas/an':>9}{'realized':>10}{'meas/re':>9}"
             f"{'suite':>9}{'seed':>9}{'suite/seed':>11}{'window_s':>9}{'reqs':>6}"]
    for r in rows:
        seed = f"{r.seed_tps:9.1f}" if r.seed_tps is not None else f"{'-':>9}"
        vs_seed = f"{r.suite_vs_seed:+10.1%}" if r.suite_vs_seed is not None else f"{'-':>10}"
        lines.append(f"{r.profile:<12}{r.concurrency:>5}{r.measured_tps:10.1f}{r.analytic_tps:10.1f}"
                     f"{r.error_vs_analytic:+9.1%}{r.realized_tps:10.1f}{r.error_vs_realized:+9.1%}"
                     f"{r.suite_tps:9.1f}{seed} {vs_seed}{r.window_s:9.1f}{r.requests:6d}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/calibrate.py", description=__doc__.split("\n")[0])
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--levels", default=",".join(map(str, DEFAULT_LEVELS)))
    parser.add_argument("--profiles", default="baseline,eagle3")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--lifetimes", type=float, default=2.5, help="window length in request lifetimes")
    parser.add_argument("--max-level-s", type=float, default=120.0)
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    prompts, source = load_suite_prompts()
    print(f"prompts: {len(prompts)} from {source}; max_tokens {args.max_tokens}, ignore_eos, chat route", flush=True)
    rows: list[LevelResult] = []
    try:
        for name in args.profiles.split(","):
            rows += run_profile(name.strip(), speed=args.speed, levels=levels, max_tokens=args.max_tokens,
                                prompts=prompts, lifetimes=args.lifetimes, max_level_s=args.max_level_s)
            print(format_table([r for r in rows if r.profile == name.strip()], args.speed), flush=True)
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
