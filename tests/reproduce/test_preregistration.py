"""Pre-registered checks: rules applied to per-seed values, and the record of when they were committed."""

import math
import subprocess

import pytest

from normtrain.reproduce.catalog import EXPERIMENTS
from normtrain.reproduce.preregistration import (
    Guard,
    Pilot,
    Registration,
    Rule,
    declaration,
    judge,
    median_ci,
    preregistered,
    verdict,
)


def test_median_rule_decides_on_the_median_not_the_best_seed():
    rule = Rule("r", "grows", "q", ">=", 0.3)
    result = judge(rule, {"lr 1e-3": {"0": 0.9, "1": 0.1, "2": 0.2}})  # one great seed, two poor ones
    assert result.ok is False
    cond = result.conditions["lr 1e-3"]
    assert (cond["median"], cond["passing"], cond["n"], cond["min"], cond["max"]) == (0.2, 1, 3, 0.1, 0.9)
    assert cond["per_seed"] == {"0": 0.9, "1": 0.1, "2": 0.2}
    assert "median 0.200 [0.100, 0.900], 1/3 seeds pass at lr 1e-3" == result.measured()


def test_repeats_of_a_timing_are_called_repeats_not_seeds():
    rule = Rule("faster", "trains faster", "ratio", "<", 1.0)
    result = judge(rule, {"": {"0": 0.9, "1": 1.1, "2": 0.95}}, unit="repeats")
    assert result.measured() == "median 0.950 [0.900, 1.100], 2/3 repeats pass"
    assert result.as_dict()["unit"] == "repeats" and "the median over repeats" in result.as_dict()["rule"]
    assert "seed" not in result.measured() + result.as_dict()["rule"]


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


def test_the_median_ci_rule_needs_the_whole_bootstrap_interval_of_the_median():
    rule = Rule("r", "rises", "q", ">", 0.0, decide="median_ci")
    clear = {str(s): v for s, v in enumerate([0.5, 0.6, 0.7, 0.4, 0.55, 0.65, 0.45, 0.5])}
    carried = {str(s): v for s, v in enumerate([3.0, 2.5, 0.2, -0.2, 0.05, -0.05, 0.1, -0.15])}  # two outliers
    assert judge(rule, {"": clear}).ok is True
    result = judge(rule, {"": carried})
    assert result.ok is False and result.conditions[""]["median"] > 0  # the median alone would have passed
    lo, hi = result.conditions[""]["median_ci95"]
    assert lo < 0 < hi and "95% CI of the median" in result.measured()
    assert median_ci([1.0, 2.0]) is None and median_ci([1.0, 2.0, 3.0]) == median_ci([3.0, 1.0, 2.0])


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


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)})


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


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_declares_at_least_three_checks_with_distinct_ids(name):
    reg = EXPERIMENTS[name]().registration
    assert len(reg.rules) >= 3 and len({r.id for r in reg.rules}) == len(reg.rules)
    assert all(r.basis for r in reg.rules)  # every threshold says where it comes from
    compares_losses = name not in ("xiong_grad_init", "admin_output_change", "deepnet_update")
    assert (reg.guard is not None) == compares_losses  # a trainability guard wherever losses are compared
