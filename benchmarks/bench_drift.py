"""Drift against the comparison's design: identical servers (true ratio 1) measured one after the other, and in
interleaved repeats. Prints figures, asserts nothing.

    .venv/bin/python benchmarks/bench_drift.py [--runs 10] [--drift -0.2] [--ladder 4]

Two emulators with the same profile and speed, both slowing by ``--drift`` per minute of wall time
(``emulator --drift``). For each seed: one sequential ``specbench compare`` (the baseline's ladder, then the
spec's), and one ``--repeats 3`` (alternating order); then ``--repeats 3`` again on emulators that do not drift.
Per run it prints each level's ratio with its interval, whether the interval holds 1, and the drift flags; at
the end, how often the interval held the truth and how often drift was flagged in each arm.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from specbench.locustfiles.target import start_emulator_process  # noqa: E402

COMMON = ["--max-tokens", "64", "--min-step-time", "4", "--max-step-time", "8", "--warmup-time", "1", "--no-refine"]


def compare(base: str, spec: str, out: Path, ladder: str, seed: int, repeats: int) -> list[dict]:
    """One compare; per level: ratio, low, high, drift flagged (repeats) as dicts."""
    cmd = [sys.executable, "-m", "specbench.cli", "compare", "--baseline", base, "--spec", spec, "--out", str(out),
           "--ladder", ladder, "--seed", str(seed), *COMMON, *(["--repeats", str(repeats)] if repeats > 1 else [])]
    subprocess.run(cmd, check=True, capture_output=True, timeout=1200, cwd=out.parent)
    if repeats > 1:
        data = json.loads((out / "repeats.json").read_text())
        return [{"c": lv["target_c"], "ratio": lv["ratio"], "low": lv["ratio_low"], "high": lv["ratio_high"],
                 "drift": "drift" in lv["flags"], "from": lv["dominated_by"]} for lv in data["levels"]]
    data = json.loads((out / "comparison.json").read_text())
    return [{"c": lv["target_c"], "ratio": lv["ratio"], "low": lv["ratio_low"], "high": lv["ratio_high"],
             "drift": False, "from": "-"} for lv in data["levels"]]


def arm(label: str, drift: float, seeds: list[int], ladder: str, repeats: int, tmp: Path) -> tuple[int, int, int]:
    """Runs one arm over the seeds; returns (levels, intervals holding 1, levels flagged drift)."""
    levels = held = flagged = 0
    for seed in seeds:
        extra = ["--seed", str(seed), *(["--drift", f"{drift:g}"] if drift else [])]
        emus = [start_emulator_process("baseline", speed=10.0, extra=extra) for _ in range(2)]
        try:
            rows = compare(emus[0].url, emus[1].url, tmp / f"{label}-{seed}", ladder, seed, repeats)
        finally:
            for emu in emus:
                emu.stop()
        for row in rows:
            holds = row["low"] is not None and row["low"] <= 1.0 <= row["high"]
            levels, held, flagged = levels + 1, held + holds, flagged + row["drift"]
            print(f"{label:<22} seed {seed:>3} C={row['c']:<4} {row['ratio']:.3f}x ({row['low']:.3f}-{row['high']:.3f})"
                  f" {'holds 1' if holds else 'EXCLUDES 1':<10} {'drift' if row['drift'] else '-':<6} {row['from']}",
                  flush=True)
    return levels, held, flagged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--drift", type=float, default=-0.2, help="per minute, both servers")
    parser.add_argument("--ladder", default="4")
    args = parser.parse_args(argv)
    seeds = list(range(1, args.runs + 1))
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, drift, repeats in (("sequential, drift", args.drift, 1), ("3 repeats, drift", args.drift, 3),
                                      ("3 repeats, no drift", 0.0, 3)):
            summary.append((label, *arm(label.replace(" ", "").replace(",", "-"), drift, seeds, args.ladder,
                                        repeats, Path(tmp))))
    print(f"\ndrift {args.drift:g}/min on both servers where it drifts; ladder {args.ladder}; {args.runs} seeds")
    for label, levels, held, flagged in summary:
        print(f"{label:<22} interval holds the true ratio 1 at {held}/{levels} levels; drift flagged at "
              f"{flagged}/{levels}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
