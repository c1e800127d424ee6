"""Coverage of the 95% throughput and ratio intervals, on emulator runs whose long-run truth is known.

``.venv/bin/python benchmarks/coverage.py [--seconds 30] [--windows 32] [--speed 10] [--max-tokens 24] [--seeds 1,2]``

Design (fast and honest): instead of hundreds of separate Locust runs, each (profile, C, seed) gets ONE long
closed-loop run against a real emulator process (its own seed, a prompt order offset by the seed); after a
warm-up of two request lifetimes the run is cut into many back-to-back windows. The truth for a window is
the run's long-run throughput: the mean over all its other windows (leave-one-out, so the truth never
contains the window it judges; with K windows this makes the check slightly stricter, not looser). The truth
of a ratio is the ratio of the two runs' long-run throughputs at the same C and seed; window i of the
baseline is paired with window i of the spec run (independent processes). Each window gets both methods'
intervals: the new batch means (``analysis.stats.batch_means``) and the fallback batches of one median request
(``analysis.stats.bootstrap``); a window where a method gives no interval is counted apart, not as a miss. The
emulator's analytic curve (``emulator.costmodel``) is printed beside the long-run figure as a sanity check.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gevent
import numpy as np

from specbench.analysis.stats.batch_means import LIFETIME, batch_means_estimate, ratio_interval_t
from specbench.analysis.stats.bootstrap import ratio_interval, window_batches
from specbench.contract.window import t975, window_throughput
from specbench.emulator import costmodel
from specbench.emulator.profile import load_profile
from specbench.locustfiles.target import start_emulator_process

from calibrate import CHAT_PATH, as_chat
from loadclient import Connection, StreamResult, closed_loop
from suiteprompts import load_suite_prompts

PROFILES = ("baseline", "eagle3")
LEVELS = (2, 5, 10, 30)
SEEDS = (1,)


@dataclass
class RunWindows:
    """One long run cut into windows: records, window edges, and the run's analytic throughput."""

    profile: str
    c: int
    seed: int
    records: list[dict[str, Any]]
    edges: list[tuple[float, float]]
    analytic: float
    throughputs: list[float] = field(default_factory=list)

    def truth(self, i: int) -> float:
        """Long-run throughput without window i: the mean of the run's other windows."""
        return (sum(self.throughputs) - self.throughputs[i]) / (len(self.throughputs) - 1)


@dataclass
class Tally:
    """Covered / with an interval, per method and figure."""

    covered: int = 0
    judged: int = 0
    no_interval: int = 0
    widths: list[float] = field(default_factory=list)

    def add(self, interval: tuple[float, float] | None, truth: float) -> None:
        if interval is None:
            self.no_interval += 1
            return
        self.judged += 1
        self.covered += interval[0] <= truth <= interval[1]
        self.widths.append((interval[1] - interval[0]) / 2 / truth)

    @property
    def rate(self) -> float:
        return self.covered / self.judged if self.judged else math.nan

    def line(self, name: str) -> str:
        width = statistics.median(self.widths) if self.widths else math.nan
        return (f"{name:<34}{self.covered:>5}/{self.judged:<5}{self.rate:>8.1%}   median +-{width:.1%}   "
                f"no interval: {self.no_interval}")


def to_records(results: list[list[StreamResult]]) -> list[dict[str, Any]]:
    """The client's streams as suite records (only the fields the window figures read)."""
    out: list[dict[str, Any]] = []
    for client, streams in enumerate(results):
        for res in streams:
            if not res.chunk_times:
                continue
            out.append({"start_s": res.sent_s, "e2e_s": res.end_s - res.sent_s, "user": f"0:{client}",
                        "status": "ok" if res.done and res.error is None else "truncated",
                        "chunk_ms": [(t - res.sent_s) * 1000.0 for t in res.chunk_times],
                        "chunk_tokens": list(res.chunk_tokens)})
    return out


def run_one(profile: str, c: int, seed: int, *, seconds: float, windows: int, speed: float,
            max_tokens: int, model_clock: bool = True) -> RunWindows:
    """One long closed-loop run at C, cut into ``windows`` windows after two lifetimes of warm-up."""
    prompts = [as_chat(p) for p in load_suite_prompts()[0]]
    offset = 37 * seed

    def payload(client: int, k: int) -> tuple[str, dict[str, Any]]:
        chat = prompts[(offset + client * 7 + k * c) % len(prompts)]
        return CHAT_PATH, {"messages": chat, "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                           "stream_options": {"continuous_usage_stats": True}}

    clock: list[tuple[float, float]] = []
    emu = start_emulator_process(profile, speed=speed, extra=["--seed", str(seed)])
    try:
        stop = time.time() + seconds
        watcher = gevent.spawn(_watch_clock, emu.url, stop, clock)
        results = closed_loop(emu.url, c, payload, stop_at_s=stop)
        watcher.join(timeout=2.0)
    finally:
        emu.stop()
    records = to_records(results)
    if model_clock and len(clock) > 10:
        records = to_model_clock(records, clock)
    lifetimes = [r["e2e_s"] for r in records if r["status"] == "ok"]
    first_end = min(r["start_s"] + r["e2e_s"] for r in records)
    t0 = first_end + 2 * statistics.median(lifetimes)
    t1 = max(r["start_s"] + r["e2e_s"] for r in records if r["status"] == "ok") - 0.05
    step = (t1 - t0) / windows
    edges = [(t0 + i * step, t0 + (i + 1) * step) for i in range(windows)]
    analytic = costmodel.expected_throughput_for_prompts(load_profile(profile, speed=speed), c, prompts, max_tokens)
    run = RunWindows(profile, c, seed, records, edges, analytic)
    run.throughputs = [window_throughput(records, a, b) for a, b in edges]
    return run


def _watch_clock(url: str, until: float, out: list[tuple[float, float]]) -> None:
    """Sample (wall time, the emulator's cumulative modelled step time) every 50 ms (``/_emulator/stats``).

    Samples whose round trip took over 20 ms are dropped: their wall time is too uncertain.
    """
    conn = Connection(url)
    try:
        while time.time() < until:
            sent = time.time()
            status, body = conn.request("GET", "/_emulator/stats")
            back = time.time()
            if status == 200 and back - sent < 0.02:
                out.append(((sent + back) / 2, float(json.loads(body)["modelled_s"])))
            gevent.sleep(0.05)
    finally:
        conn.close()


def to_model_clock(records: list[dict[str, Any]], clock: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """The records with every time moved onto the emulator's model clock (offset to the run's wall start).

    A stall of this shared machine stops the model clock too, so the emulated server is stationary on it.
    """
    wall = np.array([t for t, _ in clock])
    model = np.array([m for _, m in clock]) + wall[0]
    out = []
    for rec in records:
        start = float(np.interp(rec["start_s"], wall, model))
        arrivals = np.interp(rec["start_s"] + np.asarray(rec["chunk_ms"]) / 1000.0, wall, model)
        end = float(np.interp(rec["start_s"] + rec["e2e_s"], wall, model))
        out.append({**rec, "start_s": start, "e2e_s": end - start, "chunk_ms": list((arrivals - start) * 1000.0)})
    return out


def _median_e2e(records: Sequence[dict[str, Any]], a: float, b: float) -> float | None:
    inside = [r["e2e_s"] for r in records
              if r["status"] == "ok" and a <= r["start_s"] and r["start_s"] + r["e2e_s"] <= b]
    return statistics.median(inside) if inside else None


def _t_interval(batches: np.ndarray) -> tuple[float, float] | None:
    if len(batches) < 2:
        return None
    mean = float(batches.mean())
    half = t975(len(batches) - 1) * float(batches.std(ddof=1)) / math.sqrt(len(batches))
    return mean - half, mean + half


def tally_runs(runs: Sequence[RunWindows], *, n_boot: int = 500) -> dict[str, Tally]:
    """Coverage of both methods for throughput (every window) and ratio (paired baseline/spec windows)."""
    tallies = {key: Tally() for key in ("tput_new", "tput_old", "ratio_new", "ratio_old")}
    estimates: dict[tuple[str, int, int], list[tuple[Any, np.ndarray] | None]] = {}
    for run in runs:
        per_window = []
        for i, (a, b) in enumerate(run.edges):
            truth = run.truth(i)
            median = _median_e2e(run.records, a, b)
            new = batch_means_estimate(run.records, a, b, None)
            old = window_batches(run.records, a, b, median)
            for key, interval in (("tput_new", new.interval() if new else None),
                                  ("tput_old", _t_interval(old) if len(old) >= 5 else None)):
                tallies[key].add(interval, truth)
                tallies.setdefault(f"{key}@{run.c}", Tally()).add(interval, truth)
            per_window.append((new, old))
        estimates[run.profile, run.c, run.seed] = per_window
    by_key = {(r.profile, r.c, r.seed): r for r in runs}
    rng = np.random.default_rng(0)
    for (profile, c, seed), spec_windows in estimates.items():
        if profile == "baseline" or ("baseline", c, seed) not in estimates:
            continue
        base_run, spec_run = by_key["baseline", c, seed], by_key[profile, c, seed]
        base_windows = estimates["baseline", c, seed]
        # The two runs went at the same time: pair windows half a run apart, so that a stall of this machine
        # (which hits both clients at once) cannot correlate the two sides of a ratio.
        k = len(base_windows)
        for i, spec_pair in enumerate(spec_windows):
            j = (i + k // 2) % k
            base_pair = base_windows[j]
            if spec_pair is None or base_pair is None:
                continue
            (s_new, s_old), (b_new, b_old) = spec_pair, base_pair
            truth = spec_run.truth(i) / base_run.truth(j)
            new = ratio_interval_t(b_new, s_new) if b_new and s_new else None
            old = ratio_interval(b_old, s_old, rng=rng, n_boot=n_boot)
            for key, interval in (("ratio_new", new), ("ratio_old", old)):
                tallies[key].add(interval, truth)
                tallies.setdefault(f"{key}@{c}", Tally()).add(interval, truth)
    return tallies


def collect(*, profiles: Sequence[str] = PROFILES, levels: Sequence[int] = LEVELS, seeds: Sequence[int] = SEEDS,
            seconds: float = 30.0, windows: int = 32, speed: float = 10.0, max_tokens: int = 24,
            parallel: bool = True, model_clock: bool = True, verbose: bool = True) -> list[RunWindows]:
    """All runs; with ``parallel`` every run goes at once (one emulator process each, clients in greenlets)."""
    configs = [(p, c, s) for s in seeds for c in levels for p in profiles]

    def one(config: tuple[str, int, int]) -> RunWindows:
        return run_one(*config, seconds=seconds, windows=windows, speed=speed, max_tokens=max_tokens,
                       model_clock=model_clock)

    runs: list[RunWindows] = []
    if parallel:  # one seed's runs at once (8 emulators); seeds one after another, or this machine drowns
        for seed in seeds:
            jobs = [gevent.spawn(one, config) for config in configs if config[2] == seed]
            gevent.joinall(jobs, raise_error=True)
            runs += [job.value for job in jobs]
    else:
        runs = [one(config) for config in configs]
    broken = [r for r in runs if min(r.throughputs) <= 0]
    for run in broken:
        print(f"{run.profile} C={run.c} seed {run.seed}: left out, a window without tokens (client starved)")
    runs = [r for r in runs if r not in broken]
    if verbose:
        for run in runs:
            long_run = statistics.mean(run.throughputs)
            print(f"{run.profile:<9} C={run.c:<4} seed {run.seed}: {len(run.records):5d} requests, long-run "
                  f"{long_run:8.0f} tok/s, analytic {run.analytic:8.0f} ({long_run / run.analytic - 1:+.1%}), "
                  f"{len(run.edges)} windows of {run.edges[0][1] - run.edges[0][0]:.2f} s", flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/coverage.py", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each long run")
    parser.add_argument("--windows", type=int, default=32, help="windows cut from each run")
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--wall-clock", action="store_true",
                        help="judge on wall-clock times (shared-machine stalls then make the process non-stationary)")
    parser.add_argument("--serial", action="store_true", help="one run at a time (slower, less CPU contention)")
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    began = time.time()
    runs = collect(levels=levels, seeds=seeds, seconds=args.seconds, windows=args.windows, speed=args.speed,
                   max_tokens=args.max_tokens, parallel=not args.serial, model_clock=not args.wall_clock)
    tallies = tally_runs(runs)
    print(f"\n95% interval coverage over {sum(len(r.edges) for r in runs)} windows "
          f"({len(runs)} runs, {time.time() - began:.0f} s, {'wall' if args.wall_clock else 'model'} clock):")
    names = {"tput_new": "throughput, batch means (new)", "tput_old": f"throughput, {LIFETIME} (old)",
             "ratio_new": "ratio, batch means (new)", "ratio_old": f"ratio, {LIFETIME} bootstrap (old)"}
    for key, name in names.items():
        print(tallies[key].line(name))
    print("\nby level (covered/judged):")
    for c in levels:
        cells = [f"{key.split('_')[0]} {key.split('_')[1]} {tallies[f'{key}@{c}'].rate:6.1%}"
                 for key in names if f"{key}@{c}" in tallies]
        print(f"  C={c:<4}" + "   ".join(cells))
    return 0


if __name__ == "__main__":
    gevent.get_hub()
    sys.exit(main())
