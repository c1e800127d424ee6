"""Time to verdict: the default ladder with the new interval defaults against the old method, per level.

``nice .venv/bin/python benchmarks/time_to_verdict.py [--speed 10] [--max-tokens 256] [--old-commit 0268386]``

Runs the whole default ladder (1,2,5,10,30,70,100,250) on the built-in baseline and eagle3 emulators (child
processes), twice: once with this checkout's defaults (``--step-ci 0.03`` judged by the batch-means
estimator, warm-up on a stable in-flight count, 30 requests minimum), once with the old method: the suite
as it was at ``--old-commit`` (extracted with ``git archive``), ``--step-ci 0.03`` judged on batches of one
median request, warm-up until every user finished a request, ``max(30, 3*C)`` requests. Both use the same
``--max-tokens``, ``--min-step-time 2`` and ``--max-step-time``. Prints per level each run's step wall time
(warm-up included) and its throughput's 95% half-width as each method's own report computes it (old: t over
batches of one median request; new: ``analysis.stats.batch_means``), then the totals and their ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specbench.analysis import load_run
from specbench.analysis.records.steps import overlapping, step_windows
from specbench.analysis.records.summary import summarize_run
from specbench.analysis.stats.batch_means import estimate_throughput
from specbench.analysis.stats.bootstrap import window_batches
from specbench.contract.window import t975
from specbench.locustfiles.target import start_emulator_process

REPO = Path(__file__).resolve().parent.parent
LADDER = "1,2,5,10,30,70,100,250"


def run_ladder(code_root: Path, profile: str, out: Path, args: argparse.Namespace) -> float:
    """One headless ladder of the suite found at ``code_root``; returns its wall time."""
    emu = start_emulator_process(profile, speed=args.speed)
    try:
        cmd = [sys.executable, "-m", "locust", "-f", str(code_root / "locustfiles" / "sglang.py"), "--headless",
               "--only-summary", "--host", emu.url, "--label", profile, "--out", str(out), "--ladder", LADDER,
               "--max-tokens", str(args.max_tokens), "--min-step-time", "2", "--max-step-time",
               str(args.max_step_time), "--step-ci", "0.03"]
        env = {**os.environ, "PYTHONPATH": str(code_root)}
        began = time.monotonic()
        subprocess.run(cmd, cwd=code_root, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.monotonic() - began
    finally:
        emu.stop()


def old_halfwidth(run_dir: Path) -> dict[int, float]:
    """Per level: t half-width over batches of one median request (what the old --step-ci judged)."""
    run = load_run(run_dir)
    rows = {r.step: r for r in summarize_run(run).rows}
    out = {}
    for w in step_windows(run):
        if w.bounds is None:
            continue
        batches = window_batches(overlapping(run.records, *w.bounds), *w.bounds, rows[w.index].e2e_p50_s)
        if len(batches) >= 2 and batches.mean() > 0:
            out[w.target_c] = t975(len(batches) - 1) * batches.std(ddof=1) / math.sqrt(len(batches)) / batches.mean()
    return out


def new_halfwidth(run_dir: Path) -> dict[int, float]:
    run = load_run(run_dir)
    rows = {r.step: r for r in summarize_run(run).rows}
    out = {}
    for w in step_windows(run):
        if w.bounds is not None:
            est = estimate_throughput(overlapping(run.records, *w.bounds), *w.bounds, rows[w.index].e2e_p50_s)
            out[w.target_c] = est.relative_halfwidth()
    return out


def step_times(run_dir: Path) -> dict[int, tuple[float, str]]:
    steps = [json.loads(x) for x in (run_dir / "steps.jsonl").read_text().splitlines() if x.strip()]
    return {s["target_c"]: (s["end_s"] - s["start_s"], s["ended_by"]) for s in steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/time_to_verdict.py", description=__doc__.split("\n")[0])
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--max-step-time", type=float, default=240.0)
    parser.add_argument("--old-commit", default="0268386", help="the suite before the batch-means estimator")
    parser.add_argument("--out", default="", help="keep the run directories here (default: a temp dir)")
    parser.add_argument("--reuse", default="", help="methods whose runs under --out are reused, e.g. old")
    args = parser.parse_args(argv)
    root = Path(args.out or tempfile.mkdtemp(prefix="ttv-"))
    old_root = root / "old-code"
    old_root.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", args.old_commit], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(old_root)], input=archive.stdout, check=True)
    results: dict[tuple[str, str], tuple[float, dict[int, tuple[float, str]], dict[int, float]]] = {}
    for method, code, judge in (("new", REPO, new_halfwidth), ("old", old_root, old_halfwidth)):
        for profile in ("baseline", "eagle3"):
            out = root / method / profile
            walls = root / method / f"{profile}.wall"
            if method in args.reuse.split(",") and walls.exists():
                wall = float(walls.read_text())
            else:
                wall = run_ladder(code, profile, out, args)
                walls.write_text(f"{wall:.1f}")
            results[method, profile] = (wall, step_times(out), judge(out))
            print(f"{method} {profile}: ladder took {wall:.0f} s", flush=True)
    print(f"\nspeed {args.speed:g}, max-tokens {args.max_tokens}, --step-ci 0.03, max-step-time "
          f"{args.max_step_time:g} s; step time includes warm-up; +-: 95% half-width of the step's tok/s")
    head = f"{'C':>5} | {'run':<9}| {'new: time':>10} {'+-':>7} {'end':>9} | {'old: time':>10} {'+-':>7} {'end':>9}"
    print(head)
    for c in map(int, LADDER.split(",")):
        for profile in ("baseline", "eagle3"):
            cells = []
            for method in ("new", "old"):
                _wall, times, half = results[method, profile]
                t, ended = times.get(c, (math.nan, "-"))
                h = half.get(c, math.inf)
                cells.append(f"{t:9.1f}s {h:7.1%} {ended:>9}" if math.isfinite(h) else f"{t:9.1f}s {'-':>7} {ended:>9}")
            print(f"{c:>5} | {profile:<9}| {cells[0]} | {cells[1]}")
    new_total = sum(results["new", p][0] for p in ("baseline", "eagle3"))
    old_total = sum(results["old", p][0] for p in ("baseline", "eagle3"))
    worst_new = max(h for p in ("baseline", "eagle3") for h in results["new", p][2].values())
    print(f"\nwall time, both ladders: new {new_total:.0f} s, old {old_total:.0f} s, "
          f"new/old {new_total / old_total:.0%}; widest new half-width {worst_new:.1%}")
    print(f"run directories: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
