"""dyt_tokens' quantities (normtrain/reproduce/dyt_tokens.py) on synthetic rows: each norm at its own best lr per
budget, the gap paired by seed, its growth with tokens; each budget's warm-up and evaluation interval; the smoke
grid of an experiment whose run length is an axis."""

from __future__ import annotations

import math

import pytest

from normtrain.reproduce.dyt_tokens import Budget, BudgetPlan, gap_growth, measured_of, relative
from normtrain.reproduce.preregistered.dyt_tokens import REGISTRATION
from normtrain.study import best_lr
from normtrain.study.plan import SMOKE_LONGEST, Plan, smoke_grid

LRS = (1e-3, 3e-3, 1e-2)
UNIGRAM = 3.3


def rows_of(losses: dict[tuple[str, int, float], list[float | None]]) -> list[dict]:
    """``losses[(norm, steps, lr)]``: the final loss per seed 0, 1, 2 (None: diverged); selection = loss + 0.1."""
    rows = []
    for (norm, steps, lr), vals in losses.items():
        for seed, v in enumerate(vals):
            rows.append({"norm": norm, "train.max_steps": str(steps), "optim.lr": str(lr), "train.seed": str(seed),
                         "status": "diverged" if v is None else "completed", "final_val_loss": v,
                         "select_loss": None if v is None else v + 0.1, "unigram_val_loss": UNIGRAM})
    return rows


def curve(best_lr_loss: list[float], best: float = 3e-3) -> dict[float, list[float]]:
    """An lr curve whose minimum is ``best_lr_loss`` at ``best`` and 0.1 higher elsewhere."""
    return {lr: best_lr_loss if lr == best else [v + 0.1 for v in best_lr_loss] for lr in LRS}


def test_the_gap_is_paired_at_each_norms_best_lr_and_its_growth_per_seed():
    losses = {**{("rmsnorm", 500, lr): v for lr, v in curve([2.0, 2.1, 2.2]).items()},
              **{("dyt", 500, lr): v for lr, v in curve([2.2, 2.2, 2.3]).items()},
              **{("rmsnorm", 4000, lr): v for lr, v in curve([1.6, 1.7, 1.8]).items()},
              **{("dyt", 4000, lr): v for lr, v in curve([1.9, 2.1, 2.0]).items()}}
    rows = rows_of(losses)
    budgets = [Budget(rows, s, UNIGRAM) for s in (500, 4000)]
    assert budgets[0].gap() == pytest.approx({"0": 0.2, "1": 0.1, "2": 0.1})
    m = measured_of(budgets)
    assert m["gap_growth"]["500 → 4000 steps"] == pytest.approx({"0": 0.1, "1": 0.3, "2": 0.1})
    assert m["gap_small"]["500 steps"] == pytest.approx({"0": 0.2, "1": 0.1, "2": 0.1})
    assert m["reference_margin"]["RMSNorm, 4000 steps"] == pytest.approx({"0": 1.7, "1": 1.6, "2": 1.5})
    assert m["best_lr_inside_grid"]["dyt, 4000 steps"] == {best_lr.ALL_SEEDS: 1.0}
    assert budgets[1].gap(relative)["0"] == pytest.approx(1.9 / 1.6 - 1)


def test_the_best_lr_may_differ_between_norms_and_budgets():
    losses = {**{("rmsnorm", 500, lr): [2.0 + i * 0.05] * 3 for i, lr in enumerate(LRS)},  # best at the edge 1e-3
              **{("dyt", 500, lr): v for lr, v in curve([2.3] * 3).items()}}
    budget = Budget(rows_of(losses), 500, UNIGRAM)
    assert budget.best["rmsnorm"].lr == 1e-3 and budget.best["rmsnorm"].at_edge
    assert budget.gap() == pytest.approx({s: 0.3 for s in "012"})  # DyT at 3e-3 − RMSNorm at 1e-3


def test_a_diverged_best_leaves_the_growth_undefined():
    assert gap_growth({"0": math.inf, "1": 0.1}, {"0": 0.3, "1": 0.4}) == pytest.approx({"0": None, "1": 0.3})
    assert relative(math.inf, 2.0) is None and relative(2.2, 2.0) == pytest.approx(0.1)


def test_each_budget_gets_five_percent_warm_up_and_evaluation_interval():
    plan = BudgetPlan.of(Plan("dyt_tokens", "cpu", False, ["experiment=dyt_tokens"], {}, None, None))
    assert plan.overrides({"train.max_steps": "4000"})[-2:] == ["optim.warmup_steps=200", "train.eval_every=200"]
    assert plan.overrides({"train.max_steps": "5"})[-2:] == ["optim.warmup_steps=0", "train.eval_every=1"]
    assert plan.overrides({"norm": "dyt"}) == ["experiment=dyt_tokens", "norm=dyt"]


def test_a_smoke_grid_shrinks_a_run_length_axis():
    grid = {"norm": ["a", "b", "c"], "train.max_steps": ["500", "4000"], "train.seed": ["0", "1"]}
    small = smoke_grid(grid)
    assert small == {"norm": ["a", "b"], "train.max_steps": ["5", str(SMOKE_LONGEST)], "train.seed": ["0"]}
    assert smoke_grid({"optim.lr": ["1", "2", "3"]}) == {"optim.lr": ["1", "2"]}  # no length axis: as before


def test_every_quantity_the_registration_names_is_measured():
    losses = {(n, s, lr): [2.0] * 3 for n in ("rmsnorm", "dyt") for s in (500, 4000) for lr in LRS}
    rows = rows_of(losses)
    measured = measured_of([Budget(rows, s, UNIGRAM) for s in (500, 4000)])
    named = {r.quantity for _, r in REGISTRATION.checks()} | {REGISTRATION.guard.quantity}
    assert named <= set(measured) and all(measured[q] for q in named)
    assert REGISTRATION.label == "after_pilot" and REGISTRATION.infeasible_at("cpu")
    assert not REGISTRATION.infeasible_at("gpu")


def test_the_write_up_states_each_budgets_evaluation_interval():
    """The README describes the runs as trained (``runs_plan``), not the YAML's single eval_every."""
    from normtrain.reproduce.dyt_tokens import DyTTokens
    from normtrain.reproduce.writeup import schedule_text

    grid = {"norm": ["rmsnorm"], "train.max_steps": ["500", "4000"], "optim.lr": ["1e-3", "3e-3"], "train.seed": ["0"]}
    text = schedule_text(DyTTokens().runs_plan(Plan("dyt_tokens", "cpu", False, ["experiment=dyt_tokens"], grid,
                                                    None, None)))
    assert "every 25 of 500 steps (5% of the run); every 200 of 4000 steps (5% of the run)." in text
    assert "labels need" not in text


def test_the_reused_runs_time_reaches_the_invocations_plan(monkeypatch):
    """``runs_plan`` trains under a copy of the plan; the time of the runs it reused must still reach the result's
    wall time (it read 0 before)."""
    from normtrain.reproduce import runner
    from normtrain.reproduce.dyt_tokens import DyTTokens

    def reuse_two(plan, keep_checkpoints=False, stand_in=None):
        plan.reused_s += 120.0 + 300.0
        return []

    monkeypatch.setattr(runner, "train_grid", reuse_two)
    plan = Plan("dyt_tokens", "cpu", False, ["experiment=dyt_tokens"], {}, None, None)
    assert DyTTokens().measure(plan) == [] and plan.reused_s == pytest.approx(420.0)
