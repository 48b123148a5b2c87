"""The 2025 papers' experiments (peri_variance, curse_of_depth, dyt): their grids, and verdicts that follow the
numbers on synthetic rows with known answers. The end-to-end smoke runs are test_reproduce.py's parametrized test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from normtrain.reproduce.cli import make_plan
from normtrain.reproduce.curse_of_depth import CurseOfDepth, probe_row
from normtrain.reproduce.dyt import DyT
from normtrain.reproduce.gpu_scale import ASSUMED_H100
from normtrain.reproduce.peri_variance import PeriVariance, variance_growth
from normtrain.reproduce.probing import halves
from normtrain.study.plan import Plan
from normtrain.study.stats import variance_exponent
from normtrain.study.verdicts import decide

UNIGRAM = 3.3


def judged_v4(exp, rows, tmp_path):
    """The v4 judgement of synthetic rows: every check by its role, and the verdict."""
    findings = exp.analyse(rows, Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    return decide(exp.registration, findings.measured, findings.unit)


def outcomes(judgement) -> dict[str, bool | None]:
    return {c.rule.id: c.ok for c in judgement.checks}


def trained(loss: float, **values) -> dict:
    return {"status": "completed", "final_val_loss": loss, "unigram_val_loss": UNIGRAM, "collapsed": False,
            "undertrained": False, "val_curve": f"0:5.5 1000:{loss}", **values}


def test_the_grids_run_the_papers_arms(tmp_path):
    peri = make_plan("peri_variance").combos()
    assert len(peri) == 35 and {c["placement"] for c in peri} == {"pre", "peri"}  # v4: Post-LN dropped
    lrs = {p: {float(c["optim.lr"]) for c in peri if c["placement"] == p} for p in ("pre", "peri")}
    assert lrs == {"pre": {2e-3, 5e-3, 1.25e-2}, "peri": {8e-4, 2e-3, 5e-3, 1.25e-2}}  # v5, and the edge rule's 8e-4
    assert {c["train.seed"] for c in peri} == {"10", "11", "12", "13", "14"}  # new seeds: v4 ran 5-9, v3 0-4
    assert {c["placement"] for c in make_plan("peri_variance", smoke=True).combos()} == {"pre", "peri"}
    depth_combos = make_plan("curse_of_depth").combos()
    arms = {(c["placement"], c["norm.depth_scaled"].lower()) for c in depth_combos}
    assert arms == {("pre", "false"), ("pre", "true")}  # LNS with Pre-LN only, as the paper (v4: no Peri-LN)
    lrs = {arm: sorted(float(c["optim.lr"]) for c in depth_combos if c["norm.depth_scaled"].lower() == arm
                       and c["train.seed"] == "15") for arm in ("false", "true")}
    assert lrs == {"false": [8e-4, 2e-3, 5e-3, 1.25e-2], "true": [2e-3, 5e-3, 1.25e-2, 3.125e-2]}  # the edge rule's
    assert len(depth_combos) == 32  # lower points (CHECK_HISTORY entry 4)
    assert {c["train.seed"] for c in depth_combos} == {"15", "16", "17", "18"}  # new seeds: v4 ran 5-9, v3 0-4
    assert len(make_plan("curse_of_depth", smoke=True).combos()) == 4  # both arms at two lrs
    dyt = make_plan("dyt").combos()
    assert len(dyt) == 5 * (3 * 4 + 1 + 3)  # seeds × (DyT's lrs × α₀, with the edge rule's α₀ 1 and lr 8e-4 at α₀
    # 0.5 (CHECK_HISTORY entry 6), + RMSNorm's lrs)
    assert {float(c["optim.lr"]) for c in dyt if c["norm"] == "dyt"} == {8e-4, 2e-3, 5e-3, 1.25e-2}
    assert {float(c["optim.lr"]) for c in dyt if c["norm"] == "dyt" and c["norm.alpha_init"] == "1.0"} == {
        2e-3, 5e-3, 1.25e-2}
    assert {float(c["optim.lr"]) for c in dyt if c["norm"] != "dyt"} == {8e-4, 2e-3, 5e-3}
    assert {c["norm.alpha_init"] for c in dyt if c["norm"] != "dyt"} == {"0.5"}
    assert {c["train.seed"] for c in dyt} == {"10", "11", "12", "13", "14"}  # new seeds: v4 ran 5-9, v3 0-4
    smoke = make_plan("dyt", smoke=True).combos()
    assert {c["norm"] for c in smoke} == {"dyt", "rmsnorm"} and len(smoke) == 6  # DyT at 2 α₀ and RMSNorm, 2 lrs
    gpu = make_plan("dyt", scale="gpu", device=ASSUMED_H100, out=tmp_path).grid
    assert gpu["norm.alpha_init"] == make_plan("dyt").grid["norm.alpha_init"]


def test_variance_exponent_and_halves():
    assert variance_exponent([math.sqrt(ell) for ell in range(1, 25)]) == pytest.approx(1.0)  # Var ∝ ℓ
    assert variance_exponent([ell for ell in range(1, 7)]) == pytest.approx(2.0)  # Var ∝ ℓ²
    assert halves([1.0, 2.0, 3.0]) == (1.0, 2.5) and halves([1.0]) == (None, None)


PERI_LRS = {"pre": (2e-3, 5e-3, 1.25e-2), "peri": (2e-3, 5e-3, 1.25e-2)}


def peri_rows(peri_loss: float = 1.95, reference_loss: float = 2.0, peri_best: float = 5e-3,
              pre_growth: float = 2.0, half_shift: float = 0.0) -> list[dict]:
    """Each placement's loss is a V over log lr: Pre-LN lowest (``reference_loss``) at 5e-3, Peri-LN lowest
    (``peri_loss``) at ``peri_best``, at T (2000 steps) and, ``half_shift`` nats worse for Peri-LN, at T/2. Over
    training Pre-LN's last-block variance grows ``pre_growth``×, Peri-LN's 1.5×; max |x| 3× and 2×; the depth
    exponent k is set by the placement (Peri-LN's larger, reported only)."""
    low = {"pre": (reference_loss, 5e-3), "peri": (peri_loss, peri_best)}
    growth, absmax = {"pre": pre_growth, "peri": 1.5}, {"pre": 3.0, "peri": 2.0}
    rows = []
    for steps in (2000, 1000):
        for s in range(10, 15):
            for p, lrs in PERI_LRS.items():
                for lr in lrs:
                    shift = half_shift if steps == 1000 and p == "peri" else 0.0
                    loss = (low[p][0] + {"pre": 0.002, "peri": 0.003}[p] * s + shift
                            + 0.05 * abs(math.log(lr / low[p][1])))
                    rows.append({"placement": p, "optim.lr": str(lr), "model.n_layers": "24", "train.seed": str(s),
                                 "steps": steps, "select_loss": loss - 0.01, "val_quarter_drop": 0.01,
                                 **trained(loss, growth_exponent={"pre": 0.8, "peri": 1.0}[p] + 0.01 * s,
                                           variance_growth=growth[p], absmax_growth=absmax[p], final_absmax=20.0,
                                           grad_spikes=0, loss_spikes=1, rms_profile=" ".join("1" for _ in range(24)),
                                           absmax_curve="0:1 1000:20")})
    return rows


def test_variance_growth_is_the_last_blocks_mean_square_end_over_start():
    rms = np.array([[1.0, 2.0, 4.0], [1.0, 3.0, 6.0], [1.5, 3.0, 8.0]])  # logged steps × blocks
    assert variance_growth(rms) == pytest.approx(4.0)  # (8 / 4)²: the level at step 0 divides out
    assert variance_growth(np.empty((0, 3))) is None and variance_growth(np.array([[1.0, 0.0]])) is None


def test_peri_variance_verdict_follows_the_loss_at_each_arms_best_lr_at_both_budgets(tmp_path):
    exp = PeriVariance()
    found = judged_v4(exp, peri_rows(), tmp_path)
    assert found.verdict == "reproduced" and all(outcomes(found).values())
    primary = found.role("primary")[0]
    assert primary.conditions["L=24"]["per_seed"]["10"] == pytest.approx(-0.04)  # per seed, each at its best lr
    assert found.v5["budget"]["L=24"]["ok"] and found.v5["conditions"]["L=24"]["call"] == "holds"
    assert found.role("secondary")[0].conditions["L=24"]["median"] == pytest.approx(2.0 / 1.5)
    found = judged_v4(exp, peri_rows(peri_loss=2.05, pre_growth=1.2), tmp_path)  # Peri-LN worse; growth 1.2 < 1.5
    assert found.verdict == "not reproduced"  # the interval excludes a 0.02-nat lead (sesoi)
    assert outcomes(found)["pre_variance_grows_more_in_training"] is False
    found = judged_v4(exp, peri_rows(half_shift=0.06), tmp_path)  # at T/2 Peri-LN is behind: the call flips
    assert found.verdict == "inconclusive (budget-sensitive)"
    found = judged_v4(exp, peri_rows(peri_best=1.25e-2), tmp_path)  # Peri-LN's best is its grid's largest
    assert found.verdict == "inconclusive (precondition)" and outcomes(found)["best_lr_inside_grid"] is False
    found = judged_v4(exp, peri_rows(reference_loss=UNIGRAM - 0.1), tmp_path)  # Pre-LN barely learned
    assert found.guard.ok is False and found.verdict == "inconclusive (undertrained)"


def probe(skip: list[float], cos: list[float]) -> dict:
    return {"val_loss": 2.0, "layers": [{"skip_delta": s, "block_cos": c, "act_rms": 1.0 + i}
                                        for i, (s, c) in enumerate(zip(skip, cos, strict=True))]}


DEPTH_LRS = {("pre", "False"): (2e-3, 5e-3, 1.25e-2), ("pre", "True"): (5e-3, 1.25e-2, 3.125e-2)}


def depth_rows(lns_loss: float = 1.98, lns_best: float = 1.25e-2, half_shift: float = 0.0) -> list[dict]:
    """Pre-LN's deep blocks are near the identity (cos 0.95, skip Δ 0.01); LNS makes them count (0.8, 0.05). Each
    arm's loss is a V over log lr: Pre-LN lowest (2.0) at 5e-3, LNS lowest (``lns_loss``) at ``lns_best``, at T
    (2000 steps) and, ``half_shift`` nats worse for LNS, at T/2; the probe's numbers are the same at every lr (only
    the best lr's are read), and at T only."""
    early_skip, early_cos = [1.0] + [0.2] * 11, [0.5] * 12
    profiles = {("pre", "False"): probe(early_skip + [0.01] * 12, early_cos + [0.95] * 12),
                ("pre", "True"): probe(early_skip + [0.05] * 12, early_cos + [0.8] * 12)}
    low = {("pre", "False"): (2.0, 5e-3), ("pre", "True"): (lns_loss, lns_best)}
    rows = []
    for steps in (2000, 1000):
        for s in range(15, 19):
            for arm, lrs in DEPTH_LRS.items():
                for lr in lrs:
                    shift = half_shift if steps == 1000 and arm[1] == "True" else 0.0
                    loss = (low[arm][0] + {"False": 0.001, "True": 0.002}[arm[1]] * s + shift
                            + 0.05 * abs(math.log(lr / low[arm][1])))
                    probed = probe_row(profiles[arm]) if steps == 2000 else {}
                    rows.append({"placement": arm[0], "norm.depth_scaled": arm[1], "optim.lr": str(lr),
                                 "model.n_layers": "24", "train.seed": str(s), "steps": steps,
                                 "select_loss": loss - 0.01, **trained(loss), **probed})
    return rows


def test_curse_of_depth_reads_the_probe_by_halves_and_judges_each_arm_at_its_best_lr(tmp_path):
    row = probe_row(probe([1.0] * 12 + [0.01] * 12, [0.5] * 12 + [0.95] * 12))
    assert (row["skip_early"], row["skip_deep"], row["cos_deep"]) == (1.0, pytest.approx(0.01), pytest.approx(0.95))
    assert probe_row(None)["skip_deep"] is None  # a run with nothing to probe is missing, not zero
    exp = CurseOfDepth()
    found = judged_v4(exp, depth_rows(), tmp_path)
    assert found.verdict == "reproduced" and all(outcomes(found).values())
    primary = found.role("primary")[0]
    assert primary.rule.id == "lns_lowers_loss" and primary.conditions["L=24"]["median"] == pytest.approx(-0.0035)
    found = judged_v4(exp, depth_rows(lns_loss=2.01), tmp_path)  # LNS uses its deep blocks, but ends worse
    assert found.verdict == "not reproduced" and outcomes(found)["lns_deep_blocks_count"] is True
    found = judged_v4(exp, depth_rows(half_shift=0.05), tmp_path)  # behind at T/2, ahead at T: budget-sensitive
    assert found.verdict == "inconclusive (budget-sensitive)"
    found = judged_v4(exp, depth_rows(lns_best=3.125e-2), tmp_path)  # LNS's best lr is its grid's largest
    assert found.verdict == "inconclusive (precondition)" and outcomes(found)["best_lr_inside_grid"] is False
    assert exp.keeps({"placement": "pre", "norm.depth_scaled": "true", "optim.lr": "3.125e-2"})
    assert not exp.keeps({"placement": "pre", "norm.depth_scaled": "false", "optim.lr": "3.125e-2"})
    assert exp.keeps({"placement": "pre", "norm.depth_scaled": "true", "optim.lr": "2e-3"})  # the edge rule's
    assert not exp.keeps({"placement": "pre", "norm.depth_scaled": "true", "optim.lr": "8e-4"})  # Pre-LN's only


DYT_LRS = {"rmsnorm": (8e-4, 2e-3, 5e-3), "dyt": (2e-3, 5e-3, 1.25e-2)}


def dyt_rows(alpha: float = 0.25, dyt_gap: float = 0.005, dyt_lr: float = 5e-3, spread: float = 0.1,
             alphas: tuple[float, ...] = (0.125, 0.25, 0.5), half_gap: float | None = None,
             alpha_noise: float = 0.0) -> list[dict]:
    """RMSNorm lowest (2.0) at 2e-3; DyT lowest (2.0 + ``dyt_gap``; ``half_gap`` at T/2, default the same) at α₀ =
    ``alpha`` and ``dyt_lr``, its loss a V over log lr and, ``spread`` per factor 2, over log α₀; DyT − RMSNorm
    alternates ± 0.002 around the gap over seeds (an interval needs a spread), and ± ``alpha_noise`` with opposite
    signs at neighbouring α₀ (so that two α₀ can be near-tied). Rows at T (1600) and T/2 (800)."""
    rows = []
    for steps in (1600, 800):
        gap = dyt_gap if steps == 1600 or half_gap is None else half_gap
        for s in range(10, 15):
            for norm, grid in (("rmsnorm", (0.5,)), ("dyt", alphas)):
                for lr in DYT_LRS[norm]:
                    for a in grid:
                        base = (2.0, 2e-3) if norm == "rmsnorm" else (2.0 + gap, dyt_lr)
                        loss = base[0] + 0.001 * s + 0.05 * abs(math.log(lr / base[1]))
                        loss += (spread * abs(math.log2(a / alpha)) + 0.002 * (-1) ** s
                                 + alpha_noise * (-1) ** (s + round(math.log2(a)))) if norm == "dyt" else 0.0
                        rows.append({"norm": norm, "norm.alpha_init": str(a), "optim.lr": str(lr), "steps": steps,
                                     "train.seed": str(s), "select_loss": loss - 0.01, **trained(loss)})
    return rows


def test_dyt_tunes_alpha_and_lr_by_the_rule_and_compares_with_rmsnorm_at_its_best(tmp_path):
    exp = DyT()
    found = judged_v4(exp, dyt_rows(), tmp_path)
    assert found.verdict == "reproduced" and all(outcomes(found).values())
    assert found.role("primary")[0].conditions[""]["per_seed"]["10"] == pytest.approx(0.007)  # α₀ 0.25, lr 5e-3
    assert found.role("secondary")[0].conditions["DyT's best lr"]["per_seed"]["10"] == pytest.approx(0.1)
    found = judged_v4(exp, dyt_rows(dyt_gap=0.1), tmp_path)  # DyT 0.1 nats worse at its best
    assert found.verdict == "not reproduced" and outcomes(found)["dyt_alpha_sensitive"] is True
    found = judged_v4(exp, dyt_rows(dyt_gap=0.1, half_gap=0.0), tmp_path)  # on par at T/2, worse at T
    assert found.verdict == "inconclusive (budget-sensitive)"
    found = judged_v4(exp, dyt_rows(alpha=0.5), tmp_path)  # the best α₀ is the grid's largest
    assert found.verdict == "inconclusive (precondition)" and outcomes(found)["best_alpha_inside_grid"] is False
    found = judged_v4(exp, dyt_rows(dyt_lr=2e-3), tmp_path)  # DyT's best lr is the grid's smallest
    assert outcomes(found)["best_lr_inside_grid"] is False and found.verdict == "inconclusive (precondition)"
    assert exp.keeps({"norm": "rmsnorm", "norm.alpha_init": "0.5"}) and not exp.keeps({"norm": "rmsnorm",
                                                                                        "norm.alpha_init": "0.25"})
    assert exp.keeps({"norm": "rmsnorm", "norm.alpha_init": "0.5", "optim.lr": "8e-4"})  # RMSNorm's grid alone
    assert exp.keeps({"norm": "dyt", "norm.alpha_init": "0.5", "optim.lr": "8e-4"})  # the edge rule's extension
    assert not exp.keeps({"norm": "dyt", "norm.alpha_init": "0.25", "optim.lr": "8e-4"})  # at α₀ 0.5 alone
    assert not exp.keeps({"norm": "rmsnorm", "norm.alpha_init": "0.5", "optim.lr": "1.25e-2"})  # DyT's alone


def test_dyts_near_tied_alpha_is_read_as_a_second_selection(tmp_path):
    """α₀ 0.5 within the seeds' spread of the pick 0.25 (v4's near tie): the primary is read there too."""
    exp = DyT()
    rows = dyt_rows(spread=0.008, alpha_noise=0.003)
    findings = exp.analyse(rows, Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    alts = [k for k in findings.measured if "@alt:DyT at its runner-up" in k]
    assert len(alts) == 1 and "α₀=" in alts[0] and findings.measured[alts[0]][""]
    assert "dyt_minus_rms_at_best@half" in findings.measured
    found = judged_v4(exp, dyt_rows(spread=0.008, alpha_noise=0.003), tmp_path)
    assert found.verdict == "reproduced" and found.v5["selection"]  # the same call at the runner-up


def test_dyts_best_alpha_is_the_arm_whose_best_lr_scores_lowest():
    from normtrain.reproduce.dyt import alpha_inside, arm_of, best_alpha_arm
    from normtrain.study.best_lr import ALL_SEEDS, BestLr

    arms = ["dyt α₀=0.5", "dyt α₀=1", "dyt α₀=2"]
    scores = zip(arms, (2.1, 2.0, 2.0), strict=True)
    best = {a: BestLr(a, (1e-3, 2e-3, 4e-3), {2e-3: score}, 2e-3) for a, score in scores}
    assert best_alpha_arm(best, arms) == "dyt α₀=1"  # a tie goes to the smaller α₀
    assert alpha_inside(arms, "dyt α₀=1") == {"DyT": {ALL_SEEDS: 1.0}}
    assert alpha_inside(arms, "dyt α₀=2") == {"DyT": {ALL_SEEDS: 0.0}} and alpha_inside(arms[:2], "dyt α₀=1") == {
        "DyT": {ALL_SEEDS: 0.0}}  # fewer than 3 α₀: no inside
    assert alpha_inside(arms, None) == {"DyT": {ALL_SEEDS: None}}
    assert arm_of({"norm": "dyt", "norm.alpha_init": "1.0"}) == "dyt α₀=1" and arm_of({"norm": "rmsnorm"}) == "rmsnorm"
