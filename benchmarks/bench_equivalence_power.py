"""The output-equivalence check's power and false alarms under a --time-budget (#76).

Whole `specbench compare` jobs against fresh emulators on 127.0.0.1, one at a time:

* lossy: a speculative server that changes 0.5% of its tokens after position 8 (``eagle3`` with ``lossy.prob
  0.005``, a profile written here; with 48-token answers about 18% of answers change) against ``baseline``;
  the rate of runs whose verdict says "not lossless";
* clean: the lossless ``eagle3`` against ``baseline`` and against ``baseline-batchvariant`` (whose own answers change
  under load), alternating; the rate of runs flagged "not lossless" (false alarms).

Each run's line gives the verdict's kind, the paired probe's counts (compared, changed by speculation, by the
baseline's repeat, discordant each way) and what the per-level check alone would have said. Prints figures; asserts
nothing (the machine is shared).

    .venv/bin/python benchmarks/bench_equivalence_power.py [--lossy-runs 10] [--clean-runs 20] [--budget 80s]

Each run's emulators get their own seed, so each lossy run changes other answers (the draws are per prompt).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specbench.analysis.verdicts.equivalence import Changes, verdict
from specbench.locustfiles.target import start_emulator_process

LOSSY_PROFILE = """base: eagle3
description: EAGLE-3 that changes 0.5% of tokens after position 8
lossy:
  prob: 0.005
  after: 8
"""


def one_run(base: str, spec: str, out: Path, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """One compare job; its comparison.json's equivalence, and the wall time. Both emulators get ``seed``: their
    changed tokens are drawn from (seed, prompt, position), so each run changes other answers."""
    seeded = ["--seed", str(seed)]
    with (start_emulator_process(base, speed=args.speed, extra=seeded) as b,
          start_emulator_process(spec, speed=args.speed, extra=seeded) as s):
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", b.url, "--spec", s.url,
                               "--out", str(out), "--overwrite", "--time-budget", args.budget, "--max-tokens",
                               str(args.max_tokens), "--ladder", args.ladder, "--equivalence-probe"],
                              capture_output=True, text=True, check=False)
        wall = time.monotonic() - began
    if proc.returncode not in (0, 3):
        return {"error": proc.stderr[-500:], "wall": wall}
    eq = json.loads((out / "comparison.json").read_text())["equivalence"]
    return {"eq": eq, "wall": wall}


def level_kind(eq: dict[str, Any]) -> str:
    """What the per-level check alone says (the verdict before the probe)."""
    def ch(d: dict[str, Any]) -> Changes:
        return Changes(d["compared"], d["changed"], ())
    levels = [lv["target_c"] for lv in eq["levels"]]
    return verdict(ch(eq["total"]), ch(eq["baseline_noise"]), levels)[0]


def line(tag: str, n: int, result: dict[str, Any]) -> str:
    if "error" in result:
        return f"{tag} {n}: failed: {result['error']}"
    eq, pr = result["eq"], result["eq"].get("probe")
    probe = ("no probe" if pr is None else f"probe {pr['kind']}: {pr['spec_changed']}/{pr['compared']} changed, "
             f"repeat {pr['repeat_changed']}, discordant {pr['spec_only']}:{pr['repeat_only']}, p={pr['p_value']:.2g}")
    return (f"{tag} {n}: {eq['kind']} ({probe}; per-level alone: {level_kind(eq)}, "
            f"{eq['total']['changed']}/{eq['total']['compared']}); {result['wall']:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lossy-runs", type=int, default=10)
    ap.add_argument("--clean-runs", type=int, default=20)
    ap.add_argument("--budget", default="80s")
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--ladder", default="1,2,4,8,16")
    ap.add_argument("--seed", type=int, default=1, help="the emulators' seed of the first run (+1 each run)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "eagle3-lossy05.yaml"
        profile.write_text(LOSSY_PROFILE)
        print(f"budget {args.budget}, emulator speed {args.speed:g}, --max-tokens {args.max_tokens}, "
              f"--ladder {args.ladder}, emulator seeds from {args.seed}", flush=True)
        caught = level_caught = 0
        for n in range(args.lossy_runs):
            r = one_run("baseline", str(profile), Path(tmp) / "lossy", args, args.seed + n)
            print(line("lossy", n + 1, r), flush=True)
            caught += r.get("eq", {}).get("kind") == "not_lossless"
            level_caught += "eq" in r and level_kind(r["eq"]) == "not_lossless"
        flagged = 0
        for n in range(args.clean_runs):
            base = ("baseline", "baseline-batchvariant")[n % 2]
            r = one_run(base, "eagle3", Path(tmp) / "clean", args, args.seed + 100 + n)
            print(line(f"clean vs {base}", n + 1, r), flush=True)
            flagged += r.get("eq", {}).get("kind") == "not_lossless"
    print(f"lossy 0.5%/token caught: {caught} of {args.lossy_runs} runs (per-level check alone: {level_caught}); "
          f"clean pair flagged: {flagged} of {args.clean_runs} runs", flush=True)


if __name__ == "__main__":
    main()
