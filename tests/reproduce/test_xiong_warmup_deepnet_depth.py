"""The v4 analyses of xiong_warmup, deepnet_depth and lr_sensitivity on synthetic rows: every quantity the
registrations' rules name, each arm at its own best lr."""

from __future__ import annotations

import pytest

from normtrain.reproduce.xiong_warmup import ARMS, arm_of, measure_checks, penalty_at
from normtrain.study import best_lr


def warmup_rows(losses: dict[tuple[str, int, float], list[float]]) -> list[dict]:
    """``losses[(placement, warm-up steps, lr)]``: the final loss per seed (seeds 5, 6, 7); selection = loss."""
    rows = []
    for (p, w, lr), vals in losses.items():
        for i, v in enumerate(vals):
            rows.append({"placement": p, "optim.warmup_steps": str(w), "optim.lr": str(lr), "train.seed": str(5 + i),
                         "status": "completed", "final_val_loss": v, best_lr.SELECTION: v, "select_loss": v,
                         "val_quarter_drop": 0.02, "unigram_val_loss": 3.3})
    for r in rows:
        r["arm"] = arm_of(r)
    return rows


def test_warmup_compares_each_arm_at_its_own_best_lr_and_keeps_the_paper_lrs():
    post_lrs, pre_lrs = (2.5e-4, 5e-4, 1e-3), (5e-4, 1e-3, 2e-3)
    cold = {2.5e-4: [2.50, 2.52, 2.51], 5e-4: [2.60, 2.62, 2.61], 1e-3: [3.2, 3.3, 3.25]}  # best at 2.5e-4: an edge
    warm = {2.5e-4: [2.50, 2.50, 2.50], 5e-4: [2.40, 2.38, 2.41], 1e-3: [2.60, 2.55, 2.70]}  # best 5e-4, inside
    pre = {5e-4: [2.3, 2.3, 2.3], 1e-3: [2.1, 2.1, 2.1], 2e-3: [2.2, 2.2, 2.2]}
    rows = warmup_rows({**{("post", 0, lr): cold[lr] for lr in post_lrs},
                        **{("post", 200, lr): warm[lr] for lr in post_lrs},
                        **{("pre", 0, lr): pre[lr] for lr in pre_lrs},
                        **{("pre", 200, lr): [v + 0.01 for v in pre[lr]] for lr in pre_lrs}})
    best = best_lr.best_lrs(rows, "arm", ARMS)
    assert [best[a].lr for a in ARMS] == [2.5e-4, 5e-4, 1e-3, 1e-3]
    m = measure_checks(rows, best, 3.3)
    # cold at 2.5e-4 against warm at 5e-4, seed by seed: the primary's best-against-best gap
    assert m["post_cold_minus_warm_at_best"][""] == pytest.approx({"5": 0.10, "6": 0.14, "7": 0.10})
    assert m["pre_cold_minus_warm_at_best"][""] == pytest.approx({"5": -0.01, "6": -0.01, "7": -0.01})
    assert m["post_minus_pre_penalty_at_best"][""] == pytest.approx({"5": 0.11, "6": 0.15, "7": 0.11})
    # at the paper's lrs (v3's comparison): the same lr for both arms
    assert m["post_penalty"]["lr 0.0005"] == pytest.approx({"5": 0.20, "6": 0.24, "7": 0.20})
    assert penalty_at(rows, "post", 1e-3) == pytest.approx({"5": 0.6, "6": 0.75, "7": 0.55})
    assert m["post_penalty_growth"][""] == pytest.approx({"5": 0.4, "6": 0.51, "7": 0.35})
    assert m["best_lr_inside_grid"] == {"post, no warm-up": {best_lr.ALL_SEEDS: 0.0},  # v5: every arm a check reads
                                        "post, warm-up": {best_lr.ALL_SEEDS: 1.0},
                                        "pre, no warm-up": {best_lr.ALL_SEEDS: 1.0},
                                        "pre, warm-up": {best_lr.ALL_SEEDS: 1.0}}
    assert m["reference_margin"]["post, warm-up"] == pytest.approx({"5": 0.9, "6": 0.92, "7": 0.89})
    assert set(m["val_quarter_drop_at_best"]) == {"post, warm-up"}


def test_warmup_keeps_each_placements_own_lr_range():
    from normtrain.reproduce.xiong_warmup import Warmup

    keeps = Warmup().keeps
    assert keeps({"placement": "post", "optim.lr": "0.000125"})
    assert not keeps({"placement": "post", "optim.lr": "0.002"})
    assert keeps({"placement": "pre", "optim.lr": "0.002"}) and keeps({"placement": "pre", "optim.lr": "0.008"})
    assert not keeps({"placement": "pre", "optim.lr": "0.0005"})  # v5: Pre-LN's grid starts at 1e-3


def depth_rows(losses: dict[tuple[str, int, float], list[float]]) -> list[dict]:
    """``losses[(placement, depth, lr)]``: the final loss per seed (seeds 3, 4, 5); selection = loss."""
    from normtrain.reproduce.deepnet_depth import arm_of as depth_arm

    rows = [{"placement": p, "model.n_layers": str(d), "optim.lr": str(lr), "train.seed": str(3 + i),
             "status": "completed", "final_val_loss": v, best_lr.SELECTION: v, "select_loss": v,
             "unigram_val_loss": 3.3}
            for (p, d, lr), vals in losses.items() for i, v in enumerate(vals)]
    for r in rows:
        r["arm"] = depth_arm(r)
    return rows


def test_depth_compares_each_placement_at_its_best_lr_per_depth():
    from normtrain.reproduce.deepnet_depth import deep_depths
    from normtrain.reproduce.deepnet_depth import measure_checks as depth_checks

    post = {(6, 2.5e-4): 2.6, (6, 5e-4): 2.4, (6, 1e-3): 2.3, (24, 2.5e-4): 3.2, (24, 5e-4): 3.3, (24, 1e-3): 3.3}
    deep = {(6, 5e-4): 2.5, (6, 1e-3): 2.4, (6, 2e-3): 2.45, (24, 5e-4): 2.4, (24, 1e-3): 2.2, (24, 2e-3): 2.3}
    rows = depth_rows({**{("post", d, lr): [v, v + 0.01, v + 0.02] for (d, lr), v in post.items()},
                       **{("deepnorm", d, lr): [v, v, v] for (d, lr), v in deep.items()}})
    arms = [f"{p}, L={d}" for p in ("post", "deepnorm") for d in (6, 24)]
    best = best_lr.best_lrs(rows, "arm", arms)
    assert [best[a].lr for a in arms] == [1e-3, 2.5e-4, 1e-3, 1e-3]
    m = depth_checks(rows, best, [6, 24], 3.3)
    assert deep_depths([6, 12, 18, 24]) == [18, 24] and deep_depths([6, 12]) == [12]
    assert m["post_minus_deepnorm_at_best"] == {"L=24": pytest.approx({"3": 1.0, "4": 1.01, "5": 1.02})}
    assert m["post_deep_minus_shallow_at_best"] == {"L=24": pytest.approx({"3": 0.9, "4": 0.9, "5": 0.9})}
    assert m["deepnorm_deep_minus_shallow_at_best"] == {"L=24": pytest.approx({"3": -0.2, "4": -0.2, "5": -0.2})}
    assert m["post_minus_deepnorm_shallow"] == {"L=6": pytest.approx({"3": -0.1, "4": -0.09, "5": -0.08})}
    # v5's primary: the gap's growth from 6 layers, seed by seed (1.0 − (−0.1) ...)
    assert m["post_gap_growth_with_depth"] == {"L=24": pytest.approx({"3": 1.1, "4": 1.1, "5": 1.1})}
    # v5: every arm's edge; Post-LN's deep best sits at its smallest lr, on a curve 0.1 nats deep: not flat
    assert m["best_lr_inside_grid"] == {"post, L=6": {best_lr.ALL_SEEDS: 0.0}, "post, L=24": {best_lr.ALL_SEEDS: 0.0},
                                        "deepnorm, L=6": {best_lr.ALL_SEEDS: 1.0},
                                        "deepnorm, L=24": {best_lr.ALL_SEEDS: 1.0}}
    assert m["reference_margin"]["deepnorm, L=24"] == pytest.approx({"3": 1.1, "4": 1.1, "5": 1.1})


def test_a_deep_post_ln_curve_that_no_lr_trains_passes_the_edge_rule_as_flat():
    from normtrain.reproduce.deepnet_depth import inside_or_flat

    flat = {(24, 2.5e-4): 3.31, (24, 5e-4): 3.33, (24, 1e-3): 3.33}  # on the unigram line at every lr
    rows = depth_rows({("post", d, lr): [v, v, v] for (d, lr), v in flat.items()})
    best = best_lr.best_lrs(rows, "arm", ["post, L=24"])
    assert best["post, L=24"].at_edge and inside_or_flat(best, [24]) == {"post, L=24": {best_lr.ALL_SEEDS: 1.0}}


def depth_losses(shallow_gap: float, deep_gap: float) -> dict[tuple[str, int, float], list[float]]:
    """Final losses on v5's grid (ARM_LRS), five seeds: every arm's best at its grid's second lr, Post-LN
    ``shallow_gap`` nats behind DeepNorm at 6 layers and ``deep_gap`` (+0.01 per seed: a paired spread) at 18, 24."""
    from normtrain.reproduce.deepnet_depth import ARM_LRS

    bump = (0.1, 0.0, 0.15, 0.3)  # a curve's excess over its best, by its lrs in order
    losses = {}
    for p, by_depth in ARM_LRS.items():
        for d, lrs in by_depth.items():
            behind = 0.0 if p == "deepnorm" else shallow_gap if d == 6 else deep_gap
            per_seed = 0.02 if p == "post" and d > 6 else 0.01
            losses.update({(p, d, lr): [2.2 + behind + bump[i] + per_seed * s for s in range(5)]
                           for i, lr in enumerate(lrs)})
    return losses


@pytest.mark.parametrize(("shallow_gap", "deep_gap", "half_deep_gap", "verdict"), [
    (0.05, 0.8, 0.8, "reproduced"),
    (0.4, 0.4, 0.4, "not reproduced"),
    (0.05, 0.8, 0.2, "inconclusive (budget-sensitive)"),
])
def test_depth_v5_reads_the_depth_interaction_at_t_and_at_half_the_steps(shallow_gap, deep_gap, half_deep_gap,
                                                                         verdict, tmp_path):
    """deepnet_depth's v5 analysis, every arm inside its grid and DeepNorm 1.1 nats below the line: a gap that grows
    by 0.75 from 6 layers, at T and T/2, clears 0.3; a gap of 0.4 at every depth has no interaction (its interval
    lies below 0.3) though Post-LN is far behind deep; growth 0.15 at T/2 against 0.75 at T flips the call."""
    from normtrain.reproduce.deepnet_depth import PRIMARY_QUANTITY, Depth
    from normtrain.study.plan import Plan
    from normtrain.study.verdicts import decide

    rows = [{**r, "steps": 1000} for r in depth_rows(depth_losses(shallow_gap, deep_gap))]
    rows += [{**r, "steps": 500} for r in depth_rows(depth_losses(shallow_gap, half_deep_gap))]
    exp = Depth()
    findings = exp.analyse(rows, Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    assert set(findings.measured[PRIMARY_QUANTITY + "@half"]) == {"L=18", "L=24"}
    judged = decide(exp.registration, findings.measured, findings.unit)
    assert judged.guard.ok and all(c.ok for c in judged.role("precondition"))
    behind_deep = next(c for c in judged.checks if c.rule.id == "post_fails_deep")  # secondary: reported only
    assert behind_deep.ok is (deep_gap >= 0.3)
    assert judged.verdict == verdict


def test_lr_sensitivity_flags_a_best_lr_at_the_grid_edge_per_variant_and_depth():
    from normtrain.reproduce.lr_sensitivity import best_by_rule

    def row(v, d, lr, s, loss):
        return {"placement": "pre", "variant": v, "model.n_layers": str(d), "optim.lr": str(lr), "train.seed": str(s),
                "status": "completed", "final_val_loss": loss, "select_loss": loss}

    lrs = (3e-4, 1e-3, 3e-3)
    rows = [row("pre", 24, lr, s, loss) for s in (3, 4, 5) for lr, loss in zip(lrs, (1.6, 1.5, 1.55), strict=True)]
    rows += [row("pre+qk", 24, lr, s, loss) for s in (3, 4, 5) for lr, loss in zip(lrs, (1.4, 1.5, 1.6), strict=True)]
    best = best_by_rule(rows, ["pre", "pre+qk"], [24])
    assert {a: b.lr for a, b in best.items()} == {"pre, L=24": 1e-3, "pre+qk, L=24": 3e-4}
    assert best_lr.inside_grid(best) == {"pre, L=24": {best_lr.ALL_SEEDS: 1.0},
                                         "pre+qk, L=24": {best_lr.ALL_SEEDS: 0.0}}  # its best at the smallest lr


@pytest.mark.parametrize(("half_gap", "verdict"), [(0.2, "reproduced"), (0.05, "inconclusive (budget-sensitive)")])
def test_warmup_v5_reads_the_primary_at_t_and_at_half_the_steps(half_gap, verdict, tmp_path):
    """xiong_warmup's v5 analysis: each arm at its own best lr on the held-out score, at T (2000 steps) and again at
    T/2 (1000): a 0.2-nat penalty at both holds; one that is 0.05 at T/2 (below the 0.1 threshold) flips the call."""
    from normtrain.reproduce.xiong_warmup import Warmup
    from normtrain.study.plan import Plan
    from normtrain.study.verdicts import decide

    def losses(gap: float) -> dict:
        post, pre = (1.25e-4, 2.5e-4, 5e-4, 1e-3), (1e-3, 2e-3, 4e-3, 8e-3)
        bump = {0: 0.2, 1: 0.0, 2: 0.1, 3: 0.3}  # each arm's best at its grid's second point: inside
        return {**{("post", 0, lr): [2.4 + gap + bump[i] + 0.01 * s for s in range(5)] for i, lr in enumerate(post)},
                **{("post", 200, lr): [2.4 + bump[i] + 0.012 * s for s in range(5)] for i, lr in enumerate(post)},
                **{("pre", w, lr): [2.1 + bump[i] + 0.01 * s for s in range(5)] for w in (0, 200)
                   for i, lr in enumerate(pre)}}

    rows = [{**r, "steps": 2000} for r in warmup_rows(losses(0.2))]
    rows += [{**r, "steps": 1000} for r in warmup_rows(losses(half_gap))]
    exp = Warmup()
    findings = exp.analyse(rows, Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    assert "post_cold_minus_warm_at_best@half" in findings.measured
    assert decide(exp.registration, findings.measured, findings.unit).verdict == verdict


def sensitivity_rows(qk_slope: float, steps: int) -> list[dict]:
    """lr_sensitivity's grid at ``steps``, seeds 6–8: Pre-LN, Pre-LN + QK-norm and Post-LN at the 7 lrs at L = 2 and
    8, the first two at the top 6 at L = 24. Every curve is V-shaped around 1e-2 (inside the grid), its loss rising
    by its slope per grid step away from it (Pre-LN 0.3, Post-LN 0.4, QK-norm ``qk_slope`` + 0.01 per seed); ℓ0 5.5."""
    lrs = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
    cells = [(v, d) for d in (2, 8) for v in ("pre", "pre+qk", "post")] + [("pre", 24), ("pre+qk", 24)]
    rows = []
    for v, d in cells:
        for i, lr in enumerate(lrs):
            for k in range(3):
                if d == 24 and lr < 1e-3:
                    continue
                slope = {"pre": 0.3, "post": 0.4}.get(v, qk_slope + 0.01 * (k - 1))
                loss = 2.0 + 0.3 * (v == "post") + slope * abs(i - 3) + 0.01 * k
                rows.append({"placement": v.removesuffix("+qk"), "model.qk_norm": str(v == "pre+qk"),
                             "model.n_layers": str(d), "optim.lr": str(lr), "train.seed": str(6 + k),
                             "status": "completed", "steps": steps, "final_val_loss": loss, "select_loss": loss,
                             "initial_val_loss": 5.5, "unigram_val_loss": 3.3, "attn_logit_curve": "",
                             "final_attn_logit_max": 5.0 if v == "pre+qk" else 1e3 * lr})
    return rows


@pytest.mark.parametrize(("slope", "half_slope", "verdict"), [
    (0.15, 0.15, "reproduced"),
    (0.15, 0.45, "inconclusive (budget-sensitive)"),
    (0.3, 0.3, "not reproduced"),
])
def test_lr_sensitivity_v5_reads_the_primary_at_every_depth_at_t_and_at_half_the_steps(slope, half_slope, verdict,
                                                                                        tmp_path):
    """lr_sensitivity's v5 analysis: QK-norm's curve half as steep as Pre-LN's at T (1000 steps) and T/2 (500) puts
    every depth's 90% interval of the sensitivity gap (means 0.26, 0.26, 0.23 nats) above 0; steeper than Pre-LN's
    at T/2 refutes it there (budget-sensitive); as steep at both leaves intervals below the 0.05 smallest effect."""
    from normtrain.reproduce.lr_sensitivity import LRSensitivity
    from normtrain.study.plan import Plan
    from normtrain.study.verdicts import decide

    exp = LRSensitivity()
    findings = exp.analyse(sensitivity_rows(slope, 1000) + sensitivity_rows(half_slope, 500),
                           Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    full, half = (findings.measured["pre_minus_pre_qk_sensitivity" + k] for k in ("", "@half"))
    assert set(full) == set(half) == {"L=2", "L=8", "L=24"}
    assert half["L=2"] == pytest.approx({str(6 + k): (0.3 - half_slope - 0.01 * (k - 1)) * 12 / 7 for k in range(3)})
    assert all(v == {best_lr.ALL_SEEDS: 1.0} for v in findings.measured["best_lr_inside_grid"].values())
    assert decide(exp.registration, findings.measured, findings.unit).verdict == verdict
