"""One-sample Kolmogorov-Smirnov test against an exponential law, written out (scipy is not a dependency)."""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Asymptotic critical value of sqrt(n) * D at the 1% level (Kolmogorov distribution, n large).
KS_CRITICAL_1PCT = 1.628


def ks_exponential(samples: Sequence[float], rate: float) -> float:
    """The KS statistic D of ``samples`` against Exp(``rate``) (a fully specified law, rate not estimated)."""
    xs = sorted(samples)
    n = len(xs)
    d = 0.0
    for i, x in enumerate(xs):
        cdf = 1.0 - math.exp(-rate * x)
        d = max(d, (i + 1) / n - cdf, cdf - i / n)
    return d


def passes_at_1pct(samples: Sequence[float], rate: float) -> bool:
    return math.sqrt(len(samples)) * ks_exponential(samples, rate) < KS_CRITICAL_1PCT
