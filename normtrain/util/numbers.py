"""Numbers as a reader sees them, in every table cell, write-up and report the project prints: one rule, so the
same value reads the same everywhere.

Fixed decimals where they show the value; three significant digits in short scientific form (``2.5e-5``,
``1.23e7``) where fixed decimals would show ``0.000`` or a wall of digits; no decimals from 1000 up; ``–`` (or the
caller's mark) for a missing value, ``nan``, ``∞`` and ``−∞`` for the non-finite.
"""

from __future__ import annotations

import math

HUGE = 1e7  # from here on, scientific: 12345678 reads better as 1.23e7
WHOLE = 1e3  # from here on, no decimals: 1234.567 says no more than 1235


def number(value: float | None, decimals: int = 3, missing: str = "–") -> str:
    """``value`` with ``decimals`` places, or scientific when it is smaller than the last place shows well
    (below 0.01 with 3 decimals) or at least ``HUGE``."""
    if value is None:
        return missing
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    size = abs(value)
    if size and (size < 10.0 ** (1 - decimals) or size >= HUGE):
        return short_exponent(f"{value:.3g}")
    return f"{value:.{decimals if round(size, decimals) < WHOLE else 0}f}"  # 999.9996 is 1000, not 1000.000


def short_exponent(text: str) -> str:
    """``1e-05`` -> ``1e-5``, ``2.5e+07`` -> ``2.5e7``: shorter, and nothing for a browser to break a line at."""
    mantissa, e, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if e and exponent.lstrip("+-").isdigit() else text
