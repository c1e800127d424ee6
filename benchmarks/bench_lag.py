"""Lag benchmark: does the emulator keep to its cost model with 250 concurrent streams on one core?

``python benchmarks/bench_lag.py [--streams 250] [--speed 1] [--window-s 20] [--profile baseline]``

The emulator runs as a child process (one Python thread, so one core) with ``max_running_requests``
raised above the stream count, so every step carries all streams. This process opens the streams on
native ``/generate`` (cumulative text and ids: the heaviest format) and reads them all. Over a steady
window it compares the modelled step time (the cost model's sum) with the achieved one (wall time
between step ends), and reports how late steps ended and the client-side tok/s against the model.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event

from specbench.emulator import costmodel
from specbench.emulator.profile import load_profile
from specbench.locustfiles.target import start_emulator_process

from loadclient import Connection, closed_loop, window_throughput

__all__ = ["LagResult", "main", "run_lag"]

PROMPT = "Write a long, detailed essay about the history of continuous batching in inference servers."


@dataclass
class LagResult:
    streams: int
    speed: float
    steps: int
    modelled_step_ms: float
    achieved_step_ms: float
    mean_late_ms: float
    max_late_ms: float
    lost_s: float
    mean_batch: float
    client_tps: float
    model_tps: float
    server_cpu: float

    @property
    def lag(self) -> float:
        """Relative excess of achieved over modelled mean step time."""
        return self.achieved_step_ms / self.modelled_step_ms - 1.0

    def summary(self) -> str:
        return (f"streams {self.streams}, speed {self.speed:g}, {self.steps} steps, mean batch {self.mean_batch:.1f}\n"
                f"modelled step {self.modelled_step_ms:.2f} ms, achieved {self.achieved_step_ms:.2f} ms, "
                f"lag {self.lag:+.2%}\n"
                f"step end lateness: mean {self.mean_late_ms:.2f} ms, max {self.max_late_ms:.2f} ms; "
                f"time lost to re-basing {self.lost_s:.3f} s\n"
                f"client tok/s {self.client_tps:.1f} vs model {self.model_tps:.1f} "
                f"({self.client_tps / self.model_tps - 1:+.2%}); emulator CPU {self.server_cpu:.0%} of one core")


def _stats(url: str) -> dict[str, Any]:
    conn = Connection(url)
    try:
        return json.loads(conn.request("GET", "/_emulator/stats")[1])
    finally:
        conn.close()


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc (Linux), 0.0 where unavailable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def run_lag(*, streams: int = 250, speed: float = 1.0, window_s: float = 20.0, warmup_s: float = 3.0,
            profile: str = "baseline") -> LagResult:
    """Run the benchmark and return its figures (see module docstring)."""
    prof = load_profile(profile, speed=speed, overrides={"max_running_requests": streams + 6})
    step_s = costmodel.expected_step_ms(prof, streams) / 1000.0
    # long enough to outlast a window that starts late on a loaded machine (streams are cut once it is sampled)
    max_tokens = math.ceil((warmup_s + window_s) / step_s * 4) + 50
    args = ["--max-running-requests", str(streams + 6)]
    with start_emulator_process(profile, speed=speed, extra=args) as emu:
        proc, url = emu.process, emu.url
        body = {"text": PROMPT, "sampling_params": {"max_new_tokens": max_tokens, "ignore_eos": True},
                "stream": True}
        # The window is window_s from its first sample, however late that sample comes on a loaded machine;
        # the streams run until the second sample is taken (bounded: warm-up + window + 30 s at most).
        stop_s = time.time() + warmup_s + window_s + 30.0
        box: dict[str, Any] = {}
        sampled = gevent.event.Event()

        def sample() -> None:
            try:
                gevent.sleep(warmup_s)
                box["t0"], box["s0"], box["cpu0"] = time.time(), _stats(url), _cpu_seconds(proc.pid)
                gevent.sleep(window_s)
                box["t1"], box["s1"], box["cpu1"] = time.time(), _stats(url), _cpu_seconds(proc.pid)
            finally:
                sampled.set()

        sampler = gevent.spawn(sample)
        results = closed_loop(url, streams, lambda _c, _k: ("/generate", body), requests_per_client=1,
                              stop_at_s=stop_s, until=sampled)
        sampler.join(timeout=10.0)
    if "s1" not in box:
        raise RuntimeError("bench_lag: the window was not sampled (the emulator's stats did not answer)")
    s0, s1 = box["s0"], box["s1"]
    steps = s1["steps"] - s0["steps"]
    if steps <= 0:
        raise RuntimeError(f"bench_lag: the emulator made no step in the {window_s} s window "
                           f"({s1['running']} running): the streams never reached it")
    wall = box["t1"] - box["t0"]
    mean_batch = (s1["batch_sum"] - s0["batch_sum"]) / steps
    return LagResult(
        streams=streams,
        speed=speed,
        steps=steps,
        modelled_step_ms=1000.0 * (s1["modelled_s"] - s0["modelled_s"]) / steps,
        achieved_step_ms=1000.0 * (s1["achieved_s"] - s0["achieved_s"]) / steps,
        mean_late_ms=1000.0 * (s1["late_s"] - s0["late_s"]) / steps,
        max_late_ms=1000.0 * s1["late_max_s"],
        lost_s=s1["lost_s"] - s0["lost_s"],
        mean_batch=mean_batch,
        client_tps=window_throughput(results, box["t0"], box["t1"]),
        model_tps=1000.0 * mean_batch / costmodel.expected_step_ms(prof, round(mean_batch)),
        server_cpu=(box["cpu1"] - box["cpu0"]) / wall,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/bench_lag.py", description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=250)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--window-s", type=float, default=20.0)
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--profile", default="baseline")
    args = parser.parse_args(argv)
    result = run_lag(streams=args.streams, speed=args.speed, window_s=args.window_s, warmup_s=args.warmup_s,
                     profile=args.profile)
    print(result.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
