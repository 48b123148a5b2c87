"""Protocol v5's decision on synthetic loss tables: a planted difference is found, an A/A comparison is called
better or worse no more often than the stated error rate, and each inconclusive reason appears where it must."""

from __future__ import annotations

import math
import random

import pytest

from normtrain.study.best_against_best import analyse
from normtrain.study.decision import (
    AT_EDGE,
    BETTER,
    BUDGET_SENSITIVE,
    DIVERGED,
    EQUIVALENT,
    SELECTION_SENSITIVE,
    UNDERPOWERED,
    UNDERTRAINED,
    WORSE,
    Protocol,
    classify,
    paired,
)

P = Protocol()
LRS = (1e-3, 2e-3, 4e-3)
UNIGRAM = 3.3


def table(effect: float = 0.0, noise: float = 0.01, seeds: int = 5, lrs=LRS, best=(2e-3, 2e-3), half_effect=None,
          curvature: float = 0.05, rng: random.Random | None = None, base: float = 2.0, select_noise: float = 0.002,
          arm_lrs=None) -> list[dict]:
    """Rows of two arms 'a' (baseline) and 'b' = a + ``effect`` (at T; ``half_effect`` at T/2), quadratic in
    log2(lr) around each arm's ``best``, a per-seed shift both arms share, and independent noise per run."""
    rng = rng or random.Random(0)
    shared = {s: rng.gauss(0, 0.02) for s in range(seeds)}
    rows = []
    for steps, eff, offset in ((100, effect, 0.0), (50, effect if half_effect is None else half_effect, 0.3)):
        for arm, shift, centre in (("a", 0.0, best[0]), ("b", eff, best[1])):
            for lr in (arm_lrs or {}).get(arm, lrs):
                for s in range(seeds):
                    loss = (base + offset + shift + curvature * math.log2(lr / centre) ** 2 + shared[s]
                            + rng.gauss(0, noise))
                    rows.append({"arm": arm, "optim.lr": str(lr), "train.seed": str(s), "steps": steps,
                                 "final_val_loss": loss, "select_loss": loss + rng.gauss(0, select_noise),
                                 "status": "completed", "unigram_val_loss": UNIGRAM})
    return rows


def decide(rows, protocol=P, extensions_left=False):
    return analyse(rows, "arm", ["a", "b"], "a", "optim.lr", 100, 50, protocol, extensions_left).decisions["b"]


def test_classify_reads_equivalence_first_then_direction():
    assert classify(-0.01, 0.01, P) == EQUIVALENT
    assert classify(-0.015, -0.001, P) == EQUIVALENT  # significant, but smaller than the margin
    assert classify(-0.08, -0.01, P) == BETTER
    assert classify(0.01, 0.08, P) == WORSE
    assert classify(-0.05, 0.05, P) == UNDERPOWERED
    assert classify(-0.005, 0.03, P) == UNDERPOWERED  # holds 0 and reaches past +δ: "no worse" is not shown


def test_the_interval_is_the_one_sided_t_interval_at_alpha():
    # n = 5, mean 0.03, sd 0.01: t(0.95, 4) = 2.1318; half width 2.1318 · 0.01 / √5 = 0.009534
    p = paired({str(i): 0.03 + d for i, d in enumerate((-0.01, -0.005, 0, 0.005, 0.01))},
               {str(i): 0.0 for i in range(5)}, P, 1e-3, 1e-3)
    sd = math.sqrt((0.01 ** 2 * 2 + 0.005 ** 2 * 2) / 4)
    assert p.mean == pytest.approx(0.03)
    assert p.high - p.mean == pytest.approx(2.131847 * sd / math.sqrt(5), rel=1e-4)
    assert p.decision == WORSE


def test_one_seed_or_a_diverged_pair_has_no_interval():
    assert paired({"0": 2.0}, {"0": 1.0}, P, 1, 1).decision == UNDERPOWERED
    assert paired({"0": math.inf, "1": 2.0}, {"0": 1.0, "1": 1.0}, P, 1, 1).decision == DIVERGED


def test_null_paired_differences_are_called_better_or_worse_at_the_stated_rate():
    """2000 null draws of 5 paired differences (sd large against the margin, so equivalence rarely applies):
    better and worse are each a 5% one-sided test, 10% in all."""
    rng = random.Random(1)
    calls = [paired({str(i): rng.gauss(0, 0.2) for i in range(5)}, {str(i): 0.0 for i in range(5)}, P, 1, 1).decision
             for _ in range(2000)]
    directional = sum(c in (BETTER, WORSE) for c in calls) / len(calls)
    assert 0.07 <= directional <= 0.13  # 0.10 ± 3 standard errors (0.0067): calibrated, not just conservative
    assert abs(calls.count(BETTER) - calls.count(WORSE)) < 0.04 * len(calls)


def test_a_planted_difference_is_found_in_either_direction():
    assert decide(table(effect=0.08)).decision == WORSE
    assert decide(table(effect=-0.08)).decision == BETTER


def test_a_tiny_true_difference_is_equivalent_within_the_margin():
    d = decide(table(effect=0.003, noise=0.003))
    assert d.decision == EQUIVALENT, d.why


@pytest.mark.parametrize("noise", [0.01, 0.05])
def test_an_a_a_ablation_is_never_better_or_worse_beyond_the_error_rate(noise):
    """Two arms computing the same function, 300 ablations of 5 seeds each: every rule of the engine (selection,
    budget) may only make it more cautious, so better + worse stay at or below 2α = 10%."""
    rng = random.Random(7)
    calls = [decide(table(effect=0.0, noise=noise, rng=rng)).decision for _ in range(300)]
    wrong = sum(c in (BETTER, WORSE) for c in calls) / len(calls)
    assert wrong <= 0.10 + 3 * math.sqrt(0.1 * 0.9 / 300), calls


def test_an_identical_arm_is_equivalent():
    rows = table(effect=0.0, noise=0.0, select_noise=0.0)
    assert decide(rows).decision == EQUIVALENT


def test_a_best_at_an_edge_is_inconclusive_and_named():
    rows = table(effect=0.08, best=(2e-3, 8e-3))  # b keeps improving past the grid's top
    d = decide(rows)
    assert d.decision == AT_EDGE and "b" in d.why and "after the last extension" in d.why
    assert "will be extended" in decide(rows, extensions_left=True).why


def test_a_near_tie_that_flips_the_sign_is_selection_sensitive():
    """b's two best lrs tie in selection loss, but the judged loss is better at one and worse at the other."""
    rows = table(effect=0.0, noise=0.002, curvature=0.0, select_noise=0.0, lrs=(1e-3, 2e-3, 4e-3, 8e-3))
    near = {"0.002": (0.003, -0.002, 0.001, -0.004, 0.002), "0.004": (-0.001, 0.004, -0.003, 0.002, -0.002)}
    for r in rows:
        if r["arm"] == "b":
            tie = near.get(r["optim.lr"])
            r["select_loss"] = 2.0 + (tie[int(r["train.seed"])] if tie else 0.5)  # 0.004 best by 0.002 < spread
            r["final_val_loss"] += {"0.002": -0.06, "0.004": 0.06}.get(r["optim.lr"], 0.0)
    d = decide(rows)
    assert d.decision == SELECTION_SENSITIVE, d.why
    assert {tuple(p[:2]) for p in d.checks["selection"]["pairings"]} >= {(0.002, 0.002), (0.004, 0.002)}


def test_a_difference_that_crosses_between_half_and_full_budget_is_budget_sensitive():
    d = decide(table(effect=0.04, half_effect=-0.04, noise=0.003))  # worse at T, better at T/2
    assert d.decision == BUDGET_SENSITIVE
    assert d.budget.decision_half == BETTER and d.budget.ok is False


def test_a_gap_closing_fast_enough_to_cross_at_the_next_doubling_is_budget_sensitive_with_its_crossing():
    d = decide(table(effect=0.03, half_effect=0.09, noise=0.002))  # worse at both; the line hits 0 before 2T
    assert d.decision == BUDGET_SENSITIVE
    assert d.budget.extrapolated == pytest.approx(-0.03, abs=0.01)
    assert 100 < d.budget.crossing_steps < 200  # D falls 0.06 per doubling from 0.03: 0 at 100 · 2^0.5 ≈ 141
    assert "141" in d.why or "14" in d.why


def test_a_growing_gap_is_stable():
    d = decide(table(effect=0.09, half_effect=0.05, noise=0.003))
    assert d.decision == WORSE and d.budget.ok


def test_a_baseline_that_did_not_learn_past_the_unigram_line_is_undertrained():
    rows = table(effect=0.08, base=UNIGRAM - 0.02)
    assert decide(rows).decision == UNDERTRAINED


def test_the_protocol_refuses_a_margin_or_level_that_makes_no_sense():
    with pytest.raises(ValueError, match="margin"):
        Protocol(margin=0)
    with pytest.raises(ValueError, match="alpha"):
        Protocol(alpha=0.7)


def test_a_v5_registration_names_the_source_of_every_check():
    from normtrain.study.preregistration import Registration, Rule

    primary = Rule("gap", "a is better", "gap", ">", 0.0, "t_test")
    fields = dict(claim="c", detail="d", paper_number="n", metric="m", norm="LayerNorm")
    Registration(**fields, primary=primary)  # v4: "paper" by default, as the committed records say
    assert primary.source == "paper"
    with pytest.raises(ValueError, match="do not name their source"):
        Registration(**fields, primary=primary, version=5)
    named = Rule("gap", "a is better", "gap", ">", 0.0, "interval", "nats", source="ours", sesoi=0.02)
    assert Registration(**fields, primary=named, version=5).primary.source == "ours"
