"""ngpt_storage's quantities on synthetic rows: the recipe filter, the gap change at each arm's best lr, paired by
seed, the paper's steps-to-reach measure, and the v5 verdict (nGPT's lead a precondition; a near-tied lr)."""

from __future__ import annotations

import pytest

from normtrain.reproduce.ngpt_storage import NgptStorage, arm_of, gap_change, in_recipe, step_speedup, steps_to_reach
from normtrain.study import best_lr
from normtrain.study.plan import Plan

LRS = {"pre": ("0.003", "0.01", "0.03"), "ngpt": ("0.01", "0.03", "0.1")}


def rows(final: dict[str, float], best_at: str = "mid", curve_of=None, steps: int | None = None,
         near: dict[str, tuple[float, float]] | None = None) -> list[dict]:
    """Every arm × its 3 lrs × seeds 0-2; the arm's final loss ``final[arm] + 0.01·seed`` (nGPT's + 0.003·seed², so
    gaps have a spread) at its middle lr and 0.2 more at the others (so the middle lr is the best), the selection
    loss the same + 0.1; for an arm in ``near`` = (selection offset, judged offset), its largest lr scores the
    selection offset ± 0.01 by seed (a near tie when small) and ends the judged offset above its best."""
    out = []
    for arm, loss in final.items():
        placement, storage = arm.split("/")
        for i, lr in enumerate(LRS[placement]):
            for seed in range(3):
                v = loss + 0.01 * seed + (0.003 * seed ** 2 if placement == "ngpt" else 0.0)
                select, judged_loss = v + (0.0 if i == 1 else 0.2), v + (0.0 if i == 1 else 0.2)
                if near and arm in near and i == 2:
                    select, judged_loss = v + near[arm][0] + 0.01 * (seed - 1), v + near[arm][1]
                curve = curve_of(arm, judged_loss) if curve_of else f"0:5.5 1000:{judged_loss:.5g}"
                out.append({"placement": placement, "train.param_rounding": "bfloat16" if storage == "bfloat16"
                            else "null", "optim.lr": lr, "train.seed": str(seed), "status": "completed",
                            "final_val_loss": judged_loss, "select_loss": select + 0.1, "unigram_val_loss": 3.3,
                            "val_curve": curve, **({"steps": steps} if steps else {})})
    return out


def plan() -> Plan:
    from pathlib import Path

    return Plan("ngpt_storage", "cpu", True, [], {}, Path("r"), Path("o"), progress=False)


def test_the_grid_keeps_each_placements_own_recipe_and_lrs():
    pre = {"placement": "pre", "optim.weight_decay": "0.1", "optim.warmup_steps": "80", "optim.lr": "0.003"}
    assert in_recipe(pre) and in_recipe({**pre, "optim.warmup_steps": "100"})  # --scale gpu stretches it
    assert not in_recipe({**pre, "optim.weight_decay": "0.0"})  # nGPT's recipe on Pre-LN
    assert not in_recipe({**pre, "optim.lr": "0.1"})  # nGPT's lr only
    ngpt = {"placement": "ngpt", "optim.weight_decay": "0.0", "optim.warmup_steps": "0", "optim.lr": "0.1"}
    assert in_recipe(ngpt) and not in_recipe({**ngpt, "optim.warmup_steps": "80"})
    assert not in_recipe({**ngpt, "optim.lr": "0.001"})  # v5's grid, with the edge rule's 3e-3 (CHECK_HISTORY 4)
    assert in_recipe({**ngpt, "optim.lr": "0.003"}) and in_recipe({**ngpt, "optim.lr": "0.1"})
    assert arm_of({"placement": "ngpt", "train.param_rounding": "bfloat16"}) == "ngpt/bfloat16"
    assert arm_of({"placement": "pre", "train.param_rounding": "null"}) == "pre/float32"
    assert arm_of({"placement": "pre", "train.param_dtype": "bfloat16"}) == "pre/bfloat16"  # v4's rows
    exp = NgptStorage()  # --plan-only: v4's fp32 rows time today's runs, its bf16 rows (bf16 compute) nothing
    assert exp.committed_row({"train.param_dtype": "bfloat16"}) is None
    assert exp.committed_row({"train.param_dtype": "float32"})["train.param_rounding"] == "null"


def test_the_gap_change_is_the_bf16_gap_minus_the_fp32_gap_at_each_arms_best_lr():
    found = NgptStorage().analyse(rows({"pre/float32": 2.00, "ngpt/float32": 1.95, "pre/bfloat16": 2.20,
                                        "ngpt/bfloat16": 2.00}), plan())
    m = found.measured
    assert m["ngpt_gain_fp32"][""] == pytest.approx({"0": 0.05, "1": 0.047, "2": 0.038})
    assert m["ngpt_gain_bf16"][""] == pytest.approx({"0": 0.20, "1": 0.197, "2": 0.188})
    assert m["storage_gap_change"][""] == pytest.approx({"0": 0.15, "1": 0.15, "2": 0.15})
    assert m["bf16_cost_pre"][""] == pytest.approx({"0": 0.2, "1": 0.2, "2": 0.2})
    assert m["bf16_cost_ngpt"][""] == pytest.approx({"0": 0.05, "1": 0.05, "2": 0.05})
    assert not [k for k in m if "@" in k]  # no T/2 rows, no near-tied lr
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


def judged(found_rows) -> str:
    from normtrain.study.verdicts import decide

    exp = NgptStorage()
    findings = exp.analyse(found_rows, plan())
    return decide(exp.registration, findings.measured, findings.unit).verdict


FINAL = {"pre/float32": 2.00, "ngpt/float32": 1.90, "pre/bfloat16": 2.20, "ngpt/bfloat16": 1.95}


def test_v5_reads_the_gap_change_at_both_budgets_and_needs_ngpts_lead_first():
    both = rows(FINAL, steps=1600) + rows(FINAL, steps=800)
    assert judged(both) == "reproduced"  # nGPT 0.1 ahead with fp32; bf16 widens the gap by 0.15 at T and T/2
    behind = {**FINAL, "ngpt/float32": 2.05, "ngpt/bfloat16": 2.10}  # nGPT behind with fp32: nothing to explain
    assert judged(rows(behind, steps=1600) + rows(behind, steps=800)) == "inconclusive (precondition)"
    unchanged = {**FINAL, "pre/bfloat16": 2.02, "ngpt/bfloat16": 1.92}  # the gap the same in both storages
    assert judged(rows(unchanged, steps=1600) + rows(unchanged, steps=800)) == "not reproduced"


def test_a_near_tied_lr_that_flips_the_gap_change_is_selection_sensitive():
    """nGPT bf16's largest lr scores within the seeds' spread of its best on the selection windows, and ends 0.3
    worse on the judged ones: at that runner-up the gap change is −0.15, at the best +0.15 (v4's kind of flip)."""
    flips = rows(FINAL, steps=1600, near={"ngpt/bfloat16": (0.005, 0.3)}) + rows(FINAL, steps=800)
    assert [k for k in NgptStorage().analyse(flips, plan()).measured if "@alt:ngpt/bfloat16" in k]
    assert judged(flips) == "inconclusive (selection-sensitive)"
    far = rows(FINAL, steps=1600, near={"ngpt/bfloat16": (0.1, 0.3)}) + rows(FINAL, steps=800)  # not near-tied
    assert judged(far) == "reproduced"
