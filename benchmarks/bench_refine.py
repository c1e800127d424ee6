"""Crossover refinement against the cost model: does the refined 95% interval hold the analytic crossing?

``nice .venv/bin/python benchmarks/bench_refine.py [--runs 10] [--speed 10] [--pairs all]``

Three emulator pairs whose throughput curves cross between two ladder levels, at different places (the cost
model, ``emulator.costmodel``, gives each crossing exactly for the suite's prompts and ``--max-tokens``):

* ``steps5``: baseline against the 5-step draft, crossing near C=14 (ladder bracket 10..30);
* ``steps3``: baseline against the 3-step draft, near C=21 (bracket 10..30);
* ``s1-s5``: the 1-step draft as baseline against the 5-step draft, near C=6.6 (bracket 5..10).

Each pair runs ``--runs`` times, run i with emulator seed i and prompt-order seed i, as ``specbench compare``
with refinement on (``--refine-levels``) and a time budget. Per run it prints the crossing with its interval,
whether the interval holds the cost model's crossing, and whether it holds the crossing of what the emulators
delivered in that run (their ledgers' tok/s in each step's window: on a loaded machine an emulator falls behind
its model, and the suite can only measure what was served), its half-width relative to the crossing, the
levels added and the wall time; per pair, the counts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from costcross import model_crossing

from specbench.locustfiles.target import start_emulator_process

PAIRS = {"steps5": ("baseline", "eagle3-steps5"), "steps3": ("baseline", "eagle3-steps3"),
         "s1-s5": ("eagle3-steps1", "eagle3-steps5")}
LADDER = "5,10,30"


def ledger_tok_s(ledger: Path, t0: float, t1: float) -> float:
    """Output tokens per second the emulator itself wrote in [t0, t1) (its ledger, chunk times kept)."""
    entries = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    tokens = sum(n for e in entries if e["status"] == 200 and e["finish_reason"] in ("length", "stop")
                 for n, ms in zip(e["tokens_per_chunk"], e["chunk_ms"], strict=True)
                 if t0 <= e["arrival_s"] + ms / 1000.0 < t1)
    return tokens / (t1 - t0)


def delivered_crossing(out: Path, ledgers: dict[str, Path], near: float) -> float | None:
    """Where the ratio of what the two emulators delivered (their ledgers, in each step's window) crosses 1,
    interpolated in log C as the report does, nearest to ``near``: the truth of the same run, whatever this
    machine's load did to the emulators' speed against their model."""
    ratio: dict[int, float] = {}
    tok = {}
    for role in ("baseline", "spec"):
        steps = [json.loads(line) for line in (out / role / "steps.jsonl").read_text().splitlines()]
        tok[role] = {s["target_c"]: ledger_tok_s(ledgers[role], s["steady_start_s"], s["end_s"]) for s in steps
                     if s.get("steady_start_s") is not None}
    for c in sorted(set(tok["baseline"]) & set(tok["spec"])):
        if tok["baseline"][c] > 0:
            ratio[c] = tok["spec"][c] / tok["baseline"][c]
    cs = sorted(ratio)
    found = [math.exp(math.log(c1) + (1 - ratio[c1]) * (math.log(c2) - math.log(c1)) / (ratio[c2] - ratio[c1]))
             for c1, c2 in itertools.pairwise(cs) if (ratio[c1] >= 1) != (ratio[c2] >= 1)]
    return min(found, key=lambda x: abs(math.log(x / near))) if found else None


def one_run(base: str, spec: str, seed: int, out: Path, args: argparse.Namespace) -> dict:
    """One seeded compare with refinement; returns the crossing found and the wall time."""
    ledgers = {"baseline": out.parent / f"{out.name}-baseline.ledger", "spec": out.parent / f"{out.name}-spec.ledger"}
    a = start_emulator_process(base, speed=args.speed, extra=["--seed", str(seed), "--ledger-file",
                                                               str(ledgers["baseline"]), "--ledger-chunk-times"])
    b = start_emulator_process(spec, speed=args.speed, extra=["--seed", str(seed), "--ledger-file",
                                                               str(ledgers["spec"]), "--ledger-chunk-times"])
    began = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "specbench.cli", "compare", "--baseline", a.url, "--spec", b.url, "--out", str(out),
             "--refine-levels", str(args.refine_levels), "--time-budget", args.time_budget, "--ladder", LADDER,
             "--seed", str(seed), "--max-tokens", str(args.max_tokens), "--min-requests", "20",
             "--min-step-time", str(args.min_step_time), "--max-step-time", str(args.max_step_time),
             "--step-ci", str(args.step_ci)], capture_output=True, text=True, timeout=3600)
    finally:
        a.stop()
        b.stop()
    took = time.monotonic() - began
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}: {proc.stderr[-300:]}", "took": took}
    report = json.loads((out / "comparison.json").read_text())
    crossings = report["verdict"]["crossovers"]
    added = [lv["target_c"] for lv in report["levels"] if lv.get("refined")]
    delivered = delivered_crossing(out, ledgers, crossings[0]["c"]) if len(crossings) == 1 else None
    return {"crossings": crossings, "added": added, "took": took, "delivered": delivered,
            "line": (report["verdict"].get("crossover_lines") or ["-"])[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--pairs", default="all", help="comma-separated of " + ", ".join(PAIRS))
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--min-step-time", type=float, default=2.5)
    parser.add_argument("--max-step-time", type=float, default=10.0)
    parser.add_argument("--step-ci", type=float, default=0.015)
    parser.add_argument("--refine-levels", type=int, default=3)
    parser.add_argument("--time-budget", default="6m", help="for each compare, ladders and refinement together")
    parser.add_argument("--keep", type=Path, help="keep each run's output under this directory (default: discarded)")
    args = parser.parse_args()
    names = list(PAIRS) if args.pairs == "all" else args.pairs.split(",")
    print(f"ladder {LADDER}, speed {args.speed:g}, max-tokens {args.max_tokens}, step {args.min_step_time:g}-"
          f"{args.max_step_time:g} s, step-ci {args.step_ci:g}, refine-levels {args.refine_levels}, "
          f"time budget {args.time_budget} per compare", flush=True)
    totals = []
    with tempfile.TemporaryDirectory(prefix="bench-refine-") as scratch:
        tmp = args.keep or scratch
        for name in names:
            base, spec = PAIRS[name]
            truth = model_crossing(base, spec, args.max_tokens)
            held = tight = done = held_delivered = 0
            times = []
            print(f"\n{name}: {spec} against {base}, analytic crossing C = {truth:.2f}", flush=True)
            for seed in range(args.runs):
                r = one_run(base, spec, seed, Path(tmp) / f"{name}-{seed}", args)
                times.append(r["took"])
                if "error" in r or len(r["crossings"]) != 1:
                    why = r.get("error") or f"{len(r['crossings'])} crossings"
                    print(f"  seed {seed}: {why} ({r['took']:.0f} s)", flush=True)
                    continue
                x = r["crossings"][0]
                low = x["c_low"] if x["c_low"] is not None else 0.0
                high = x["c_high"] if x["c_high"] is not None else math.inf
                holds = low <= truth <= high
                delivered = r["delivered"]
                holds_delivered = delivered is not None and low <= delivered <= high
                width = max((x["c"] - low) / x["c"], (high - x["c"]) / x["c"])
                done += 1
                held += holds
                held_delivered += holds_delivered
                tight += width <= 0.15 + 1e-9
                shown = f"{delivered:.1f}" if delivered is not None else "none"
                print(f"  seed {seed}: {r['line']}; holds the model's C: {'yes' if holds else 'NO'}; the "
                      f"delivered crossing (ledgers) C = {shown}: {'yes' if holds_delivered else 'NO'}; half-width "
                      f"{width:.0%}; added {r['added']}; {r['took']:.0f} s", flush=True)
            totals.append((name, truth, done, held, held_delivered, tight, times))
    print("\npair     model C  runs  holds model C  holds delivered C  within ±15%  median wall time")
    for name, truth, done, held, held_delivered, tight, times in totals:
        median = sorted(times)[len(times) // 2] if times else float("nan")
        print(f"{name:<8} {truth:7.2f}  {done:4d}  {held:13d}  {held_delivered:17d}  {tight:11d}  {median:14.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
