"""Pre-registered checks: rules applied to per-seed values, and the record of when they were committed."""

import math
import subprocess

import pytest

from normtrain.reproduce.catalog import EXPERIMENTS
from normtrain.reproduce.preregistration import Rule, judge, preregistered, provenance, verdict


def test_median_rule_decides_on_the_median_not_the_best_seed():
    rule = Rule("r", "grows", "q", ">=", 0.3)
    result = judge(rule, {"lr 1e-3": {"0": 0.9, "1": 0.1, "2": 0.2}})  # one great seed, two poor ones
    assert result.ok is False
    cond = result.conditions["lr 1e-3"]
    assert (cond["median"], cond["passing"], cond["n"], cond["min"], cond["max"]) == (0.2, 1, 3, 0.1, 0.9)
    assert cond["per_seed"] == {"0": 0.9, "1": 0.1, "2": 0.2}
    assert "median 0.200 [0.100, 0.900], 1/3 seeds pass at lr 1e-3" == result.measured()


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
    between = Rule("b", "about linear", "q", "between", (0.6, 1.4))
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


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)})


def test_provenance_names_the_commit_and_notices_later_edits(tmp_path):
    checks = tmp_path / "normtrain" / "reproduce" / "preregistered" / "x.py"
    checks.parent.mkdir(parents=True)
    checks.write_text("RULES = 1\n")
    assert provenance([checks])["why_unknown"] == "not a git checkout"
    git("init", "-q", cwd=tmp_path)
    assert provenance([checks])["dirty"] is True  # untracked: never committed
    git("add", ".", cwd=tmp_path)
    git("commit", "-qm", "declare", cwd=tmp_path)
    record = provenance([checks])
    assert record["dirty"] is False and len(record["commit"]) == 40
    assert record["files"] == ["normtrain/reproduce/preregistered/x.py"]
    assert preregistered(record, "2999-01-01T00:00:00+00:00") is True  # committed before the first run
    assert preregistered(record, "2000-01-01T00:00:00+00:00") is False  # runs older than the checks
    checks.write_text("RULES = 2\n")
    edited = provenance([checks])
    assert edited["dirty"] is True and edited["digest"] != record["digest"]
    assert preregistered(edited, "2999-01-01T00:00:00+00:00") is False


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_declares_at_least_three_checks_with_distinct_ids(name):
    rules = EXPERIMENTS[name]().registration.rules
    assert len(rules) >= 3 and len({r.id for r in rules}) == len(rules)
