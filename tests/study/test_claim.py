"""Protocol v5 for a registered reproduction (normtrain/study/claim.py through verdicts.decide): a planted effect
is reproduced, a null is never refuted unless its interval excludes the smallest effect of interest, an A/A
claim is called reproduced at no more than the stated rate, and a near-tied lr or half the budget that decides
otherwise makes the verdict inconclusive."""

import random

import pytest

from normtrain.study import claim
from normtrain.study.claim import ALT, HALF
from normtrain.study.preregistration import Registration, Rule
from normtrain.study.verdicts import decide

FIELDS = dict(claim="Post-LN ends worse", detail="d", paper_number="n", metric="m", norm="LayerNorm", version=5)
GAP = Rule("gap", "Post-LN − Pre-LN > 0", "gap", ">", 0.0, "interval", "0.02 nats: the smallest gap a user acts on",
           source="paper", sesoi=0.02)


def reg(**extra) -> Registration:
    return Registration(**FIELDS, primary=GAP, **extra)


def seeds(values) -> dict[str, dict[str, float]]:
    return {"": {str(i): v for i, v in enumerate(values)}}


def verdict(measured, **extra):
    return decide(reg(**extra), measured, lambda q: "seeds", seeds=[0, 1, 2, 3, 4])


PLANTED = [0.11, 0.09, 0.10, 0.12, 0.08]
PLANTED_HALF = [0.07, 0.06, 0.08, 0.07, 0.06]


def test_a_planted_gap_that_holds_at_half_the_budget_is_reproduced():
    judged = verdict({"gap": seeds(PLANTED), "gap" + HALF: seeds(PLANTED_HALF)})
    assert judged.protocol == 5 and judged.verdict == "reproduced", judged.why
    assert "90% t interval" in judged.why and judged.v5["budget"][""]["ok"] is True
    assert judged.role("primary")[0].ok is True


def test_a_null_is_refuted_only_when_its_interval_excludes_the_smallest_effect_of_interest():
    tight = [0.001, -0.002, 0.000, 0.002, -0.001]
    judged = verdict({"gap": seeds(tight), "gap" + HALF: seeds(tight)})
    assert judged.verdict == "not reproduced" and "excludes the smallest effect of interest" in judged.why
    noisy = [0.05, -0.06, 0.01, 0.04, -0.05]  # mean 0 but an interval reaching past 0.02: absence of evidence
    judged = verdict({"gap": seeds(noisy), "gap" + HALF: seeds(noisy)})
    assert judged.verdict == claim.UNDERPOWERED and "more seeds would tell" in judged.why


def test_a_claim_that_no_effect_backs_is_called_reproduced_at_no_more_than_its_stated_rate():
    rng = random.Random(0)
    trials, hits, refuted = 2000, 0, 0
    for _ in range(trials):
        null = [rng.gauss(0.0, 0.03) for _ in range(5)]
        found = claim.interval_call(">", 0.0, 0.02, null)
        hits += found.call == claim.HOLDS
        refuted += found.call == claim.REFUTED
    assert hits / trials <= 0.05 + 3 * (0.05 * 0.95 / trials) ** 0.5  # the one-sided level α = 0.05
    assert hits / trials > 0.01  # not vacuous: it does fire
    at_the_smallest_effect = [claim.interval_call(">", 0.0, 0.02, [rng.gauss(0.02, 0.03) for _ in range(5)]).call
                              for _ in range(trials)]  # an effect just large enough to matter is rarely refuted
    assert at_the_smallest_effect.count(claim.REFUTED) / trials <= 0.05 + 3 * (0.05 * 0.95 / trials) ** 0.5
    assert refuted / trials > 0.2  # while a true null is refuted often (n=5, sd 0.03 against a 0.02 effect)


def test_a_gap_that_closes_by_the_next_doubling_is_budget_sensitive_with_its_crossing():
    judged = verdict({"gap": seeds(PLANTED), "gap" + HALF: seeds([0.25, 0.23, 0.24, 0.26, 0.22])})
    assert judged.verdict == claim.BUDGET_SENSITIVE
    assert "crosses" in judged.why and "doublings past T" in judged.why
    at = judged.v5["budget"][""]
    assert at["extrapolated"] == pytest.approx(2 * 0.10 - 0.24) and at["crossing_doublings"] == pytest.approx(
        0.10 / 0.14)


def test_a_call_that_changes_between_budgets_is_budget_sensitive():
    judged = verdict({"gap": seeds(PLANTED), "gap" + HALF: seeds([0.001, -0.002, 0.0, 0.002, -0.001])})
    assert judged.verdict == claim.BUDGET_SENSITIVE and "refuted at T/2" in judged.why


def test_a_near_tied_lr_that_flips_the_call_is_selection_sensitive():
    measured = {"gap": seeds(PLANTED), "gap" + HALF: seeds(PLANTED_HALF),
                "gap" + ALT + "Post-LN at its runner-up lr 3e-3": seeds([0.0, -0.01, 0.01, 0.0, -0.005])}
    judged = verdict(measured)
    assert judged.verdict == claim.SELECTION_SENSITIVE and "runner-up lr 3e-3" in judged.why
    measured["gap" + ALT + "Post-LN at its runner-up lr 3e-3"] = seeds([0.08, 0.07, 0.09, 0.1, 0.06])
    assert verdict(measured).verdict == "reproduced"


def test_a_v5_primary_without_half_budget_values_is_inconclusive_unless_the_registration_says_why_none_apply():
    assert verdict({"gap": seeds(PLANTED)}).verdict == claim.BUDGET_UNMEASURED
    judged = verdict({"gap": seeds(PLANTED)}, no_budget="measured at initialization: no training")
    assert judged.verdict == "reproduced" and judged.v5["budget"] == {
        "not_applicable": "measured at initialization: no training"}
    empty = verdict({"gap": {"4x": seeds(PLANTED)[""]}, "gap" + HALF: {"4x": {}}})  # the runs T/2 asks for not made
    assert empty.verdict == claim.BUDGET_UNMEASURED and "no half-budget values at 4x" in empty.why


def test_a_diverged_seed_counts_as_infinitely_worse_by_the_sign_test():
    inf = float("inf")
    judged = verdict({"gap": seeds([inf, 0.1, 0.2, inf, 0.15]), "gap" + HALF: seeds([inf, 0.1, 0.1, inf, 0.1])})
    assert judged.verdict == "reproduced" and judged.v5["conditions"][""]["method"].startswith("sign test")


def test_every_condition_must_hold_and_one_refuted_condition_refutes():
    both = {"12 layers": dict(enumerate(PLANTED)), "48 layers": {i: v / 10 - 0.01 for i, v in enumerate(PLANTED)}}
    measured = {"gap": both, "gap" + HALF: both}
    assert verdict(measured).verdict == "not reproduced"


def test_a_v5_registration_decides_its_primary_by_the_interval_and_names_its_smallest_effect():
    with pytest.raises(ValueError, match="decide='interval'"):
        Registration(**FIELDS, primary=Rule("gap", "e", "gap", ">", 0.0, "t_test", source="paper"))
    with pytest.raises(ValueError, match="smallest effect of interest"):
        Rule("gap", "e", "gap", ">", 0.0, "interval", source="paper")
    band = Rule("flat", "e", "gap", "between", (-0.02, 0.02), "interval", "the paired sd", source="ours")
    judged = decide(Registration(**FIELDS, primary=band), {"gap": seeds([0.001, -0.002, 0.0, 0.002, -0.001]),
                                                          "gap" + HALF: seeds([0.0, 0.001, -0.001, 0.0, 0.002])},
                    lambda q: "seeds")
    assert judged.verdict == "reproduced"


def test_a_seed_share_rule_says_its_chance_of_passing_by_luck_under_v5():
    pre = Rule("learns", "Pre-LN learns", "margin", ">", 0.3, 1.0, source="ours")
    judged = decide(reg(preconditions=(pre,)), {"margin": {"": {"0": 1.0, "1": 1.1, "2": 0.9}},
                                                "gap": seeds(PLANTED), "gap" + HALF: seeds(PLANTED_HALF)},
                    lambda q: "seeds")
    assert "3/3 seeds pass (by luck alone: 12.5%)" in judged.role("precondition")[0].measured()
    assert claim.chance_all_pass(5, 1.0) == pytest.approx(1 / 32) and claim.chance_all_pass(5, 0.8) == 6 / 32


def test_the_index_words_a_verdict_by_the_claims_source():
    from normtrain.reproduce.index import verdict_cell

    ours = {"verdict": "not reproduced", "protocol": 5, "primary": {"source": "ours"}}
    assert verdict_cell(ours) == "**not supported (our hypothesis)**"
    assert verdict_cell({**ours, "primary": {"source": "secondary"}, "verdict": "reproduced"}) == (
        "**reproduced (a secondary source's claim)**")
    assert verdict_cell({**ours, "primary": {"source": "paper"}}) == "**not reproduced**"
    assert verdict_cell({**ours, "protocol": 4}) == "**not reproduced**"  # v4 records are worded as they were
