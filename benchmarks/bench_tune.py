"""A whole depth tune on the emulator against its known truth, and how the time budget is shared.

``nice .venv/bin/python benchmarks/bench_tune.py [--budget 10m] [--speed 10] [--max-tokens 128]``

``specbench tune`` with config/tune/emulator.yaml's servers (tune-baseline; tune-spec at K = 1..5), the default
ladder (1, 2, 5, 10, 30, 70, 100, 250), ``--time-budget`` for everything and ``--validate``. It prints:

* per level: the depth chosen, the cost model's best depth (``emulator.costmodel``, the suite's prompts) and the
  chosen depth's model throughput over the best's (the issue's bar: >= 0.98);
* the validation: the tuned server's throughput against the best of the baseline and every fixed depth, less one
  interval's noise (the baseline and the best single depth beside it in the validation run; the other depths from
  the tune), where it is above the best single depth beyond noise, and delivered / predicted (the cross-fitted
  prediction; benchmarks/bench_tune_bias.py repeats whole tunes to read its bias);
* the wall time, each run's share of the budget, and the measured window per level.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specbench.config import data_path  # noqa: E402
from specbench.contract.optionvalues import parse_duration  # noqa: E402
from specbench.emulator.costmodel import at_depth, expected_throughput_for_prompts  # noqa: E402
from specbench.emulator.profile import load_profile  # noqa: E402

DEPTHS = (1, 2, 3, 4, 5)
BAR = 0.98


def _prompts() -> list:
    rows = [json.loads(line) for line in data_path("prompts", "diverse.jsonl").read_text().splitlines() if line]
    return [row["prompt"] if isinstance(row.get("prompt"), str) else row["messages"] for row in rows]


def _truth(c: int, max_tokens: int) -> dict[int, float]:
    prompts = _prompts()
    out = {0: expected_throughput_for_prompts(load_profile("tune-baseline"), c, prompts, max_tokens)}
    spec = load_profile("tune-spec")
    for k in DEPTHS:
        out[k] = expected_throughput_for_prompts(at_depth(spec, k), c, prompts, max_tokens)
    return out


def _tune_file(path: Path, speed: float) -> Path:
    text = (REPO / "config" / "tune" / "emulator.yaml").read_text()
    text = text.replace("[python, -m,", f"[{sys.executable}, -m,").replace('speed: "10"', f'speed: "{speed:g}"')
    path.write_text(text)
    return path


def _run_windows(run: Path) -> tuple[float, list[tuple[int, float]]]:
    """(seconds from the first step's start to the last's end, [(C, measured window s)])."""
    steps = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines() if line]
    if not steps:
        return 0.0, []
    return (steps[-1]["end_s"] - steps[0]["start_s"],
            [(s["target_c"], s["end_s"] - s["steady_start_s"]) for s in steps])


def _band(iv: dict) -> str:
    """'0.993 (0.970-1.016)', or why there is no interval."""
    if iv["low"] is None:
        return iv.get("note") or "-"
    return f"{iv['ratio']:.3f} ({iv['low']:.3f}-{iv['high']:.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--keep", help="write the tune's report here instead of a temporary folder")
    args = parser.parse_args()
    budget_s = parse_duration(args.budget)
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        out = Path(args.keep) if args.keep else Path(tmp) / "report"
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "tune", str(_tune_file(Path(tmp) / "t.yaml",
                                                                                            args.speed)),
                               "--out", str(out), "--time-budget", args.budget, "--max-tokens", str(args.max_tokens),
                               "--server-metrics-interval", "0.5", "--validate", "--overwrite"],
                              capture_output=True, text=True, timeout=budget_s * 2 + 300)
        took = time.monotonic() - began
        if proc.returncode not in (0, 3):
            raise SystemExit(f"tune failed (exit {proc.returncode}): {proc.stderr[-800:]}{proc.stdout[-2000:]}")
        tune = json.loads((out / "tuned" / "tune.json").read_text())
        check = json.loads((out / "tuned" / "validation.json").read_text())
        runs = {name: _run_windows(out / name) for name in ("baseline", *(f"k{k}" for k in DEPTHS))}
        runs |= {f"validate/{name}": _run_windows(out / "validate" / name)
                 for name in ("baseline", check["fixed"], "tuned")}

    print(f"tune of K in {DEPTHS} and speculation off, ladder {tune['ladder']}, --time-budget {args.budget}, "
          f"speed {args.speed:g}, {args.max_tokens} tokens: {took:.0f} s wall ({took / budget_s:.2f} of the budget)")
    print(f"schedule: {tune['schedule']} ({tune['keyed_on']}); best single depth K={tune['best_single']}")
    print("\n C  chosen  how           model best  chosen/best (model)  pass")
    passed = 0
    for lv in tune["levels"]:
        truth = _truth(lv["target_c"], args.max_tokens)
        best = max(truth, key=lambda k: truth[k])
        share = truth[lv["chosen"]] / truth[best]
        ok = share >= BAR
        passed += ok
        print(f"{lv['target_c']:>3}  K={lv['chosen']:<5} {lv['how']:<13} K={best:<9} {share:>19.3f}  "
              f"{'yes' if ok else 'NO'}")
    print(f"chosen depth within {1 - BAR:.0%} of the model's best: {passed} of {len(tune['levels'])} levels")

    print("\nvalidation (tuned vs the best of off and every fixed K, less one interval's noise):")
    print(" C  depth  tuned tok/s  best other  tuned/best other  vs fixed (95% CI)        "
          "delivered/predicted (95% CI)  outcome")
    above_fixed = []
    holds = 0
    for lv in check["levels"]:
        c = lv["target_c"]
        level = next(t for t in tune["levels"] if t["target_c"] == c)
        others = {cand["depth"]: cand["tok_s"] for cand in level["candidates"] if cand["tok_s"]}
        fixed = lv["vs_fixed"]
        base = lv["vs_baseline"]
        # The validation run's own baseline and fixed depth, at the tuned figure over their ratio.
        delivered = lv["delivered_tok_s"] or 0.0
        beside = [delivered / r for r in (fixed["ratio"], base["ratio"]) if r]
        best_other = max([*others.values(), *beside])
        noise = (fixed["high"] - fixed["low"]) / 2 if fixed["low"] is not None else 0.0
        ok = delivered / best_other >= 1 - noise
        holds += ok
        if fixed["low"] is not None and fixed["low"] > 1:
            above_fixed.append(c)
        band = _band(fixed)
        print(f"{c:>3}  K={lv['depth']:<4} {delivered:>11.0f} {best_other:>11.0f} {delivered / best_other:>17.3f}  "
              f"{band:<24} {_band(lv['vs_predicted']):<29} {lv['outcome']}{'' if ok else '  BELOW'}")
    print(f"at least the best other less one interval's noise at {holds} of {len(check['levels'])} levels; above "
          f"the best single depth ({check['fixed']}) beyond noise at C={above_fixed or 'none'}")

    print("\nhow the budget went (planned over every run from the start, validation included; each ladder an equal "
          "share once the time outside the ladders is set aside):")
    total_levels = 0.0
    for name, (span, windows) in runs.items():
        total_levels += span
        shown = ", ".join(f"C{c}:{w:.1f}" for c, w in windows)
        print(f"  {name:<16} {span:6.1f} s in its ladder; windows {shown}")
    print(f"  ladders {total_levels:.0f} s of {took:.0f} s wall; the rest is starting, stopping and reporting")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
