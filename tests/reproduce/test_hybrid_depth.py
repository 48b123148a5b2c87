"""hybrid_depth's quantities (normtrain/reproduce/hybrid_depth.py) on synthetic rows: the arms, the divergence count,
every quantity the registration names, each arm at its own best lr per depth, and the v5 verdict: the 12-layer
control first, then 24 layers at T and T/2."""

from __future__ import annotations

import math

import pytest

from normtrain.reproduce.cli import make_plan
from normtrain.reproduce.hybrid_depth import (
    ARM,
    ARM_LRS,
    CPU_EXTENSION,
    Depth,
    HybridDepth,
    arm_of,
    diverged_where_reference_trains,
    measured_of,
)
from normtrain.reproduce.preregistered.hybrid_depth import REGISTRATION
from normtrain.study import best_lr

LRS = (1e-3, 3e-3, 1e-2)
UNIGRAM = 3.3


def rows_of(losses: dict[tuple[str, int, float], list[float | None]], steps: int | None = None) -> list[dict]:
    """``losses[(arm, layers, lr)]``: the final loss per seed 0, 1, 2 (None: diverged); selection = loss + 0.1."""
    rows = []
    for (arm, layers, lr), vals in losses.items():
        for seed, v in enumerate(vals):
            rows.append({ARM: arm, "model.n_layers": str(layers), "optim.lr": str(lr), "train.seed": str(seed),
                         "status": "diverged" if v is None else "completed", "final_val_loss": v,
                         "select_loss": None if v is None else v + 0.1, "val_quarter_drop": 0.01,
                         "unigram_val_loss": UNIGRAM, **({"steps": steps} if steps else {})})
    return rows


def grid(layers: int, pre: dict[float, list], hybrid: dict[float, list]) -> dict:
    return {**{("pre", layers, lr): v for lr, v in pre.items()},
            **{("hybrid", layers, lr): v for lr, v in hybrid.items()}}


def test_the_arms_come_from_placement_and_first_pre():
    assert arm_of({"placement": "pre", "placement.first_pre": "null"}) == "pre"
    assert arm_of({"placement": "hybrid", "placement.first_pre": "null"}) == "hybrid"
    assert arm_of({"placement": "hybrid", "placement.first_pre": "True"}) == "hybrid*"
    keeps = HybridDepth().keeps
    assert keeps({"placement": "pre", "placement.first_pre": "null"})
    assert not keeps({"placement": "pre", "placement.first_pre": "True"})  # Pre-LN has no HybridNorm* form
    assert keeps({"placement": "hybrid", "placement.first_pre": "True"})


def test_each_arm_runs_its_own_lrs_and_the_cpu_scale_runs_three_seeds_at_48_layers_and_no_star():
    cpu = [dict(c) for c in make_plan("hybrid_depth", scale="cpu").combos()]

    def lrs(arm: str, layers: str) -> list[float]:
        return sorted({float(c["optim.lr"]) for c in cpu if arm_of(c) == arm and c["model.n_layers"] == layers})

    # the registered edge rule's first extension (CHECK_HISTORY entry 6): one point past each edge best
    assert CPU_EXTENSION == {("hybrid", 12): (1e-2,), ("pre", 24): (1e-3,), ("pre", 48): (1e-3,)}
    assert lrs("pre", "12") == sorted(ARM_LRS["pre"])
    assert lrs("pre", "24") == lrs("pre", "48") == sorted((1e-3, *ARM_LRS["pre"]))
    assert lrs("hybrid", "12") == sorted((*ARM_LRS["hybrid"], 1e-2))
    assert lrs("hybrid", "24") == lrs("hybrid", "48") == sorted(ARM_LRS["hybrid"])
    assert ARM_LRS["hybrid"][-1] < ARM_LRS["pre"][-1]  # the pilot's finding: HybridNorm's best lies lower
    assert not [c for c in cpu if arm_of(c) == "hybrid*"]  # HybridNorm* at --scale gpu only
    assert {c["train.seed"] for c in cpu if c["model.n_layers"] == "48"} == {"10", "11", "12"}
    assert {c["train.seed"] for c in cpu if c["model.n_layers"] == "24"} == {"10", "11", "12", "13", "14"}
    assert len(cpu) == 2 * 3 * (5 + 5 + 3) + 5 + 5 + 3  # arms × lrs × the seeds at 12, 24 and 48 layers, + the edges
    gpu_keeps, star48 = HybridDepth().keeps_at("gpu"), {"placement": "hybrid", "placement.first_pre": "true",
                                                        "model.n_layers": "48", "optim.lr": "0.001"}
    assert gpu_keeps(star48) and not HybridDepth().keeps_at("cpu")(star48)
    assert not gpu_keeps({**star48, "optim.lr": "0.01"})  # outside HybridNorm*'s lrs at every scale


def test_divergence_counts_only_lrs_where_pre_trains():
    rows = rows_of(grid(24, {1e-3: [2.0, 2.0, 2.0], 3e-3: [1.9, 1.9, 1.9], 1e-2: [None, 1.95, 1.95]},
                        {1e-3: [2.0, 2.0, 2.0], 3e-3: [None, 1.9, 1.9], 1e-2: [None, None, 1.9]}))
    counts = diverged_where_reference_trains(rows, "hybrid")
    # seed 0: 3e-3 counts, 1e-2 not (Pre-LN diverged there too); seed 1: 1e-2; seed 2: none
    assert counts == {"0": 1.0, "1": 1.0, "2": 0.0}


def test_each_arm_is_compared_at_its_own_best_lr_per_depth():
    pre24 = {1e-3: [2.10, 2.12, 2.11], 3e-3: [2.00, 2.01, 2.02], 1e-2: [2.20, 2.21, 2.22]}
    hyb24 = {1e-3: [1.98, 1.99, 2.00], 3e-3: [2.05, 2.06, 2.07], 1e-2: [None, None, None]}  # best at 1e-3: an edge
    pre12 = {1e-3: [2.0, 2.0, 2.0], 3e-3: [1.8, 1.8, 1.8], 1e-2: [1.9, 1.9, 1.9]}
    hyb12 = {1e-3: [2.0, 2.0, 2.0], 3e-3: [1.75, 1.76, 1.77], 1e-2: [1.9, 1.9, 1.9]}
    rows = rows_of({**grid(24, pre24, hyb24), **grid(12, pre12, hyb12)})
    depths = [Depth(rows, n, UNIGRAM) for n in (12, 24)]
    assert [d.deep for d in depths] == [False, True]
    m = measured_of(depths)
    deep = m["hybrid_minus_pre_deep"]["24 layers"]
    assert deep == pytest.approx({"0": 1.98 - 2.00, "1": 1.99 - 2.01, "2": 2.00 - 2.02})
    assert m["hybrid_minus_pre_shallow"]["12 layers"] == pytest.approx({"0": -0.05, "1": -0.04, "2": -0.03})
    assert m["hybrid_diverged_where_pre_trains"]["24 layers"] == {"0": 1.0, "1": 1.0, "2": 1.0}
    assert m["best_lr_inside_grid"] == {"pre, 12 layers": {best_lr.ALL_SEEDS: 1.0},  # v5: every depth, both arms
                                        "hybrid, 12 layers": {best_lr.ALL_SEEDS: 1.0},
                                        "pre, 24 layers": {best_lr.ALL_SEEDS: 1.0},
                                        "hybrid, 24 layers": {best_lr.ALL_SEEDS: 0.0}}
    assert m["hybrid_minus_pre_24"] == {"24 layers": m["hybrid_minus_pre_deep"]["24 layers"]}
    assert m["reference_margin"]["Pre-LN, 12 layers"] == pytest.approx({"0": 1.5, "1": 1.5, "2": 1.5})
    assert len(m["val_quarter_drop_at_best"]) == 4
    assert m["star_minus_pre_deep"] == {}  # no HybridNorm* rows
    growth = m["hybrid_gap_growth_deep"]["24 − 12 layers"]  # the deep gap minus the 12-layer gap, seed by seed
    assert growth == pytest.approx({"0": -0.02 + 0.05, "1": -0.02 + 0.04, "2": -0.02 + 0.03})


def test_a_diverged_best_reads_as_infinitely_worse():
    pre = {lr: [2.0, 2.0, 2.0] for lr in LRS}
    hyb = {lr: [None, None, None] for lr in LRS}
    rows = rows_of(grid(48, pre, hyb))
    gap = measured_of([Depth(rows, 48, UNIGRAM)])["hybrid_minus_pre_deep"]["48 layers"]
    assert all(math.isinf(v) and v > 0 for v in gap.values())


def test_a_gap_that_diverges_only_deep_grows_infinitely():
    pre = {lr: [2.0, 2.0, 2.0] for lr in LRS}
    rows = rows_of({**grid(12, pre, {lr: [2.1, 2.1, 2.1] for lr in LRS}),
                    **grid(48, pre, {lr: [None, None, None] for lr in LRS})})
    growth = measured_of([Depth(rows, n, UNIGRAM) for n in (12, 48)])["hybrid_gap_growth_deep"]["48 − 12 layers"]
    assert all(math.isinf(v) and v > 0 for v in growth.values())


def test_every_quantity_the_registration_names_is_measured():
    rows = rows_of({**grid(12, {lr: [2.0] * 3 for lr in LRS}, {lr: [2.0] * 3 for lr in LRS}),
                    **grid(24, {lr: [2.0] * 3 for lr in LRS}, {lr: [2.0] * 3 for lr in LRS})})
    measured = measured_of([Depth(rows, n, UNIGRAM) for n in (12, 24)])
    named = {r.quantity for _, r in REGISTRATION.checks()} | {REGISTRATION.guard.quantity}
    assert named <= set(measured)
    assert REGISTRATION.label == "after_pilot" and not REGISTRATION.infeasible_at("cpu")
    assert REGISTRATION.pilot.seeds == (0, 1, 2, 100)  # v4's seeds and its pilot's: v5 runs 10-14


def test_the_key_result_names_the_control_the_deep_gaps_and_their_growth():
    pre = {lr: v for lr, v in zip(ARM_LRS["pre"], ([2.1] * 3, [2.0] * 3, [2.2] * 3), strict=True)}
    hyb = ARM_LRS["hybrid"]
    rows = rows_of({**grid(12, pre, dict(zip(hyb, ([2.3] * 3, [2.1] * 3, [2.4] * 3), strict=True))),
                    **grid(48, pre, dict(zip(hyb, ([2.5] * 3, [2.3] * 3, [None] * 3), strict=True)))})
    found = HybridDepth().analyse(rows, plan=None)
    assert "48 layers median 0.300" in found.key  # HybridNorm 2.3 − Pre-LN 2.0 at each one's best lr
    assert "12 layers median 0.100" in found.key  # the control
    assert "48 − 12 layers median 0.200" in found.key and "3 HybridNorm(*) runs diverged" in found.key


def v5_rows(control: float, gap24: float, half_gap24: float) -> list[dict]:
    """Pre-LN at its best (the middle lr) 2.0 (+0.01 per seed); HybridNorm ``control`` above it at 12 layers and
    ``gap24`` at 24 (``half_gap24`` at T/2), HybridNorm's seeds spread ±0.004 so an interval has a width."""
    rows = []
    for steps, gap in ((600, gap24), (300, half_gap24)):
        for layers, g in ((12, control), (24, gap)):
            pre = {lr: [2.0 + abs(i - 1) * 0.2 + 0.01 * s for s in range(3)] for i, lr in enumerate(ARM_LRS["pre"])}
            hyb = {lr: [2.0 + g + abs(i - 1) * 0.2 + 0.01 * s + 0.004 * (s - 1) for s in range(3)]
                   for i, lr in enumerate(ARM_LRS["hybrid"])}
            rows += rows_of(grid(layers, pre, hyb), steps)
    return rows


@pytest.mark.parametrize(("control", "gap24", "half", "verdict"), [
    (-0.05, 0.0, 0.0, "reproduced"),  # the control passes; at 24 layers within the margin at T and T/2
    (-0.05, 0.3, 0.3, "not reproduced"),  # the control passes; 0.3 nats behind at 24 layers
    (-0.05, 0.0, 0.3, "inconclusive (budget-sensitive)"),  # behind at T/2, on par at T
    (0.7, 0.0, 0.0, "inconclusive (precondition)"),  # v4's failure: 0.7 behind at 12 layers, the method not reproduced
])
def test_the_control_at_12_layers_comes_before_depth(control, gap24, half, verdict, tmp_path):
    from normtrain.study.plan import Plan
    from normtrain.study.verdicts import decide

    exp = HybridDepth()
    findings = exp.analyse(v5_rows(control, gap24, half), Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    found = decide(exp.registration, findings.measured, findings.unit)
    assert found.verdict == verdict
