"""Refined switch points of a draft-length sweep against the cost model's crossings.

``nice .venv/bin/python benchmarks/bench_refine_sweep.py [--speed 10] [--refine-levels 3]``

``specbench sweep`` over the built-in baseline and the 1-, 3- and 5-step draft emulators (each started by its
command and stopped before the next), ladder 1,5,16,100, with refinement on: every round starts each server
again and measures the added levels. For each switch point of the policy it prints the refined interval, the
cost model's crossing of the two configurations (``emulator.costmodel``, the suite's prompts, ``--max-tokens``)
and whether the interval holds it.
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

from costcross import model_crossing

PROFILES = {"off": "baseline", "steps5": "eagle3-steps5", "steps3": "eagle3-steps3", "steps1": "eagle3-steps1"}
LADDER = "1,5,16,100"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--refine-levels", type=int, default=3)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        lines = ["ready_timeout_s: 60", "stop_timeout_s: 10", "configurations:"]
        for name, profile in PROFILES.items():
            lines += [f"  - name: '{name}'", *(["    baseline: true"] if name == "off" else []),
                      f"    command: [{py}, -m, specbench.emulator, --profile, {profile}, --port, '{{port}}', --speed, "
                      f"'{args.speed:g}']", "    ready: {url: 'http://127.0.0.1:{port}/ready', interval_s: 0.1}"]
        sweep = Path(tmp) / "sweep.yaml"
        sweep.write_text("\n".join(lines) + "\n")
        out = Path(tmp) / "report"
        began = time.monotonic()
        proc = subprocess.run([py, "-m", "specbench.cli", "sweep", str(sweep), "--out", str(out), "--ladder", LADDER,
                               "--max-tokens", str(args.max_tokens), "--min-requests", "20", "--min-step-time", "2.5",
                               "--max-step-time", "10", "--step-ci", "0.015", "--refine-levels",
                               str(args.refine_levels)], capture_output=True, text=True, timeout=3600)
        took = time.monotonic() - began
        if proc.returncode != 0:
            raise SystemExit(f"sweep failed (exit {proc.returncode}): {proc.stderr[-500:]}{proc.stdout[-1500:]}")
        report = json.loads((out / "comparison.json").read_text())
    print(f"sweep {', '.join(PROFILES)} at speed {args.speed:g}, ladder {LADDER}, {took:.0f} s; added levels "
          f"{report.get('refined_levels')}")
    print(f"policy: {report['policy']['text']}")
    for s, line in zip(report["policy"]["switches"], report["policy"].get("switch_lines", []), strict=False):
        truth = model_crossing(PROFILES[s["from_name"]], PROFILES[s["to_name"]], args.max_tokens)
        low = s["c_low"] if s["c_low"] is not None else 0.0
        high = s["c_high"] if s["c_high"] is not None else math.inf
        holds = truth is not None and low <= truth <= high
        shown = f"{truth:.2f}" if truth is not None else "none (the model's curves do not cross)"
        print(f"  {line}; cost model: C = {shown}; interval holds it: {'yes' if holds else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
