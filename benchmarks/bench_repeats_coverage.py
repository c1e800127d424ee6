"""How often the combined interval over repeats covers the true ratio, and how wide it is against one pass.

    .venv/bin/python benchmarks/bench_repeats_coverage.py [--sets 4000]

Simulated repeat sets with a known truth (ratio 0.9). Per repeat, each side's log throughput at a level is its
truth plus a run-to-run effect (sd ``tau``, the variation a window's own interval cannot see) plus the window's
noise (sd 1-4%, known to it), and, where there is drift, a linear change over the run's time in alternating
order (A B, B A, ...; each ladder one time unit). The one-pass interval is repeat 1's own (normal, from its
windows' noise); the combined one is ``analysis.stats.repeats.combine_ratios`` over all repeats, balanced over
the order (#76); ``drift`` is ``drift_trend`` over each side's moments (one run a minute). Prints
coverage (share of sets whose interval holds the truth) and mean width (high/low - 1), and how often a side was
flagged ``drift``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench.analysis.stats.repeats import Measure, combine_ratios, drift_trend
from specbench.contract.student_t import NORMAL_975

TRUTH = 0.9


def one_set(rng: np.random.Generator, repeats: int, tau: float, drift_per_ladder: float
            ) -> tuple[bool, float, bool, float, bool]:
    """(one pass holds, its width, combined holds, its width, a side flagged drift)."""
    ratios, second, sides = [], [], {"a": [], "b": []}
    t = 0
    for r in range(repeats):
        logs = {}
        for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
            se = rng.uniform(0.01, 0.04)
            truth = math.log(TRUTH) if side == "b" else 0.0
            logs[side] = (truth + rng.normal(0, tau) + rng.normal(0, se) + drift_per_ladder * t, se)
            sides[side].append((60.0 * t, Measure(math.exp(logs[side][0]), se)))
            t += 1
        ratio_se = math.hypot(logs["a"][1], logs["b"][1])
        ratios.append(Measure(math.exp(logs["b"][0] - logs["a"][0]), ratio_se))
        second.append(r % 2 == 0)
    first = ratios[0]
    assert first.log_se is not None
    half = NORMAL_975 * first.log_se
    low1, high1 = first.value * math.exp(-half), first.value * math.exp(half)
    combined = combine_ratios(ratios, second)
    assert combined is not None and combined.low is not None and combined.high is not None
    flagged = any((c := drift_trend(s)) is not None and c.flagged for s in sides.values())
    return (low1 <= TRUTH <= high1, high1 / low1 - 1, combined.holds(TRUTH), combined.high / combined.low - 1,
            flagged)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=4000)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(59)
    print(f"truth {TRUTH}; {args.sets} sets per row; window noise sd 1-4% per side; drift per ladder in log units")
    print(f"{'repeats':>7} {'tau':>5} {'drift':>6} | {'one pass: covers':>16} {'width':>6} | "
          f"{'combined: covers':>16} {'width':>6} | {'drift flagged':>13}")
    for repeats, tau, drift in ((2, 0.0, 0.0), (3, 0.0, 0.0), (3, 0.03, 0.0), (5, 0.03, 0.0), (3, 0.0, -0.05),
                                (3, 0.03, -0.05), (5, 0.0, -0.05)):
        rows = [one_set(rng, repeats, tau, drift) for _ in range(args.sets)]
        cols = list(zip(*rows, strict=True))
        print(f"{repeats:>7} {tau:>5.2f} {drift:>6.2f} | {np.mean(cols[0]):>16.1%} {np.mean(cols[1]):>6.1%} | "
              f"{np.mean(cols[2]):>16.1%} {np.mean(cols[3]):>6.1%} | {np.mean(cols[4]):>13.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
