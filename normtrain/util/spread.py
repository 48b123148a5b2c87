"""Mean ± spread over seeds: the one rule behind every band and ``± sd (n)`` the project shows.

The spread is the sample standard deviation (n − 1 in the denominator: the seeds are a sample of those one could
have run), 0 for a single value; non-finite values (a diverged run's NaN or inf) are left out and n counts the
values kept. Tables and write-ups (normtrain/study/stats.py) and the compare report's seed bands
(normtrain/compare/figdata.py) both call ``mean_sd``, so three seeds show the same ± everywhere.
"""

from __future__ import annotations

import numpy as np


def mean_sd(values, axis: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, sample sd, n) of the finite values along ``axis``: NaN mean where none is finite, sd 0 where n ≤ 1."""
    table = np.asarray(values, dtype=float)
    finite = np.isfinite(table)
    n = finite.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite, table, 0.0).sum(axis=axis) / n
        dev = np.where(finite, table - np.expand_dims(mean, axis), 0.0)
        sd = np.sqrt((dev ** 2).sum(axis=axis) / np.maximum(n - 1, 1))
    return mean, sd, n
