"""ngpt_storage's quantities on synthetic rows: the recipe filter, the gap change at each arm's best lr, paired by
seed, and the paper's steps-to-reach measure."""

from __future__ import annotations

import pytest

from normtrain.reproduce.ngpt_storage import NgptStorage, gap_change, in_recipe, step_speedup, steps_to_reach
from normtrain.study import best_lr
from normtrain.study.plan import Plan

LRS = {"pre": ("0.003", "0.01", "0.03"), "ngpt": ("0.01", "0.03", "0.1")}


def rows(final: dict[str, float], best_at: str = "mid", curve_of=None) -> list[dict]:
    """Every arm × its 3 lrs × seeds 0-2; the arm's final loss ``final[arm] + 0.01·seed`` at its middle lr and
    0.2 more at the others (so the middle lr is the best), the selection loss the same + 0.1."""
    out = []
    for arm, loss in final.items():
        placement, dtype = arm.split("/")
        for i, lr in enumerate(LRS[placement]):
            for seed in range(3):
                v = loss + 0.01 * seed + (0.0 if i == 1 else 0.2)
                curve = curve_of(arm, v) if curve_of else f"0:5.5 500:{v + 0.5:.5g} 1000:{v:.5g}"
                out.append({"placement": placement, "train.param_dtype": dtype, "optim.lr": lr,
                            "train.seed": str(seed), "status": "completed", "final_val_loss": v,
                            best_lr.SELECTION: v + 0.1, "unigram_val_loss": 3.3, "val_curve": curve})
    return out


def plan() -> Plan:
    from pathlib import Path

    return Plan("ngpt_storage", "cpu", True, [], {}, Path("r"), Path("o"), progress=False)


def test_the_grid_keeps_each_placements_own_recipe_and_lrs():
    pre = {"placement": "pre", "optim.weight_decay": "0.1", "optim.warmup_steps": "50", "optim.lr": "0.003"}
    assert in_recipe(pre) and in_recipe({**pre, "optim.warmup_steps": "100"})  # --scale gpu stretches it
    assert not in_recipe({**pre, "optim.weight_decay": "0.0"})  # nGPT's recipe on Pre-LN
    assert not in_recipe({**pre, "optim.lr": "0.1"})  # nGPT's lr only
    ngpt = {"placement": "ngpt", "optim.weight_decay": "0.0", "optim.warmup_steps": "0", "optim.lr": "0.1"}
    assert in_recipe(ngpt) and not in_recipe({**ngpt, "optim.warmup_steps": "50"})
    assert not in_recipe({**ngpt, "optim.lr": "0.001"})
    assert in_recipe({**ngpt, "optim.lr": "0.003"})  # the grid extended at nGPT's lower edge during the runs


def test_the_gap_change_is_the_bf16_gap_minus_the_fp32_gap_at_each_arms_best_lr():
    found = NgptStorage().analyse(rows({"pre/float32": 2.00, "ngpt/float32": 1.95, "pre/bfloat16": 2.20,
                                        "ngpt/bfloat16": 2.00}), plan())
    m = found.measured
    assert m["ngpt_gain_fp32"][""] == pytest.approx({"0": 0.05, "1": 0.05, "2": 0.05})
    assert m["ngpt_gain_bf16"][""] == pytest.approx({"0": 0.20, "1": 0.20, "2": 0.20})
    assert m["storage_gap_change"][""] == pytest.approx({"0": 0.15, "1": 0.15, "2": 0.15})
    assert m["bf16_cost_pre"][""] == pytest.approx({"0": 0.2, "1": 0.2, "2": 0.2})
    assert m["bf16_cost_ngpt"][""] == pytest.approx({"0": 0.05, "1": 0.05, "2": 0.05})
    assert all(v == {best_lr.ALL_SEEDS: 1.0} for v in m["best_lr_inside_grid"].values())  # the middle lr
    assert m["reference_margin"]["Pre-LN (fp32)"] == pytest.approx({"0": 1.3, "1": 1.29, "2": 1.28})
    assert "gap change" in found.table and "ngpt/bfloat16" in found.table


def test_gap_change_pairs_by_seed_and_leaves_missing_seeds_out():
    assert gap_change({"0": 0.3, "1": 0.1, "2": None}, {"0": 0.1, "1": 0.2, "2": 0.0}) == \
        pytest.approx({"0": 0.2, "1": -0.1, "2": None})


def test_steps_to_reach_and_the_speedup_read_the_validation_curve():
    curve = [(0.0, 5.5), (50.0, 3.0), (100.0, 2.1), (150.0, 1.9), (1000.0, 1.5)]
    assert steps_to_reach(curve, 2.0) == 150.0 and steps_to_reach(curve, 1.0) is None
    assert steps_to_reach(curve, None) is None
    assert step_speedup(curve, 2.0, 1000.0) == pytest.approx(1000 / 150)
    assert step_speedup(curve, 1.5, 1000.0) == 1.0  # only at the end: no speed-up
    assert step_speedup(curve, 1.0, 1000.0) is None  # never reached


def test_the_speedup_is_measured_per_storage_at_the_best_lrs():
    def curve(arm, final):  # nGPT reaches Pre-LN's final loss (≈ 2.0) at step 250 with fp32 and 500 with bf16
        if arm.startswith("pre"):
            return f"0:5.5 1000:{final:.5g}"
        at = 250 if arm.endswith("float32") else 500
        return f"0:5.5 {at}:1.99 1000:{final:.5g}"
    found = NgptStorage().analyse(rows({"pre/float32": 2.00, "ngpt/float32": 1.8, "pre/bfloat16": 2.01,
                                        "ngpt/bfloat16": 1.9}, curve_of=curve), plan())
    speed = found.measured["step_speedup"]
    assert speed["float32"] == pytest.approx({"0": 4.0, "1": 4.0, "2": 4.0})
    assert speed["bfloat16"] == pytest.approx({"0": 2.0, "1": 2.0, "2": 2.0})
