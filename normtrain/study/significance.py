"""Tests for a handful of seeds: the exact sign test and the one-sample (paired) t-test, with their p-values.

With 3 to 5 seeds an interval says little (the range of 3 seeds covers their median 75% of the time), so a
directional claim ("Peri-LN ends lower than Pre-LN") is reported with the p-value of a test on the per-seed paired
differences: the sign test (exact, assumes nothing about their distribution; with 5 seeds the smallest one-sided p
is 1/32 ≈ 0.031, all five the same way) and Student's t-test (assumes they are roughly normal). Both are one-sided in
the claim's direction, against the rule's threshold. No scipy: the t distribution's CDF comes from the regularized
incomplete beta function (Numerical Recipes' continued fraction, accurate to ~1e-12 here).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

ALPHA = 0.05  # one-sided level of the "sign_test" and "t_test" decisions


def sign_test(values: Sequence[float], threshold: float = 0.0, greater: bool = True) -> float | None:
    """One-sided exact sign test: P(at least k of n values on the claimed side | each side equally likely), values
    equal to the threshold dropped; None with no value off the threshold."""
    side = [v > threshold if greater else v < threshold for v in values if v != threshold]
    n, k = len(side), sum(side)
    if n == 0:
        return None
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n


def t_test(values: Sequence[float], threshold: float = 0.0, greater: bool = True) -> tuple[float, int, float] | None:
    """One-sample t-test of the mean against ``threshold``, one-sided: (t, degrees of freedom, p); None with fewer
    than 2 finite values or no spread (then p is 0 or 1 and says nothing a reader can use)."""
    vals = [float(v) for v in values if math.isfinite(v)]
    if len(vals) < 2:
        return None
    sd = statistics.stdev(vals)
    if sd == 0:
        return None
    t = (statistics.fmean(vals) - threshold) / (sd / math.sqrt(len(vals)))
    df = len(vals) - 1
    upper = 1 - t_cdf(t, df)
    return t, df, upper if greater else 1 - upper


def t_cdf(t: float, df: int) -> float:
    """Student's t distribution's CDF."""
    x = df / (df + t * t)
    tail = 0.5 * incomplete_beta(df / 2, 0.5, x)
    return 1 - tail if t > 0 else tail


def t_half_width(values: Sequence[float], alpha: float) -> float:
    """Half the width of the 1 − 2α Student t interval of the mean of ``values`` (at least 2): each side a one-sided
    test at level α. The one formula behind every interval of the protocol."""
    n = len(values)
    return t_quantile(1 - alpha, n - 1) * statistics.stdev(values) / math.sqrt(n)


def t_quantile(p: float, df: int) -> float:
    """The t value whose CDF is ``p`` (bisection: the CDF is monotone)."""
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _continued_fraction(a, b, x) / a
    return 1 - front * _continued_fraction(b, a, 1 - x) / b


def _continued_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h
