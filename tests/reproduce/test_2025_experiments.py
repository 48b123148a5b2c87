"""The 2025 papers' experiments (peri_variance, curse_of_depth, dyt): their grids, and verdicts that follow the
numbers on synthetic rows with known answers. The end-to-end smoke runs are test_reproduce.py's parametrized test."""

from __future__ import annotations

import math

import pytest

from normtrain.reproduce.cli import make_plan
from normtrain.reproduce.curse_of_depth import CurseOfDepth, probe_row
from normtrain.reproduce.dyt import DyT, Grid
from normtrain.reproduce.gpu_scale import ASSUMED_H100
from normtrain.reproduce.peri_variance import PeriVariance
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.probing import halves
from normtrain.reproduce.stats import variance_exponent
from normtrain.reproduce.verdicts import judge, verdict

UNIGRAM = 3.3


def judged(exp, rows, tmp_path) -> tuple[list, object]:
    findings = exp.analyse(rows, Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    reg = exp.registration
    checks = [judge(rule, findings.measured.get(rule.quantity)) for rule in reg.rules]
    return checks, judge(reg.guard.rule(), findings.measured.get(reg.guard.quantity))


def trained(loss: float, **values) -> dict:
    return {"status": "completed", "final_val_loss": loss, "unigram_val_loss": UNIGRAM, "collapsed": False,
            "undertrained": False, "val_curve": f"0:5.5 1000:{loss}", **values}


def test_the_grids_run_the_papers_arms(tmp_path):
    peri = make_plan("peri_variance")
    assert len(peri.combos()) == 30 and {c["placement"] for c in peri.combos()} == {"pre", "peri", "post"}
    assert {c["placement"] for c in make_plan("peri_variance", smoke=True).combos()} == {"pre", "peri"}
    arms = {(c["placement"], c["norm.depth_scaled"].lower()) for c in make_plan("curse_of_depth").combos()}
    assert arms == {("pre", "false"), ("pre", "true"), ("peri", "false")}  # LNS with Pre-LN only, as the paper
    assert len(make_plan("curse_of_depth", smoke=True).combos()) == 3
    dyt = make_plan("dyt").combos()
    assert len(dyt) == 2 * 5 * (5 + 2)  # widths × seeds × (DyT's α grid + LayerNorm + RMSNorm once)
    assert {c["norm.alpha_init"] for c in dyt if c["norm"] != "dyt"} == {"0.5"}
    smoke = make_plan("dyt", smoke=True).combos()
    assert {c["norm"] for c in smoke} == {"dyt", "layernorm"} and {c["model.d_model"] for c in smoke} == {"64", "128"}
    depth = make_plan("curse_of_depth")
    cfg = depth.compose(next(c for c in depth.combos() if c["norm.depth_scaled"].lower() == "true"))
    assert (cfg.norm.name, cfg.norm.depth_scaled, cfg.model.n_layers, cfg.monitor.block_cos) == ("rmsnorm", True, 24,
                                                                                                 True)
    gpu = make_plan("dyt", scale="gpu", device=ASSUMED_H100, out=tmp_path).grid  # the widths the design compares, × 2
    assert gpu["model.d_model"] == ["128", "256"] and gpu["norm.alpha_init"] == make_plan("dyt").grid["norm.alpha_init"]


def test_variance_exponent_and_halves():
    assert variance_exponent([math.sqrt(ell) for ell in range(1, 25)]) == pytest.approx(1.0)  # Var ∝ ℓ
    assert variance_exponent([ell for ell in range(1, 7)]) == pytest.approx(2.0)  # Var ∝ ℓ²
    assert halves([1.0, 2.0, 3.0]) == (1.0, 2.5) and halves([1.0]) == (None, None)


def peri_rows(peri_loss: float = 1.95, reference_loss: float = 2.0) -> list[dict]:
    """Pre-LN's variance grows faster (k 1.8 vs 1.0) and peaks 10× higher; Post-LN's first block gets a tenth of
    Pre-LN's share of the gradient."""
    k = {"pre": 1.8, "peri": 1.0, "post": 0.3}
    peak = {"pre": 200.0, "peri": 20.0, "post": 5.0}
    ratio = {"pre": 1.0, "peri": 1.0, "post": 0.1}
    loss = {"pre": reference_loss, "peri": peri_loss, "post": 2.5}
    return [{"placement": p, "model.n_layers": str(d), "train.seed": str(s),
             **trained(loss[p] + 0.002 * s, growth_exponent=k[p] + 0.01 * s, final_absmax=peak[p],
                       absmax_growth=3.0, grad_first_over_last=ratio[p], grad_spikes=0, loss_spikes=1,
                       rms_profile=" ".join("1" for _ in range(d)), absmax_curve=f"0:1 1000:{peak[p]}")}
            for s in range(5) for p in ("post", "pre", "peri") for d in (6, 24)]


def test_peri_variance_verdict_follows_the_numbers(tmp_path):
    exp = PeriVariance()
    checks, guard = judged(exp, peri_rows(), tmp_path)
    assert [c.ok for c in checks] == [True, True, True, True] and guard.ok and verdict(checks, guard) == "reproduced"
    assert checks[0].conditions["L=24"]["per_seed"]["0"] == pytest.approx(0.8)  # per seed, paired
    checks, guard = judged(exp, peri_rows(peri_loss=2.05), tmp_path)
    assert [c.ok for c in checks] == [True, True, False, True] and verdict(checks, guard) == "partly reproduced"
    checks, guard = judged(exp, peri_rows(reference_loss=UNIGRAM - 0.1), tmp_path)  # Pre-LN barely learned
    assert guard.ok is False and verdict(checks, guard) == "inconclusive (undertrained)"


def probe(skip: list[float], cos: list[float]) -> dict:
    return {"val_loss": 2.0, "layers": [{"skip_delta": s, "block_cos": c, "act_rms": 1.0 + i}
                                        for i, (s, c) in enumerate(zip(skip, cos, strict=True))]}


def depth_rows(lns_loss: float = 1.98) -> list[dict]:
    """Pre-LN's deep blocks are near the identity (cos 0.95, skip Δ 0.01); LNS makes them count (0.8, 0.05)."""
    early_skip, early_cos = [1.0] + [0.2] * 11, [0.5] * 12
    profiles = {("pre", "False"): probe(early_skip + [0.01] * 12, early_cos + [0.95] * 12),
                ("pre", "True"): probe(early_skip + [0.05] * 12, early_cos + [0.8] * 12),
                ("peri", "False"): probe(early_skip + [0.03] * 12, early_cos + [0.85] * 12)}
    loss = {("pre", "False"): 2.0, ("pre", "True"): lns_loss, ("peri", "False"): 1.99}
    return [{"placement": p, "norm.depth_scaled": ds, "model.n_layers": "24", "train.seed": str(s),
             **trained(loss[(p, ds)] + 0.001 * s), **probe_row(profiles[(p, ds)])}
            for s in range(5) for p, ds in profiles]


def test_curse_of_depth_reads_the_probe_by_halves_and_judges_per_seed(tmp_path):
    row = probe_row(probe([1.0] * 12 + [0.01] * 12, [0.5] * 12 + [0.95] * 12))
    assert (row["skip_early"], row["skip_deep"], row["cos_deep"]) == (1.0, pytest.approx(0.01), pytest.approx(0.95))
    assert probe_row(None)["skip_deep"] is None  # a run with nothing to probe is missing, not zero
    exp = CurseOfDepth()
    checks, guard = judged(exp, depth_rows(), tmp_path)
    assert [c.ok for c in checks] == [True, True, True, True] and verdict(checks, guard) == "reproduced"
    assert checks[0].conditions["L=24"]["median"] == pytest.approx(0.04)
    checks, guard = judged(exp, depth_rows(lns_loss=2.01), tmp_path)  # LNS uses its deep blocks, ends worse
    assert [c.ok for c in checks] == [True, True, True, False]


def dyt_rows(best: dict[int, float], dyt_gap: float = 0.005) -> list[dict]:
    """DyT's loss is lowest at ``best[width]`` (a V over log α), there ``dyt_gap`` above LayerNorm/RMSNorm's 2.0."""
    rows = []
    for s in range(5):
        for w in (64, 256):
            for n in ("layernorm", "rmsnorm"):
                rows.append({"norm": n, "norm.alpha_init": "0.5", "model.d_model": str(w), "train.seed": str(s),
                             **trained(2.0 + 0.001 * s)})
            for a in (0.05, 0.1, 0.2, 0.5, 1.0, 2.0):
                loss = 2.0 + dyt_gap + 0.001 * s + 0.05 * abs(math.log2(a / best[w]))
                rows.append({"norm": "dyt", "norm.alpha_init": str(a), "model.d_model": str(w), "train.seed": str(s),
                             **trained(loss)})
    return rows


def test_dyt_picks_the_best_alpha_per_width_and_compares_there(tmp_path):
    rows = dyt_rows({64: 0.5, 256: 0.1})
    grid = Grid(rows)
    assert (grid.best_alpha(64), grid.best_alpha(256)) == (0.5, 0.1)
    assert grid.trains(64, UNIGRAM) == [0.05, 0.1, 0.2, 0.5, 1.0, 2.0] and grid.trains(64, 2.0) == []
    exp = DyT()
    checks, guard = judged(exp, rows, tmp_path)
    assert [c.ok for c in checks] == [True, True, True] and guard.ok
    assert set(checks[0].conditions) == {"d=64, vs layernorm", "d=64, vs rmsnorm", "d=256, vs layernorm",
                                         "d=256, vs rmsnorm"}
    assert checks[1].conditions["d=64 → d=256"]["median"] == pytest.approx(math.log2(0.1 / 0.5))
    checks, _ = judged(exp, dyt_rows({64: 0.1, 256: 0.5}, dyt_gap=0.05), tmp_path)  # wider wants more α; DyT worse
    assert [c.ok for c in checks] == [False, False, True]
    assert checks[2].conditions["d=256"]["per_seed"]["0"] == pytest.approx(0.05 * math.log2(10))  # 0.5 to 0.05
    assert exp.keeps({"norm": "rmsnorm", "norm.alpha_init": "0.5"}) and not exp.keeps({"norm": "rmsnorm",
                                                                                        "norm.alpha_init": "0.1"})
