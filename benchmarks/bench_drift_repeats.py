"""#76's case: two identical emulators (true ratio 1) slowing 25% a minute, measured with ``compare --repeats N
--time-budget B --ladder 4,16``. Prints, per run, each level's combined ratio with its interval, whether it holds
1, the method, and the drift flags; at the end, how often. Asserts nothing.

    .venv/bin/python benchmarks/bench_drift_repeats.py [--runs 3] [--repeats 2,3] [--budget 2,180s 3,200s]

Each run starts two fresh emulators (``emulator --drift``), so every run begins at full speed. A budget below what
every repeat's windows need is refused up front (exit 2, no run), and a run stopped during the job is said as such.
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


def one_run(repeats: int, budget: str, drift: float, ladder: str, seed: int, out: Path) -> tuple[int, list[dict]]:
    """(exit code, repeats.json's levels; [] without one)."""
    extra = ["--seed", str(seed), "--drift", f"{drift:g}"]
    emus = [start_emulator_process("baseline", speed=10.0, extra=extra) for _ in range(2)]
    try:
        cmd = [sys.executable, "-m", "specbench.cli", "compare", "--baseline", emus[0].url, "--spec", emus[1].url,
               "--out", str(out), "--repeats", str(repeats), "--time-budget", budget, "--ladder", ladder,
               "--seed", str(seed)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=out.parent)
    finally:
        for emu in emus:
            emu.stop()
    if proc.returncode:
        print(f"  exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:300]}", flush=True)
    found = out / "repeats.json"
    return proc.returncode, json.loads(found.read_text())["levels"] if found.exists() else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeats", default="2,3")
    parser.add_argument("--budget", nargs="*", default=["2,180s", "3,200s"], help="REPEATS,BUDGET pairs")
    parser.add_argument("--drift", type=float, default=-0.25)
    parser.add_argument("--ladder", default="4,16")
    args = parser.parse_args(argv)
    budgets = dict(item.split(",", 1) for item in args.budget)
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.repeats.split(",")):
            levels = held = flagged = done = 0
            for seed in range(1, args.runs + 1):
                code, rows = one_run(n, budgets.get(str(n), "180s"), args.drift, args.ladder, seed,
                                     Path(tmp) / f"r{n}-{seed}")
                done += code == 0
                for lv in rows:
                    holds = lv["ratio_low"] is not None and lv["ratio_low"] <= 1.0 <= lv["ratio_high"]
                    drift = "drift" in lv["flags"]
                    levels, held, flagged = levels + 1, held + holds, flagged + drift
                    sides = ", ".join(f"{d['side']} {d['per_min']:+.0%}/min{'' if d['flagged'] else ' (not flagged)'}"
                                      for d in lv["drift"])
                    low, high = lv["ratio_low"] or float("nan"), lv["ratio_high"] or float("nan")
                    print(f"N={n} run {seed} C={lv['target_c']:<3} {lv['ratio']:.3f}x ({low:.3f}-{high:.3f}) "
                          f"{'holds 1' if holds else 'EXCLUDES 1':<10} {lv['method']:<14} "
                          f"{'drift' if drift else '-':<6} {sides}", flush=True)
            summary.append((n, budgets.get(str(n), "180s"), done, levels, held, flagged))
    print(f"\ndrift {args.drift:g}/min on both servers; ladder {args.ladder}; {args.runs} runs each")
    for n, budget, done, levels, held, flagged in summary:
        print(f"--repeats {n} --time-budget {budget}: {done}/{args.runs} runs exit 0; interval holds 1 at "
              f"{held}/{levels} levels; drift flagged at {flagged}/{levels}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
