"""The small rules every validator applies to one key, each appending a problem instead of raising, so that
``validation`` can report every problem of a config at once."""

from __future__ import annotations

import math
from typing import Any


def scale(value: Any, key: str, problems: list[str]) -> float | None:
    """``auto`` -> None; a positive number -> float; anything else is a problem."""
    if value is None or value == "auto":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not math.isfinite(number) or number <= 0:
        problems.append(f"{key}={value!r}: expected 'auto' or a positive number")
        return None
    return number


def finite(key: str, value: float, ok: bool, rule: str, problems: list[str]) -> None:
    """A float key must be finite and satisfy ``ok``: inf or nan would pass most range checks (or fail none
    of them) and end in a traceback, or in a silently useless run, far from the command line."""
    if not (math.isfinite(value) and ok):
        problems.append(f"{key}={value}: {rule}")


def at_least(key: str, value: int | None, low: int, problems: list[str], means: str = "") -> None:
    """An integer key must be at least ``low``; null (where the schema allows it) passes. ``means``: what the
    lowest value or null does, said after the rule."""
    if value is not None and value < low:
        problems.append(f"{key}={value}: must be at least {low}{means}")


def one_of(value: Any, key: str, allowed, problems: list[str]) -> None:
    if value not in allowed:
        names = sorted("null" if a is None else str(a) for a in allowed)
        problems.append(f"{key}={value!r} is not known; allowed: {', '.join(names)}")
