"""Protocol v5's second and third readings of a primary (normtrain/study/robustness.py): each arm at its own best
at T/2, and an arm moved to its near-tied runner-up lr at T, keyed as claim.py reads them."""

from __future__ import annotations

import pytest

from normtrain.study import best_lr, robustness
from normtrain.study.best_against_best import SELECT
from normtrain.study.claim import ALT, HALF


def rows_of(scores: dict[tuple[str, float, int], list[float]]) -> list[dict]:
    """``scores[(arm, lr, steps)]``: the selection (= judged) loss per seed 0, 1, 2."""
    return [{"arm": arm, "optim.lr": str(lr), "train.seed": str(i), "steps": steps, "status": "completed",
             "final_val_loss": v, SELECT: v}
            for (arm, lr, steps), vals in scores.items() for i, v in enumerate(vals)]


def gap(rows, best):
    return {"": best_lr.paired_at_best(rows, "arm", best, "a", "b")}


def test_the_half_budget_is_read_at_its_own_bests_and_a_near_tie_moves_one_arm():
    scores = {("a", 1e-3, 100): [2.0, 2.1, 2.2], ("a", 2e-3, 100): [2.12, 2.05, 2.24],  # near-tied: gap < spread
              ("a", 4e-3, 100): [2.5, 2.5, 2.5],
              ("b", 1e-3, 100): [1.5, 1.5, 1.5], ("b", 2e-3, 100): [1.9, 1.9, 1.9], ("b", 4e-3, 100): [2.4, 2.4, 2.4],
              # at T/2 a's best moves to 2e-3 and b's stays at 1e-3
              ("a", 1e-3, 50): [2.6, 2.6, 2.6], ("a", 2e-3, 50): [2.4, 2.4, 2.4], ("a", 4e-3, 50): [2.9, 2.9, 2.9],
              ("b", 1e-3, 50): [2.0, 2.0, 2.0], ("b", 2e-3, 50): [2.2, 2.2, 2.2], ("b", 4e-3, 50): [2.8, 2.8, 2.8]}
    full, half = robustness.budgets(rows_of(scores))
    assert {r["steps"] for r in full} == {100} and {r["steps"] for r in half} == {50}
    found = robustness.primary_again("gap", gap, full, half, "arm", ["a", "b"])
    assert found["gap" + HALF][""] == pytest.approx({"0": 0.4, "1": 0.4, "2": 0.4})
    assert set(found) == {"gap" + HALF, "gap" + ALT + "a at its runner-up lr 0.002"}
    assert found["gap" + ALT + "a at its runner-up lr 0.002"][""] == pytest.approx({"0": 0.62, "1": 0.55, "2": 0.74})
    only_b = robustness.primary_again("gap", gap, full, [], "arm", ["a", "b"], tied_arms=["b"])
    assert only_b == {}  # b's runner-up is far behind, and without T/2 rows there is no half-budget reading


def test_rows_that_name_no_budget_are_the_full_budget():
    rows = [{"arm": "a", "optim.lr": "1e-3", "train.seed": "0"}, {"arm": "a", "optim.lr": "1e-3", "steps": 10}]
    full, half = robustness.budgets(rows)
    assert len(full) == 2 and half == []
