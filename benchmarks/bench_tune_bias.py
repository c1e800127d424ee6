"""Is the tune's prediction unbiased? Repeated ``specbench tune --validate`` runs on the emulator (#76).

``nice .venv/bin/python benchmarks/bench_tune_bias.py [--runs 10] [--budget 4m] [--ladder 1,10,70] [--depths 1,3,5]``

Each run is a whole tune of config/tune/emulator.yaml's servers (tune-baseline, tune-spec at the depths) with
``--validate``; the validation measures the tuned schedule again and reads delivered / predicted with its 95%
interval per level. With a prediction free of the winner's curse, that interval holds 1 at every level in at
least 9 of 10 runs. It prints, per run and level, the ratio and its interval, and at the end how many runs held 1
everywhere, and the geometric-mean ratio per level over the runs (below 1: the prediction reads high).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_tune import _tune_file  # the same tune file as bench_tune.py

from specbench.contract.optionvalues import parse_duration


def _one(tmp: Path, args: argparse.Namespace, i: int) -> list[dict]:
    out = tmp / f"run{i}"
    cmd = [sys.executable, "-m", "specbench.cli", "tune", str(_tune_file(tmp / "t.yaml", args.speed)), "--out",
           str(out), "--time-budget", args.budget, "--max-tokens", str(args.max_tokens), "--ladder", args.ladder,
           "--depths", args.depths, "--server-metrics-interval", "0.5", "--validate", "--overwrite"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=parse_duration(args.budget) * 2 + 300)
    check = out / "tuned" / "validation.json"
    if proc.returncode != 0 or not check.exists():
        print(f"run {i}: exit {proc.returncode}, no validation: {proc.stdout[-600:]}", flush=True)
        return []
    return json.loads(check.read_text())["levels"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--budget", default="4m")
    parser.add_argument("--ladder", default="1,10,70")
    parser.add_argument("--depths", default="1,3,5")
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    held_all = missed = 0
    done = 0
    logs: dict[int, list[float]] = {}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-tune-bias-") as tmp:
        for i in range(1, args.runs + 1):
            levels = _one(Path(tmp), args, i)
            if not levels:
                continue
            done += 1
            cells, every, miss = [], True, False
            for lv in levels:
                iv = lv["vs_predicted"]
                if iv["low"] is None:
                    every = False
                    cells.append(f"C{lv['target_c']}: {iv.get('note') or 'no interval'}")
                    continue
                holds = iv["low"] <= 1.0 <= iv["high"]
                every &= holds
                miss |= not holds
                logs.setdefault(lv["target_c"], []).append(math.log(iv["ratio"]))
                cells.append(f"C{lv['target_c']} K={lv['depth']} {iv['ratio']:.3f} ({iv['low']:.3f}-{iv['high']:.3f})"
                             f"{'' if holds else ' MISS'}")
            held_all += every
            missed += miss
            print(f"run {i} ({time.monotonic() - began:.0f} s): " + "; ".join(cells), flush=True)
    print(f"\ndelivered / predicted: the interval held 1 at every level in {held_all} of {done} runs; a level's "
          f"interval missed 1 in {missed}; the rest had a level without an interval (budget {args.budget}, ladder "
          f"{args.ladder}, depths {args.depths}, speed {args.speed:g})")
    for c, values in sorted(logs.items()):
        print(f"  C={c}: geometric mean ratio {math.exp(sum(values) / len(values)):.3f} over {len(values)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
