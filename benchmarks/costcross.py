"""Where the cost model's throughput curves of two emulator profiles meet: the truth the refinement benchmarks
judge a refined crossover or switch point by."""

from __future__ import annotations

import math

from specbench.emulator.costmodel import expected_throughput_for_prompts
from specbench.emulator.profile import load_profile

from suiteprompts import load_suite_prompts


def model_crossing(a: str, b: str, max_tokens: int, lo: float = 1.0, hi: float = 250.0) -> float | None:
    """C in [lo, hi] where profile a's expected tok/s equals profile b's (bisection on log C, the suite's prompts);
    None when the curves do not cross there."""
    prompts, _ = load_suite_prompts()
    pa, pb = load_profile(a), load_profile(b)

    def f(c: float) -> float:
        return math.log(expected_throughput_for_prompts(pa, c, prompts, max_tokens)
                        / expected_throughput_for_prompts(pb, c, prompts, max_tokens))

    first = f(lo) > 0
    if first == (f(hi) > 0):
        return None
    x0, x1 = math.log(lo), math.log(hi)
    for _ in range(60):
        mid = (x0 + x1) / 2
        if (f(math.exp(mid)) > 0) == first:
            x0 = mid
        else:
            x1 = mid
    return math.exp((x0 + x1) / 2)
