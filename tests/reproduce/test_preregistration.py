"""Pre-registered checks: rules applied to per-seed values, the verdicts (v4: the primary check decides; v3 kept for
the registrations before it), and the record of when they were committed."""

import math
import subprocess

import pytest

from normtrain.reproduce.catalog import EXPERIMENTS
from normtrain.study.preregistration import (
    Guard,
    Pilot,
    Registration,
    Rule,
    declaration,
    preregistered,
    registered_then_changed,
)
from normtrain.study.stats import median_ci
from normtrain.study.verdicts import ALL_SEEDS, judge, verdict


def test_median_rule_decides_on_the_median_not_the_best_seed():
    rule = Rule("r", "grows", "q", ">=", 0.3)
    result = judge(rule, {"lr 1e-3": {"0": 0.9, "1": 0.1, "2": 0.2}})  # one great seed, two poor ones
    assert result.ok is False
    cond = result.conditions["lr 1e-3"]
    assert (cond["median"], cond["passing"], cond["n"], cond["min"], cond["max"]) == (0.2, 1, 3, 0.1, 0.9)
    assert cond["per_seed"] == {"0": 0.9, "1": 0.1, "2": 0.2}
    assert result.measured() == ("median 0.200 (range of 3 seeds 0.100 to 0.900), 1/3 seeds pass, sign test p = 0.875 "
                                 "at lr 1e-3")


def test_repeats_of_a_timing_are_called_repeats_not_seeds():
    rule = Rule("faster", "trains faster", "ratio", "<", 1.0)
    result = judge(rule, {"": {"0": 0.9, "1": 1.1, "2": 0.95}}, unit="repeats")
    assert result.measured() == ("median 0.950 (range of 3 repeats 0.900 to 1.100), 2/3 repeats pass, "
                                 "sign test p = 0.500")
    assert result.as_dict()["unit"] == "repeats" and "the median over repeats" in result.as_dict()["rule"]
    assert "seed" not in result.measured() + result.as_dict()["rule"]


def test_a_rule_decided_by_a_t_test_shows_the_t_tests_p_not_only_the_sign_tests():
    rule = Rule("gap", "positive", "gap", ">", 0.0, decide="t_test")
    result = judge(rule, {"2x": {"0": 0.05, "1": 0.03, "2": 0.048, "3": 0.04, "4": 0.06}, "4x": {"0": 0.01}})
    text = result.measured()
    assert "5/5 seeds pass, t-test p = 0.000412 (decides), sign test p = 0.031 at 2x;" in text
    assert "no t-test (fewer than 2 values, or no spread) (decides)" in text.split(" at 2x")[1]
    assert result.conditions["2x"]["ok"] is True and result.conditions["4x"]["ok"] is None


def test_a_value_decided_over_all_seeds_at_once_reads_as_one_value_not_as_zero_of_one_seeds():
    rule = Rule("best_lr_inside_grid", "inside", "best_lr_inside_grid", ">=", 1.0, decide=1.0)
    result = judge(rule, {"layernorm": {ALL_SEEDS: 0.0}, "rmsnorm": {ALL_SEEDS: 1.0}})
    assert result.ok is False
    assert result.measured() == ("0.000 (one value over all seeds: fails) at layernorm; "
                                 "1.000 (one value over all seeds: holds) at rmsnorm")


def test_fraction_rule_counts_seeds_and_every_condition_must_hold():
    rule = Rule("r", "rises", "q", ">", 1.0, decide=0.8)
    four_of_five = {str(s): v for s, v in enumerate([1.2, 1.1, 1.3, 0.9, 1.05])}
    three_of_five = {str(s): v for s, v in enumerate([1.2, 0.8, 1.3, 0.9, 1.05])}
    assert judge(rule, {"L=6": four_of_five}).ok is True
    assert judge(rule, {"L=6": four_of_five, "L=48": three_of_five}).ok is False


def test_diverged_runs_count_as_infinite_and_missing_values_do_not_count():
    rule = Rule("r", "worse without warm-up", "q", ">=", 0.1)
    assert judge(rule, {"": {"0": math.inf, "1": math.inf, "2": 0.0}}).ok is True
    assert judge(rule, {"": {"0": None, "1": 0.5}}).conditions[""]["n"] == 1
    assert judge(rule, {"": {"0": None}}).ok is None and judge(rule, None).ok is None
    between = Rule("b", "about linear", "q", "between", (0.6, 1.4), basis="the theory's 1 ± 0.4")
    assert judge(between, {"": {"0": 1.0}}).ok and not judge(between, {"": {"0": 1.6}}).ok


def test_verdict_from_checks():
    ok, bad, none = (judge(Rule("r", "", "q", ">", 0), {"": {"0": v}}) for v in (1.0, -1.0, None))
    assert verdict([ok, ok]) == "reproduced" and verdict([ok, bad]) == "partly reproduced"
    assert verdict([bad, none]) == "not reproduced" and verdict([none]) == "not judged"


def test_rules_are_validated_when_declared():
    with pytest.raises(ValueError, match="op"):
        Rule("r", "", "q", "=>", 1.0)
    with pytest.raises(ValueError, match="decide"):
        Rule("r", "", "q", ">", 1.0, decide=4)
    with pytest.raises(ValueError, match="needs a basis"):  # a two-sided band says why it is that wide
        Rule("flat", "", "q", "between", (-0.1, 0.1))


def test_the_median_ci_rule_needs_the_whole_bootstrap_interval_of_the_median_called_a_range_below_six_seeds():
    rule = Rule("r", "rises", "q", ">", 0.0, decide="median_ci")
    clear = {str(s): v for s, v in enumerate([0.5, 0.6, 0.7, 0.4, 0.55, 0.65, 0.45, 0.5])}
    carried = {str(s): v for s, v in enumerate([3.0, 2.5, 0.2, -0.2, 0.05, -0.05, 0.1, -0.15])}  # two outliers
    assert judge(rule, {"": clear}).ok is True
    result = judge(rule, {"": carried})
    assert result.ok is False and result.conditions[""]["median"] > 0  # the median alone would have passed
    lo, hi = result.conditions[""]["median_ci95"]
    assert lo < 0 < hi and "95% bootstrap CI of the median" in result.measured()
    assert median_ci([1.0, 2.0]) is None and median_ci([1.0, 2.0, 3.0]) == median_ci([3.0, 1.0, 2.0])
    five = {str(s): v for s, v in enumerate([0.5, 0.6, 0.7, 0.4, -0.1])}  # with 5 seeds the interval is the range
    small = judge(rule, {"": five})
    assert small.ok is False and small.conditions[""]["median_ci95"] == [-0.1, 0.7]
    assert small.conditions[""]["interval"]["label"] == "range of 5 seeds" and "CI" not in small.measured()


def test_a_failed_guard_makes_the_verdict_inconclusive_whatever_the_checks_say():
    guard = Guard(arm="Pre-LN", margin=0.3, basis="well below the line")
    passing = judge(Rule("r", "", "q", ">", 0), {"": {"0": 1.0}})
    short = judge(guard.rule(), {"L=6": {"0": 0.1, "1": 0.2, "2": 0.05}})  # 0.05–0.2 nats below the unigram line
    assert short.ok is False and verdict([passing], short) == "inconclusive (undertrained)"
    trained = judge(guard.rule(), {"L=6": {"0": 0.9, "1": 1.0, "2": 0.8}})
    assert verdict([passing], trained) == "reproduced"


def test_a_registration_after_a_pilot_names_the_pilot():
    rules = (Rule("r", "", "q", ">", 0.0),)
    pilot = Pilot(runs="v2", numbers="0.5", changed="the band")
    assert Registration("c", "d", "n", "m", "LN", rules, label="after_pilot", pilot=pilot).pilot is pilot
    with pytest.raises(ValueError, match="names its pilot"):
        Registration("c", "d", "n", "m", "LN", rules, label="after_pilot")
    with pytest.raises(ValueError, match="names its pilot"):
        Registration("c", "d", "n", "m", "LN", rules, pilot=pilot)  # before_runs with a pilot: a contradiction
    with pytest.raises(ValueError, match="label"):
        Registration("c", "d", "n", "m", "LN", rules, label="after_the_fact")


def git(*args, cwd, date: str | None = None):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**env, **({"GIT_COMMITTER_DATE": date} if date else {})})


def test_provenance_names_the_commit_and_notices_later_edits(tmp_path):
    checks = tmp_path / "normtrain" / "reproduce" / "preregistered" / "x.py"
    checks.parent.mkdir(parents=True)
    checks.write_text("RULES = 1\n")
    assert declaration([checks])["why_unknown"] == "not a git checkout"
    git("init", "-q", cwd=tmp_path)
    assert declaration([checks])["dirty"] is True  # untracked: never committed
    git("add", ".", cwd=tmp_path)
    git("commit", "-qm", "declare", cwd=tmp_path)
    record = declaration([checks])
    assert record["dirty"] is False and len(record["commit"]) == 40
    assert record["files"] == ["normtrain/reproduce/preregistered/x.py"]
    assert preregistered(record, "2999-01-01T00:00:00+00:00") is True  # committed before the first run
    assert preregistered(record, "2000-01-01T00:00:00+00:00") is False  # runs older than the checks
    checks.write_text("RULES = 2\n")
    edited = declaration([checks])
    assert edited["dirty"] is True and edited["digest"] != record["digest"]
    assert preregistered(edited, "2999-01-01T00:00:00+00:00") is False


def test_a_declaration_changed_after_the_first_run_names_the_registration_it_ran_under_and_each_change(tmp_path):
    """A grid extended by a registered rule changes the YAML after the runs began: the write-up says when the
    checks were registered (before the runs) and which commits changed them since, not only the newest commit."""
    from normtrain.reproduce.index import registration_cell
    from normtrain.reproduce.writeup import declaration_text

    checks = tmp_path / "configs" / "experiment" / "x.yaml"
    checks.parent.mkdir(parents=True)
    git("init", "-q", cwd=tmp_path)
    for n, day in ((1, "2026-01-01"), (2, "2026-01-03"), (3, "2026-01-05")):
        checks.write_text(f"lrs: {n}\n")
        git("add", ".", cwd=tmp_path)
        git("commit", "-qm", f"c{n}", f"--date={day}T00:00:00+00:00", cwd=tmp_path, date=f"{day}T00:00:00+00:00")
    record = declaration([checks])
    assert [h["committed_at"][:10] for h in record["history"]] == ["2026-01-05", "2026-01-03", "2026-01-01"]
    first_run = "2026-01-02T00:00:00+00:00"
    found = registered_then_changed(record, first_run)
    assert found["registered"] == record["history"][2]
    assert [c["committed_at"][:10] for c in found["changed"]] == ["2026-01-03", "2026-01-05"]  # oldest first
    assert registered_then_changed(record, "2025-12-31T00:00:00+00:00")["registered"] is None  # runs came first
    shown = {**record, **found, "first_run_at": first_run, "before_runs": preregistered(record, first_run)}
    text = declaration_text(shown)
    assert text.startswith("**Registered before the runs, changed after they began**")
    assert record["history"][2]["commit"][:10] in text and "changed since by commits" in text
    assert "(changed after the runs began" in registration_cell({"registration": "before_runs",
                                                                 "provenance": {"declaration": shown}})
    never = {**record, "registered": None, "changed": [], "first_run_at": first_run, "before_runs": False}
    assert declaration_text(never).startswith("**Checks committed after the runs**")
    assert "(checks not committed before the runs)" in registration_cell({"provenance": {"declaration": never}})


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_declares_its_checks_with_distinct_ids_and_a_basis(name):
    reg = EXPERIMENTS[name]().registration
    rules = [r for _, r in reg.checks()]
    assert len({r.id for r in rules}) == len(rules) and all(r.basis for r in rules)  # every threshold says why
    assert len(rules) >= (1 if reg.protocol >= 4 else 3)
    compares_losses = name not in ("xiong_grad_init", "admin_output_change", "deepnet_update")
    assert (reg.guard is not None) == compares_losses  # a trainability guard wherever losses are compared


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_a_v4_registration_evaluates_often_enough_for_the_labels(name):
    """Under v4 a training experiment evaluates at least every 5% of its runs (the labels read the validation
    curve's last quarter and a plateau's end); the v3 registrations are records and keep their settings."""
    from normtrain.config import compose
    from normtrain.training.outcome import EVAL_FRACTION

    reg, t = EXPERIMENTS[name]().registration, compose([f"experiment={name}"]).train
    if reg.protocol < 4 or t.max_steps <= 1:
        pytest.skip("a v3 registration, or no training")
    assert 0 < t.eval_every <= EVAL_FRACTION * t.max_steps


def v4(primary=None, secondary=(), preconditions=(), **kw) -> Registration:
    primary = primary or Rule("claim", "Post-LN ends worse", "gap", ">", 0.0, decide="median_ci", basis="a sign")
    return Registration("c", "d", "n", "m", "LN", primary=primary, secondary=tuple(secondary),
                        preconditions=tuple(preconditions), **kw)


def values(*per_seed: float) -> dict:
    return {"": {str(s): v for s, v in enumerate(per_seed)}}


def test_v4_the_primary_check_alone_decides_and_secondary_checks_change_nothing():
    from normtrain.study.verdicts import decide

    side = Rule("side", "a secondary claim", "side_q", ">", 0.0, basis="a sign")
    reg = v4(secondary=[side])
    assert reg.protocol == 4 and [role for role, _ in reg.checks()] == ["primary", "secondary"]
    held = decide(reg, {"gap": values(0.3, 0.2, 0.4), "side_q": values(-1.0, -1.0, -1.0)}, lambda q: "seeds")
    assert (held.verdict, held.why) == ("reproduced", "the primary check claim held")
    assert held.role("secondary")[0].ok is False  # reported beside the verdict, never "partly reproduced"
    failed = decide(reg, {"gap": values(0.3, -0.2, 0.4), "side_q": values(1.0, 1.0, 1.0)}, lambda q: "seeds")
    assert failed.verdict == "not reproduced"  # every secondary check held: it does not matter
    assert decide(reg, {}, lambda q: "seeds").verdict == "not judged"


def test_v4_a_failed_or_unmeasured_precondition_or_guard_makes_the_verdict_inconclusive():
    from normtrain.study.verdicts import PRECONDITION, decide

    leak = Rule("leak_exists", "BatchNorm leaks (holds by construction)", "leak", ">", 1e-3, decide=1.0,
                basis="far above rounding")
    reg = v4(preconditions=[leak], guard=Guard(arm="Pre-LN", margin=0.3, basis="b"))
    good = {"gap": values(0.3, 0.2, 0.4), "leak": values(0.1, 0.1, 0.1), "reference_margin": values(1.0, 1.0, 1.0)}
    assert decide(reg, good, lambda q: "seeds").verdict == "reproduced"
    no_leak = decide(reg, {**good, "leak": values(0.1, 0.0, 0.1)}, lambda q: "seeds")
    assert no_leak.verdict == PRECONDITION and "leak_exists" in no_leak.why
    unmeasured = decide(reg, {k: v for k, v in good.items() if k != "leak"}, lambda q: "seeds")
    assert unmeasured.verdict == PRECONDITION
    short = decide(reg, {**good, "reference_margin": values(0.1, 0.1, 0.1)}, lambda q: "seeds")
    assert short.verdict == "inconclusive (undertrained)"


def test_v4_infeasible_at_a_scale_and_the_pilots_seeds_rerun_are_inconclusive():
    from normtrain.study.verdicts import AT_THIS_SCALE, REUSED, decide

    hard = v4(infeasible=(("cpu", "the effect needs a 400M model"),))
    assert decide(hard, {"gap": values(1, 1, 1)}, lambda q: "seeds", "cpu").verdict == AT_THIS_SCALE
    assert decide(hard, {"gap": values(1, 1, 1)}, lambda q: "seeds", "gpu").verdict == "reproduced"
    pilot = Pilot(runs="v3", numbers="0.5", changed="the rule", seeds=(0, 1, 2))
    again = v4(label="after_pilot", pilot=pilot)
    rerun = decide(again, {"gap": values(1, 1, 1)}, lambda q: "seeds", seeds=[0, 1, 2, 3, 4])
    assert rerun.verdict == REUSED and "0, 1, 2" in rerun.why
    assert decide(again, {"gap": values(1, 1, 1)}, lambda q: "seeds", seeds=[5, 6, 7]).verdict == "reproduced"


def test_v4_registrations_are_validated_and_v3_ones_keep_their_rule():
    from normtrain.study.verdicts import decide

    rule = Rule("r", "", "q", ">", 0.0)
    with pytest.raises(ValueError, match="not rules"):
        Registration("c", "d", "n", "m", "LN", (rule,), primary=rule)
    with pytest.raises(ValueError, match="names its primary"):
        Registration("c", "d", "n", "m", "LN", secondary=(rule,))
    with pytest.raises(ValueError, match="pilot's seeds"):
        v4(label="after_pilot", pilot=Pilot(runs="v3", numbers="0.5", changed="x"))
    with pytest.raises(ValueError, match="distinct"):
        v4(primary=rule, secondary=[rule])
    with pytest.raises(ValueError, match="source"):
        Rule("r", "", "q", ">", 0.0, source="folklore")
    with pytest.raises(ValueError, match="one direction"):
        Rule("r", "", "q", "between", (0, 1), decide="sign_test", basis="b")
    old = Registration("c", "d", "n", "m", "LN", (rule, Rule("s", "", "q2", ">", 0.0)))
    mixed = decide(old, {"q": values(1, 1, 1), "q2": values(-1, -1, -1)}, lambda q: "seeds")
    assert (old.protocol, mixed.protocol, mixed.verdict) == (3, 3, "partly reproduced")
    assert Rule("r", "", "q", ">", 0.0, source="ours").source == "ours"


def test_sign_and_t_test_decisions_and_their_p_values():
    sign = Rule("r", "lower", "q", "<", 0.0, decide="sign_test", basis="a sign")
    assert judge(sign, values(-0.1, -0.2, -0.1, -0.3, -0.05)).ok is True  # 5 of 5: p = 1/32
    four = judge(sign, values(-0.1, -0.2, -0.1, -0.3, 0.05))
    assert four.ok is False and four.conditions[""]["sign_p"] == pytest.approx(6 / 32)
    t = Rule("r", "higher", "q", ">", 0.0, decide="t_test", basis="a sign")
    clear = judge(t, values(0.10, 0.12, 0.11, 0.09, 0.13))
    assert clear.ok is True and clear.conditions[""]["t_p"] < 1e-3
    assert judge(t, values(0.1, -0.1, 0.05)).ok is False
    band = judge(Rule("b", "flat", "q", "between", (-1, 1), basis="b"), values(0.1, 0.2))
    assert band.conditions[""]["sign_p"] is None and "sign test" not in band.measured()
