"""admin_output_change's analysis on synthetic measurements: the fit window leaves saturated depths out, and the
v4 registration decides on what is left."""

from __future__ import annotations

import math

import pytest

from normtrain.reproduce.admin_output_change import (
    FIT_SIGMA,
    LINEAR_MAX,
    SIGMAS,
    OutputChange,
    key,
    linear_window,
    windowed_fits,
)
from normtrain.study.plan import Plan
from normtrain.study.verdicts import decide

DEPTHS = (6, 12, 24, 48, 96, 192)
SIZE = 64.0  # E‖F‖² per token of a LayerNorm output, d 64


def saturating(linear: float) -> float:
    """A change that grows with the first-order term ``linear`` and saturates at 2‖F‖² (two unrelated outputs)."""
    return 2 * SIZE * (1 - math.exp(-linear / (2 * SIZE)))


def rows(post_gain: float = 2e4, seeds: int = 6) -> list[dict]:
    """Post-LN's first-order change σ²·gain·N (O(N)), Pre-LN's σ²·gain/10·ln N, DeepNorm's constant; every change
    saturates, so Post-LN's deep ones do at σ = 1e-3 (and at both σ when ``post_gain`` is large)."""
    growth = {"post": lambda n: post_gain * n, "pre": lambda n: 1e5 * math.log(n), "deepnorm": lambda n: 1e3}
    out = []
    for seed in range(seeds):
        noise = 1 + 0.02 * seed
        for placement, law in growth.items():
            for depth in DEPTHS:
                out.append({"placement": placement, "norm": "layernorm", "model.n_layers": str(depth),
                            "train.seed": str(30 + seed), "clean_sq": SIZE,
                            **{key(s): saturating(noise * s * s * law(depth)) for s in SIGMAS}})
    return out


def judged(measurements: list[dict], tmp_path):
    plan = Plan("admin_output_change", "cpu", False, [], {}, tmp_path, tmp_path)
    exp = OutputChange()
    findings = exp.analyse(measurements, plan)
    return findings, decide(exp.registration, findings.measured, findings.unit, seeds=list(range(30, 36)))


def test_the_window_stops_at_the_first_saturated_depth():
    cap = LINEAR_MAX * SIZE
    assert linear_window([0.1, 0.5, cap * 1.1, 0.2], [SIZE] * 4) == 2  # a later small value does not re-enter
    assert linear_window([0.1, 0.2], [SIZE] * 2) == 2 and linear_window([cap * 2], [SIZE]) == 0
    fit = windowed_fits(list(DEPTHS), [0.01 * d for d in DEPTHS], [SIZE] * 6, keep=3)
    assert fit["depths"] == 3 and fit["slope"] == pytest.approx(1.0)


def test_saturated_depths_leave_the_fit_and_the_linear_regime_holds(tmp_path):
    findings, decision = judged(rows(), tmp_path)
    m = findings.measured
    assert all(v == 6 for v in m["fit_depths"]["post"].values())  # σ = 1e-4: nothing saturates
    assert all(v == pytest.approx(1.0, abs=0.02) for v in m["post_slope"][""].values())  # O(N)
    # at σ = 1e-3 Post-LN's deep changes pass the window's edge: over every depth the slope would fall well below 1
    big = [saturating(4.0 * d) for d in DEPTHS]
    assert linear_window(big, [SIZE] * 6) < 6 and windowed_fits(list(DEPTHS), big, [SIZE] * 6, keep=6)["slope"] < 0.8
    assert all(abs(v) < 0.05 for v in m["slope_change_with_sigma"]["post"].values())  # the window keeps it linear
    assert decision.verdict == "reproduced" and all(c.ok for c in decision.role("precondition"))
    assert {c.rule.id: c.ok for c in decision.role("secondary")} == {
        "post_linear": True, "post_fits_linear": True, "pre_fits_log": True, "deepnorm_bounded": True}


def test_a_fit_cut_to_the_shallow_end_makes_the_verdict_inconclusive(tmp_path):
    _, decision = judged(rows(post_gain=1e9), tmp_path)  # Post-LN saturates from 12 layers on even at σ = 1e-4
    failed = [c.rule.id for c in decision.role("precondition") if c.ok is not True]
    assert "fit_spans_depth" in failed and decision.verdict == "inconclusive (precondition)"
    assert FIT_SIGMA == min(SIGMAS)  # the fits read the smaller σ; the larger one tests them
