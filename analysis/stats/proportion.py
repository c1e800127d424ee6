"""The 95% interval of a share k / n (Wilson score): how sure a count of yes-or-no outcomes pins its rate.

Used where a verdict turns on a proportion rather than a throughput: the share of answers speculation changed
against the baseline's own noise floor (``analysis.verdicts.equivalence``), and the share of requests meeting an
SLO (``analysis.verdicts.slo_compare``). Wilson's interval, unlike the plain normal one, stays inside [0, 1] and
keeps close to its coverage for the small counts and extreme shares these verdicts meet.
"""

from __future__ import annotations

import math

from specbench.contract.student_t import NORMAL_975 as Z95


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a share k / n ((0, 1) without data)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + Z95 * Z95 / (2 * n)) / (1 + Z95 * Z95 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n)) / (1 + Z95 * Z95 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def fisher_greater(k1: int, n1: int, k2: int, n2: int) -> float:
    """One-sided Fisher exact test that share k1/n1 exceeds share k2/n2: the p-value P(X >= k1), X the first
    group's count when the k1 + k2 outcomes fall at random among all n1 + n2 trials (hypergeometric).

    Exact for the small counts equivalence meets (tens of changed answers), where comparing two separate
    intervals for overlap is a far weaker test than testing the difference.
    """
    total, hits = n1 + n2, k1 + k2
    if n1 == 0 or hits == 0:
        return 1.0
    ways = math.comb(total, n1)
    tail = sum(math.comb(hits, x) * math.comb(total - hits, n1 - x) for x in range(k1, min(hits, n1) + 1))
    return tail / ways


def smallest_detectable(n1: int, k2: int, n2: int, alpha: float = 0.05) -> int | None:
    """The fewest of n1 outcomes that ``fisher_greater`` would call more than k2 of n2 at level ``alpha``; None
    when not even all n1 would: how small a difference a run of this size could have shown."""
    return next((k1 for k1 in range(n1 + 1) if fisher_greater(k1, n1, k2, n2) < alpha), None)


def sign_greater(only_first: int, only_second: int) -> float:
    """One-sided exact test on discordant pairs (McNemar's, exact): the p-value P(X >= only_first), X
    binomial(only_first + only_second, 1/2). For paired outcomes where only the pairs that disagree carry
    information: under the null hypothesis each discordant pair is as likely one way as the other."""
    n = only_first + only_second
    if n == 0:
        return 1.0
    return sum(math.comb(n, x) for x in range(only_first, n + 1)) / 2 ** n


def smallest_sign_detectable(only_second: int, most: int, alpha: float = 0.05) -> int | None:
    """The fewest ``only_first`` pairs (at most ``most``) that ``sign_greater`` would call significant against
    ``only_second``; None when not even ``most`` would."""
    return next((k for k in range(most + 1) if sign_greater(k, only_second) < alpha), None)
