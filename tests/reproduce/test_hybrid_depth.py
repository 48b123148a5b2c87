"""hybrid_depth's quantities (normtrain/reproduce/hybrid_depth.py) on synthetic rows: the arms, the divergence count,
and every quantity the registration names, each arm at its own best lr per depth."""

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


def rows_of(losses: dict[tuple[str, int, float], list[float | None]]) -> list[dict]:
    """``losses[(arm, layers, lr)]``: the final loss per seed 0, 1, 2 (None: diverged); selection = loss + 0.1."""
    rows = []
    for (arm, layers, lr), vals in losses.items():
        for seed, v in enumerate(vals):
            rows.append({ARM: arm, "model.n_layers": str(layers), "optim.lr": str(lr), "train.seed": str(seed),
                         "status": "diverged" if v is None else "completed", "final_val_loss": v,
                         best_lr.SELECTION: None if v is None else v + 0.1, "val_quarter_drop": 0.01,
                         "unigram_val_loss": UNIGRAM})
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


def test_each_arm_runs_its_own_lrs_and_the_cpu_scale_runs_hybridnorm_star_at_24_layers_only():
    cpu = [dict(c) for c in make_plan("hybrid_depth", scale="cpu").combos()]
    def lrs(arm: str, layers: str) -> list[float]:
        return sorted({float(c["optim.lr"]) for c in cpu if arm_of(c) == arm and c["model.n_layers"] == layers})

    for (arm, layers), added in CPU_EXTENSION.items():  # the registered rule's extension at the edge
        assert lrs(arm, str(layers)) == sorted((*ARM_LRS[arm], *added))
    assert lrs("pre", "24") == lrs("pre", "48") == sorted(ARM_LRS["pre"])  # inside: not extended
    assert lrs("hybrid", "12") == lrs("hybrid", "48") == sorted(ARM_LRS["hybrid"])
    assert ARM_LRS["hybrid"][-1] < ARM_LRS["pre"][-1]  # the pilot's finding: HybridNorm's best lies lower
    assert {c["model.n_layers"] for c in cpu if arm_of(c) == "hybrid*"} == {"24"}
    assert {c["model.n_layers"] for c in cpu if arm_of(c) == "hybrid"} == {"12", "24", "48"}
    assert len(cpu) == 63 + 9  # the YAML's estimates count these: the registered grid, then its extension
    pre12 = {"placement": "pre", "placement.first_pre": "null", "model.n_layers": "12", "optim.lr": "0.03"}
    assert HybridDepth().keeps_at("cpu")(pre12) and not HybridDepth().keeps_at("gpu")(pre12)  # the CPU's extension
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
    assert m["best_lr_inside_grid"] == {"pre, 24 layers": {best_lr.ALL_SEEDS: 1.0},
                                        "hybrid, 24 layers": {best_lr.ALL_SEEDS: 0.0}}
    assert m["reference_margin"]["Pre-LN, 12 layers"] == pytest.approx({"0": 1.5, "1": 1.5, "2": 1.5})
    assert set(m["val_quarter_drop_at_best"]) == {"pre, 24 layers", "hybrid, 24 layers"}
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
    assert REGISTRATION.label == "after_pilot" and REGISTRATION.infeasible_at("cpu") and not \
        REGISTRATION.infeasible_at("gpu")
    assert REGISTRATION.pilot.seeds == (100,)  # the registered seeds 0-2 are new evidence


def test_the_key_result_names_the_deep_gaps_and_their_growth():
    pre = {1e-3: [2.1] * 3, 3e-3: [2.0] * 3, 1e-2: [2.2] * 3}
    rows = rows_of({**grid(12, pre, {1e-3: [2.3] * 3, 3e-3: [2.1] * 3, 1e-2: [2.4] * 3}),
                    **grid(48, pre, {1e-3: [2.5] * 3, 3e-3: [2.3] * 3, 1e-2: [None] * 3})})
    found = HybridDepth().analyse(rows, plan=None)
    assert "48 layers median 0.300" in found.key  # HybridNorm 2.3 − Pre-LN 2.0 at each one's best lr
    assert "48 − 12 layers median 0.200" in found.key  # 0.3 deep − 0.1 at 12 layers
    assert "HybridNorm* − Pre-LN: –" in found.key and "3 HybridNorm(*) runs diverged" in found.key
