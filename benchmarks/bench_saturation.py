"""Saturation against the cost model, and what ``--stop-after-saturation`` saves on a 1..250 ladder.

``nice .venv/bin/python benchmarks/bench_saturation.py [--speed 10] [--after 1]``

Runs ``specbench compare`` of the built-in baseline (cap 80 running requests) and eagle3 (SGLang's speculative
cap, 48) emulators twice on the ladder 1,2,5,10,30,70,100,150,250: once whole, once with
``--stop-after-saturation N``. The cost model (``emulator.costmodel``) saturates each at its cap: throughput
rises up to C = cap and is flat above it, where requests queue. Prints each server's saturation as the report
states it, whether it is within one ladder level of the cap, which levels the second run skipped, and both
runs' wall times: the time saved against the share of the ladder's step time those levels took in the whole run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specbench.emulator.profile import load_profile
from specbench.locustfiles.target import start_emulator_process

LADDER = [1, 2, 5, 10, 30, 70, 100, 150, 250]


def compare(out: Path, args: argparse.Namespace, extra: list[str]) -> float:
    """One compare of baseline against eagle3; returns its wall time."""
    base = start_emulator_process("baseline", speed=args.speed)
    spec = start_emulator_process("eagle3", speed=args.speed)
    began = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url,
             "--out", str(out), "--ladder", ",".join(map(str, LADDER)), "--max-tokens", str(args.max_tokens),
             "--min-requests", "30", "--min-step-time", str(args.min_step_time), "--max-step-time", "30",
             "--step-ci", "0", "--no-refine", *extra], capture_output=True, text=True, timeout=3600)
    finally:
        base.stop()
        spec.stop()
    if proc.returncode != 0:
        raise SystemExit(f"compare failed (exit {proc.returncode}): {proc.stderr[-500:]}")
    return time.monotonic() - began


def step_seconds(run: Path) -> dict[int, float]:
    """Wall time of each step (start to the end of its window), by level."""
    steps = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    return {s["target_c"]: s["end_s"] - s["start_s"] for s in steps}


def within_one_level(found: int | None, cap: int) -> bool:
    """The found level is the cap's own level or a ladder neighbour of the cap (70 or 100 for a cap of 80)."""
    if found is None:
        return False
    below = [c for c in LADDER if c < cap]
    above = [c for c in LADDER if c > cap]
    return found == cap or found in (below[-1:] + above[:1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--min-step-time", type=float, default=2.0)
    parser.add_argument("--after", type=int, default=1)
    args = parser.parse_args()
    caps = {"baseline": load_profile("baseline").max_running_requests,
            "spec": load_profile("eagle3").max_running_requests}
    with tempfile.TemporaryDirectory(prefix="bench-sat-") as tmp:
        whole_s = compare(Path(tmp) / "whole", args, [])
        cut_s = compare(Path(tmp) / "cut", args, ["--stop-after-saturation", str(args.after)])
        whole = json.loads((Path(tmp) / "whole" / "comparison.json").read_text())
        cut = json.loads((Path(tmp) / "cut" / "comparison.json").read_text())
        steps = {name: step_seconds(Path(tmp) / "whole" / name) for name in ("baseline", "spec")}
    print(f"ladder {LADDER}, speed {args.speed:g}, max-tokens {args.max_tokens}, steps >= {args.min_step_time:g} s")
    for sat in whole["saturation"]:
        role = "baseline" if sat["name"] == "baseline" else "spec"
        print(f"  {sat['text']}; cost model: cap {caps[role]}; within one level: "
              f"{'yes' if within_one_level(sat['target_c'], caps[role]) else 'NO'}")
    kept = [lv["target_c"] for lv in cut["levels"]]
    skipped = [c for c in LADDER if c not in kept]
    share = sum(steps[n].get(c, 0.0) for n in steps for c in skipped) / sum(sum(v.values()) for v in steps.values())
    print(f"  --stop-after-saturation {args.after}: {cut.get('skipped') or 'nothing skipped'}")
    print(f"  wall time: whole {whole_s:.0f} s, with the skip rule {cut_s:.0f} s: {1 - cut_s / whole_s:.0%} saved; "
          f"the skipped levels took {share:.0%} of the whole run's step time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
