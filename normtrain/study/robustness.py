"""The primary measured again where protocol v5 asks: at half the budget and at a near-tied learning rate.

A reproduction with ``Experiment.half_budget`` gives rows at T and at T/2 (``steps``; normtrain/study/branches.py).
Its analysis picks each arm's best on the T rows and measures every check there; then :func:`primary_again`
measures the primary once more per arm whose runner-up lr is near-tied (``QUANTITY@alt:LABEL``, each arm picked at
its runner-up in turn) and on the T/2 rows, each arm at its own best at T/2 (``QUANTITY@half``, as an ablation reads
its half budget). normtrain/study/claim.py turns those values into selection robustness and budget stability.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from normtrain.study import best_lr
from normtrain.study.best_against_best import select_or_inf
from normtrain.study.branches import STEPS
from normtrain.study.claim import ALT, HALF

Measured = dict[str, dict[str, float | None]]  # condition -> seed -> value
Measure = Callable[[list[dict[str, Any]], dict[str, best_lr.BestLr]], Measured]


def budgets(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows at the longest budget (T) and those at any shorter one (T/2); rows that name no budget are T's."""
    steps = {int(r[STEPS]) for r in rows if r.get(STEPS) is not None}
    full = max(steps, default=None)
    at_full = [r for r in rows if r.get(STEPS) is None or int(r[STEPS]) == full]
    return at_full, [r for r in rows if r.get(STEPS) is not None and int(r[STEPS]) != full]


def primary_again(quantity: str, measure: Measure, full: list[dict[str, Any]], half: list[dict[str, Any]],
                  arm_key: str, arms: Sequence[str], tied_arms: Sequence[str] | None = None,
                  value: best_lr.Value = select_or_inf) -> dict[str, Measured]:
    """``measure`` (rows and bests in, the primary's values out) at each near-tied runner-up of ``tied_arms``
    (default: every arm) and at T/2, keyed as claim.py reads them; nothing at T/2 without half-budget rows."""
    best = best_lr.best_lrs(full, arm_key, arms, value)
    found = {quantity + ALT + label: measure(full, moved)
             for label, moved in best_lr.near_tied(full, arm_key, best, tied_arms, value).items()}
    if half:
        found[quantity + HALF] = measure(half, best_lr.best_lrs(half, arm_key, arms, value))
    return found
