"""deepnet_update: the reported gradient numbers (read from a run's log, the split of SGD's step-1 update) and
registration v5's quantities (the early update read from a log, the saturation precondition, Post-LN / DeepNorm)."""

from __future__ import annotations

import json
import math
import re

import pytest

from normtrain.compare.runs import load_run
from normtrain.reproduce.deepnet_update import (
    SMALL,
    early_values,
    gradient_table,
    growth,
    initial_gradient,
    per_seed_depth_slope,
    per_unit_step,
    post_over_deepnorm,
    ratio_table,
)


def test_initial_gradient_is_read_at_step_zero(tmp_path):
    rows = [{"step": 0, "grad_norm/total": 2.0, "grad_norm/layer_0": 1.0, "grad_norm/layer_1": 5.0,
             "grad_norm/layer_2": 3.0},
            {"step": 1, "grad_norm/total": 9.0, "grad_norm/layer_0": 9.0}]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert initial_gradient(load_run(tmp_path / "run")) == {"g0": 2.0, "g0_block": 3.0}

    (tmp_path / "v3").mkdir()  # v3's runs logged no gradients; a log that starts later has no step 0 either
    (tmp_path / "v3" / "metrics.jsonl").write_text(json.dumps({"step": 2, "grad_norm/total": 1.0}) + "\n")
    assert initial_gradient(load_run(tmp_path / "v3")) == {"g0": None, "g0_block": None}


def test_per_unit_step_is_sgd_only():
    sgd = {"arm": "SGD", "optim.lr": "0.001", "step1": 0.01, "g0": 2.0}
    assert per_unit_step(sgd) == pytest.approx(5.0)  # 0.01 / (1e-3 · 2)
    assert per_unit_step({**sgd, "arm": "Adam"}) is None  # Adam's first step is not η·g₀
    assert per_unit_step({**sgd, "g0": None}) is None


def test_the_step1_slope_splits_into_the_gradient_and_the_response():
    """slope(step-1 update) = slope(‖g₀‖) + slope(update per unit of step), seed by seed: the table's identity."""
    depths = [6, 24, 96]
    rows = [{"placement": "deepnorm", "arm": "SGD", "model.n_layers": str(d), "train.seed": str(s),
             "optim.lr": "0.001", "g0": 1.5 * d ** 0.3 * (1 + s / 10), "g0_block": 0.4,
             "step1": 1e-4 * d ** 0.9 * (1 + s / 7)} for d in depths for s in range(3)]

    whole, grad, response = (per_seed_depth_slope(rows, depths, "deepnorm", "SGD", v)
                             for v in ("step1", "g0", per_unit_step))
    for seed in whole:
        assert math.isclose(whole[seed], grad[seed] + response[seed], rel_tol=1e-9)
    assert grad["0"] == pytest.approx(0.3) and response["0"] == pytest.approx(0.6)
    table = gradient_table(rows, ["deepnorm"], depths)
    assert table.count("| deepnorm |") == 4 and re.search(r"\| 0\.600 ± \S+ \(n=3\) \|$", table.splitlines()[-1])


def test_early_values_average_the_first_three_updates(tmp_path):
    rows = [{"step": s, "update/stream_change": v} for s, v in ((0, 0.0), (1, 0.1), (2, float("nan")), (3, 0.3),
                                                                (4, 9.0))]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    at, early = early_values(load_run(tmp_path / "run"), "update/stream_change")
    assert early == pytest.approx(0.2) and at[1] == 0.1 and at[4] == 9.0  # step 2's NaN does not count
    assert early_values(load_run(tmp_path / "run"), "update/output_kl") == ({}, None)  # not logged


def test_growth_tells_a_linear_update_from_a_saturated_one():
    assert growth({"step1": 0.01, "step3": 0.03}) == pytest.approx(3.0)  # lr-sized steps, unsaturated
    assert growth({"step1": 1.0, "step3": 1.1}) == pytest.approx(1.1)  # F has turned already: saturated
    assert growth({"step1": None, "step3": 0.3}) is None and growth({"step1": 0.0, "step3": 0.3}) is None
    assert growth({"step1": 0.1}) is None  # a smoke run logs every other step


def test_post_over_deepnorm_pairs_seeds_per_depth():
    rows = [{"placement": p, "arm": SMALL, "model.n_layers": str(d), "train.seed": str(s),
             "early": (10.0 if p == "post" else 2.0) * (1 + s) * d, "early_sqrt_kl": None}
            for p in ("post", "deepnorm") for d in (6, 24) for s in range(3)]
    rows.append({"placement": "post", "arm": SMALL, "model.n_layers": "24", "train.seed": "9", "early": 1.0,
                 "early_sqrt_kl": None})  # no DeepNorm partner: no ratio
    found = post_over_deepnorm(rows, [6, 24], SMALL)
    assert set(found) == {"L=6", "L=24"} and found["L=6"] == pytest.approx({"0": 5.0, "1": 5.0, "2": 5.0})
    assert found["L=24"]["9"] is None
    table = ratio_table(rows, [6, 24], [SMALL])
    assert "| ‖ΔF‖/‖F‖ | Adam 2e-6 | 5.000 ± 0 (n=3) |" in table.replace("0.000", "0")


def test_registration_v6_screens_saturated_seeds_one_by_one_and_reads_the_log_ratio():
    """Seed 2's Post-LN update has stopped growing at 24 layers (step 3 / step 1 = 1.1: saturated): it leaves the
    primary there, and the count of unsaturated seeds says so; at 6 layers every seed is linear (3×)."""
    from normtrain.reproduce.deepnet_update import screened_log_ratio, unsaturated_seeds

    def row(p, d, s):
        saturated = p == "post" and d == 24 and s == 2
        return {"placement": p, "arm": SMALL, "model.n_layers": str(d), "train.seed": str(s),
                "early": (10.0 if p == "post" else 2.0), "step1": 1.0, "step3": 1.1 if saturated else 3.0}

    rows = [row(p, d, s) for p in ("post", "deepnorm") for d in (6, 24) for s in range(3)]
    found = screened_log_ratio(rows, [6, 24], SMALL)
    assert found["L=6"] == pytest.approx({"0": math.log(5.0), "1": math.log(5.0), "2": math.log(5.0)})
    assert found["L=24"]["2"] is None and found["L=24"]["0"] == pytest.approx(math.log(5.0))
    assert unsaturated_seeds(rows, [6, 24], SMALL) == {"L=6": {"all seeds": 3.0}, "L=24": {"all seeds": 2.0}}


def update_rows(ratio: float, saturated: tuple[int, ...]) -> list[dict]:
    """Adam 2e-6 runs at v6's depths and seeds (10–14): Post-LN's early update ``ratio`` × DeepNorm's (× 1 + 0.05
    per seed: a spread for the interval), growing 3× from step 1 to step 3, except the ``saturated`` seeds at 192
    layers, whose Post-LN update has stopped growing (1.1×) and is no larger than DeepNorm's."""
    rows = []
    for p in ("post", "deepnorm"):
        for d in (6, 24, 96, 192):
            for s in range(10, 15):
                flat = p == "post" and d == 192 and s in saturated
                early = 1e-3 * (1.0 if p == "deepnorm" or flat else ratio * (1 + 0.05 * (s - 10)))
                rows.append({"placement": p, "optim": "adamw", "optim.lr": "2e-06", "model.n_layers": str(d),
                             "train.seed": str(s), "status": "completed", "final_val_loss": 4.0, "early": early,
                             "step1": early / (1.0 if flat else 2.0), "step3": early * (1.1 if flat else 1.5),
                             "early_sqrt_kl": None, "g0": None, "change_curve": "", "logit_curve": ""})
    return rows


@pytest.mark.parametrize(("ratio", "saturated", "verdict"), [
    (10.0, (), "reproduced"),
    (10.0, (12,), "reproduced"),
    (2.0, (), "not reproduced"),
    (10.0, (11, 12, 13), "inconclusive (precondition)"),
])
def test_registration_v6_reads_the_screened_log_ratio_at_every_depth(ratio, saturated, verdict, tmp_path):
    """ln(Post-LN / DeepNorm) of about ln 10 at every depth clears ln 3, with no budget to read at T/2 (``no_budget``);
    a saturated seed with a ratio of 1 is screened out (kept, its ln 1 would leave the interval open); a ratio of 2
    is refuted (the interval lies below ln 3); three saturated seeds at 192 layers leave 2 < 3: the precondition."""
    from normtrain.reproduce.deepnet_update import ModelUpdate
    from normtrain.study.plan import Plan
    from normtrain.study.verdicts import decide

    exp = ModelUpdate()
    findings = exp.analyse(update_rows(ratio, saturated), Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    screened = findings.measured["log_post_over_deepnorm_adam_small"]["L=192"]
    assert [s for s, v in screened.items() if v is None] == [str(s) for s in saturated]
    assert findings.measured["unsaturated_seeds_adam_small"]["L=192"] == {"all seeds": 5.0 - len(saturated)}
    judged = decide(exp.registration, findings.measured, findings.unit)
    assert judged.verdict == verdict


def test_the_precondition_counts_the_seeds_the_primary_reads_not_only_those_post_ln_passes(tmp_path):
    """Three Post-LN seeds pass the screen at 192 layers, but one's DeepNorm partner logged no finite update: the
    primary reads two, and the precondition (3 seeds) must say so rather than pass on the three."""
    from normtrain.reproduce.deepnet_update import ModelUpdate
    from normtrain.study.plan import Plan
    from normtrain.study.verdicts import decide

    rows = update_rows(10.0, (11, 12))
    for r in rows:
        if (r["placement"], r["model.n_layers"], r["train.seed"]) == ("deepnorm", "192", "13"):
            r["early"] = None
    exp = ModelUpdate()
    findings = exp.analyse(rows, Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    assert findings.measured["unsaturated_seeds_adam_small"]["L=192"] == {"all seeds": 2.0}
    assert decide(exp.registration, findings.measured, findings.unit).verdict == "inconclusive (precondition)"
