"""softcap_vs_qknorm's quantities on synthetic rows: the arms, the part of the grid that is run, the best stable lr
and the arms read at 2× and 4× of it, paired by seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from normtrain.reproduce.softcap_vs_qknorm import SoftcapVsQKNorm, arm_of, in_design, multiples_in_grid
from normtrain.study import best_lr
from normtrain.study.plan import Plan

LRS = (0.0025, 0.005, 0.01, 0.02, 0.04)
AXES = {"none": ("0", "none", "0"), "softcap": ("50", "none", "0"), "qknorm": ("0", "per_head", "0"),
        "both": ("50", "per_head", "0"), "qkclip": ("0", "none", "100")}


def combo(arm: str, optim: str = "adamw", lr: float = 0.01, seed: str = "5") -> dict[str, str]:
    cap, qk, clip = AXES[arm]
    return {"optim": optim, "model.attn_softcap": cap, "model.qk_norm": qk, "optim.qk_clip": clip,
            "optim.lr": str(lr), "optim.muon_lr": str(2 * lr if optim == "muon" else 0.02), "train.seed": seed}


def test_the_arms_and_the_part_of_the_grid_that_is_run():
    assert [arm_of(combo(a)) for a in AXES] == list(AXES)
    assert arm_of({**combo("qkclip"), "model.qk_norm": "per_head"}) == "invalid"
    assert in_design(combo("none", lr=0.0025), LRS)  # none at every lr: it sets the best stable lr
    assert not in_design(combo("qknorm", lr=0.0025), LRS) and in_design(combo("qknorm", lr=0.005), LRS)
    assert not in_design(combo("qkclip"), LRS) and in_design(combo("qkclip", "muon"), LRS)  # QK-Clip: Muon only
    assert in_design(combo("softcap", seed="9"), LRS) and not in_design(combo("both", seed="9"), LRS)  # v5: 5-9
    assert not in_design({**combo("none", "muon"), "optim.muon_lr": "0.05"}, LRS)  # Muon's lr is 2 × AdamW's


def rows(loss: dict[str, float], logit: dict[str, float], best: float = 0.01) -> list[dict]:
    """Every arm under both optimizers at every lr, seeds 5-7: ``none`` has its lowest loss at ``best``; every
    arm's loss at lr is ``loss[arm] + |log2(lr/best)|·0.1 + 0.01·seed``, its max logit ``logit[arm]·lr/best``."""
    import math

    out = []
    for optim in ("adamw", "muon"):
        for arm in loss:
            if arm == "qkclip" and optim == "adamw":
                continue
            for lr in LRS:
                for seed in range(3):
                    v = loss[arm] + abs(math.log2(lr / best)) * 0.1 + 0.01 * seed
                    out.append({**combo(arm, optim, lr, str(5 + seed)), "status": "completed", "final_val_loss": v,
                                "select_loss": v, "unigram_val_loss": 3.3,
                                "final_attn_logit_max": logit[arm] * lr / best})
    return out


def plan() -> Plan:
    return Plan("softcap_vs_qknorm", "cpu", True, [], {}, Path("r"), Path("o"), progress=False)


def test_arms_are_read_at_2x_and_4x_the_none_arms_best_lr_and_paired_by_seed():
    found = SoftcapVsQKNorm().analyse(rows({"none": 2.0, "softcap": 1.9, "qknorm": 1.8, "both": 1.79,
                                            "qkclip": 1.85}, {a: 10.0 for a in AXES}), plan())
    m = found.measured
    assert set(m["softcap_minus_qknorm"]) == {"adamw 2×", "adamw 4×", "muon 2×", "muon 4×"}
    assert m["softcap_minus_qknorm"]["adamw 4×"] == pytest.approx({"5": 0.1, "6": 0.1, "7": 0.1})
    assert m["qknorm_minus_both"]["muon 2×"] == pytest.approx({"5": 0.01, "6": 0.01, "7": 0.01})
    assert m["qkclip_minus_qknorm"]["muon 4×"] == pytest.approx({"5": 0.05, "6": 0.05, "7": 0.05})
    assert m["multiples_in_grid"] == {"adamw": {best_lr.ALL_SEEDS: 1.0}, "muon": {best_lr.ALL_SEEDS: 1.0}}
    assert m["logit_growth_none"]["adamw"] == pytest.approx({"5": 4.0, "6": 4.0, "7": 4.0})  # 4× lr, 4× logit
    assert m["reference_margin"]["none, AdamW, 1×"] == pytest.approx({"5": 1.3, "6": 1.29, "7": 1.28})
    assert "max attention logit" in found.table


def test_a_best_stable_lr_without_its_4x_in_the_grid_fails_the_precondition():
    found = SoftcapVsQKNorm().analyse(rows({"none": 2.0, "softcap": 1.9, "qknorm": 1.8}, {a: 1.0 for a in AXES},
                                           best=0.02), plan())
    assert found.measured["multiples_in_grid"]["adamw"] == {best_lr.ALL_SEEDS: 0.0}
    assert found.measured["softcap_minus_qknorm"]["adamw 4×"] == {}  # 0.08 was not run
    edge = best_lr.BestLr("none", LRS, {}, 0.0025)
    assert multiples_in_grid(edge) == 0.0 and multiples_in_grid(best_lr.BestLr("none", LRS, {}, None)) is None


def design_rows(gap: float, steps: int) -> list[dict]:
    """The part of the grid that is run (``in_design``: seeds 5–9, both and QK-Clip 5–7) at ``steps``: every arm's
    loss is V-shaped around the ``none`` arm's best 1e-2 (0.1 per factor 2), the soft-cap ``gap`` nats above
    QK-norm, ±0.002 apart by seed; the max logit grows with the lr."""
    import itertools
    import math

    jitter = {"5": -0.002, "6": 0.001, "7": 0.0, "8": 0.002, "9": -0.001}
    base = {"none": 2.0, "qknorm": 1.8, "softcap": 1.8 + gap, "both": 1.79, "qkclip": 1.85}
    out = []
    for optim, arm, lr, seed in itertools.product(("adamw", "muon"), AXES, LRS, jitter):
        c = combo(arm, optim, lr, seed)
        if not in_design(c, LRS):
            continue
        v = base[arm] + abs(math.log2(lr / 0.01)) * 0.1 + 0.01 * int(seed) + (jitter[seed] if arm == "softcap" else 0)
        out.append({**c, "status": "completed", "steps": steps, "final_val_loss": v, "select_loss": v,
                    "unigram_val_loss": 3.3, "final_attn_logit_max": 10.0 * lr / 0.01})
    return out


@pytest.mark.parametrize(("gap", "half_gap", "verdict"), [
    (0.05, 0.05, "reproduced"),
    (0.05, -0.05, "inconclusive (budget-sensitive)"),
    (0.0, 0.0, "not reproduced"),
])
def test_softcap_vs_qknorm_v5_reads_the_four_conditions_at_t_and_at_half_the_steps(gap, half_gap, verdict, tmp_path):
    """softcap_vs_qknorm's v5 analysis on the design's grid, the best stable lr 1e-2 (4× of it run): QK-norm 0.05
    nats below the soft-cap at 2× and 4× under both optimizers, at T (1000 steps) and T/2 (500), puts every 90%
    interval above 0; 0.05 above it at T/2 refutes the claim there (budget-sensitive); no difference at both
    leaves intervals below the 0.01 smallest effect: refuted."""
    from normtrain.study.verdicts import decide

    exp = SoftcapVsQKNorm()
    full = design_rows(gap, 1000)
    assert len(full) == 166  # the registration's 166 runs
    findings = exp.analyse(full + design_rows(half_gap, 500), Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    half = findings.measured["softcap_minus_qknorm@half"]
    assert set(half) == {"adamw 2×", "adamw 4×", "muon 2×", "muon 4×"}
    assert half["muon 4×"] == pytest.approx({"5": half_gap - 0.002, "6": half_gap + 0.001, "7": half_gap,
                                             "8": half_gap + 0.002, "9": half_gap - 0.001})
    assert not [k for k in findings.measured if "@alt:" in k]  # the runner-up is 0.1 nats behind, with no spread
    assert decide(exp.registration, findings.measured, findings.unit).verdict == verdict
