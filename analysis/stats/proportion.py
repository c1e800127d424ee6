"""The 95% interval of a share k / n (Wilson score): how sure a count of yes-or-no outcomes pins its rate.

Used where a verdict turns on a proportion rather than a throughput: the share of answers speculation changed
against the baseline's own noise floor (``analysis.verdicts.equivalence``), and the share of requests meeting an
SLO (``analysis.verdicts.slo_compare``). Wilson's interval, unlike the plain normal one, stays inside [0, 1] and
keeps close to its coverage for the small counts and extreme shares these verdicts meet.
"""

from __future__ import annotations

import math

from contract.student_t import NORMAL_975 as Z95


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a share k / n ((0, 1) without data)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + Z95 * Z95 / (2 * n)) / (1 + Z95 * Z95 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n)) / (1 + Z95 * Z95 / n)
    return max(0.0, centre - half), min(1.0, centre + half)
