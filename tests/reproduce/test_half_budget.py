"""A reproduction with ``half_budget`` measures every run at T and at T/2 (protocol v5's budget stability): under
WSD the T/2 run is a decay branch off the T run's kept checkpoint; a rerun trains nothing; result.json states both
budgets."""

from __future__ import annotations

import json

import pytest

from normtrain.reproduce.runner import Experiment
from normtrain.study import branches
from normtrain.study.plan import Plan

BASE = ["model.n_layers=1", "model.d_model=16", "model.n_heads=2", "model.seq_len=16", "logger=none",
        "train.progress=false", "optim.schedule=wsd", "optim.warmup_steps=2", "train.max_steps=24",
        "train.eval_every=0", "train.batch_size=2", "train.eval_windows=8"]


class Toy(Experiment):
    name = "toy"
    half_budget = True


@pytest.mark.slow
def test_every_run_is_measured_at_both_budgets_and_the_half_is_a_branch(text_corpus, tmp_path):
    base = [*BASE, "data=local_text", f"data.path={text_corpus}"]
    plan = Plan("toy", "cpu", False, base, {"optim.lr": ["1e-3", "3e-3"], "train.seed": ["0", "1"]},
                tmp_path / "runs", tmp_path / "out", progress=False)
    rows = Toy().measure(plan)
    assert sorted((r["optim.lr"], r["train.seed"], r[branches.STEPS]) for r in rows) == sorted(
        (lr, s, steps) for lr in ("1e-3", "3e-3") for s in ("0", "1") for steps in (24, 12))
    assert all(r["status"] == "completed" for r in rows)
    from normtrain.reproduce.records import training_budget
    assert training_budget(plan, rows) == {"steps": 24, "half_steps": 12, "tokens": 24 * 2 * 16}  # what the index shows
    half, branch_step = branches.half_of(24, 2, 0.2, True)
    assert (half, branch_step) == (12, 10)  # the T/2 run's own decay starts at step 10 of 12 (20%)
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "runs_half").glob("*/summary.json")]
    assert len(summaries) == 4 and all(s["steps"] == 12 for s in summaries)
    assert all(str(s["config"]["train"]["resume"]).endswith(f"ckpt_step{branch_step}.pt") for s in summaries)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("runs*/*/summary.json")}
    again = Toy().measure(plan)  # everything finished: reused
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps and len(again) == 8 and plan.reused_s > 0


@pytest.mark.slow
def test_branches_follow_their_t_runs_and_a_packed_grid_trains_only_what_the_pack_lacks(text_corpus, tmp_path):
    from normtrain.reproduce import carry
    from normtrain.reproduce.runner import PAIRS_AT_ONCE

    base = [*BASE, "data=local_text", f"data.path={text_corpus}"]
    seeds = [str(s) for s in range(PAIRS_AT_ONCE + 1)]  # one group of PAIRS_AT_ONCE pairs (jobs 1), then one more
    plan = Plan("toy", "cpu", False, base, {"optim.lr": ["1e-3"], "train.seed": seeds}, tmp_path / "runs",
                tmp_path / "out", progress=False)
    Toy().measure(plan)
    written = {(part, p.parent.name): p.stat().st_mtime_ns for part in ("runs", "runs_half")
               for p in (tmp_path / part).glob("*/summary.json")}
    first, last = plan.run_dir(plan.combos()[0]).name, plan.run_dir(plan.combos()[-1]).name
    assert written["runs_half", first] < written["runs", last]  # the first group's branches before the last T run
    (tmp_path / "runs_half" / last / "summary.json").unlink()  # the session ended before the last branch finished
    assert carry.pack(plan, True, branches.reproduction_half(plan.compose(plan.combos()[0]))[1])
    fresh = Plan("toy", "cpu", False, base, dict(plan.grid), tmp_path / "machine2" / "runs", tmp_path / "out",
                 progress=False)
    assert carry.restore(fresh) == 2 * PAIRS_AT_ONCE  # the finished pairs; the last T run waits for its branch
    assert not list((tmp_path / "machine2").glob("**/*.pt"))
    restored = {p: p.stat().st_mtime_ns for p in (tmp_path / "machine2").glob("*/*/summary.json")}
    rows = Toy().measure(fresh)
    assert len(rows) == 2 * len(seeds) and all(r["status"] == "completed" for r in rows)
    assert {p: p.stat().st_mtime_ns for p in restored} == restored and fresh.reused_s > 0  # reused, not retrained
    assert (tmp_path / "machine2" / "runs_half" / last / "summary.json").is_file()  # the missing pair, trained here
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/summary.json")]
    original = {str(s["config"]["train"]["seed"]): s["final_val_loss"] for s in summaries}
    assert {r["train.seed"]: r["final_val_loss"] for r in rows if r[branches.STEPS] == 24} == original


class Scored(Toy):
    """An experiment that measures every trained model at both budgets (as batchnorm_leak scores them): the
    measurement stands in for the checkpoints, made pair by pair as the runs finish."""

    keep_checkpoints = True
    checkpoint_stand_in = "scores.json"
    stand_in_of_pairs = True
    asked: list[list[str]] = []

    def make_stand_ins(self, runs, combos):
        self.asked.append([c["train.seed"] for c in combos])
        for c in combos:
            for folder in (runs.run_dir(c), branches.half_runs_dir(runs.runs_dir) / runs.run_dir(c).name):
                if not (folder / "scores.json").is_file():
                    assert (folder / "ckpt.pt").is_file()  # both budgets keep their checkpoints until measured
                    (folder / "scores.json").write_text("{}")


@pytest.mark.slow
def test_a_measuring_experiment_measures_each_group_of_pairs_as_it_finishes_and_its_pack_needs_no_checkpoint(
        text_corpus, tmp_path):
    from normtrain.reproduce import carry
    from normtrain.reproduce.runner import PAIRS_AT_ONCE

    base = [*BASE, "data=local_text", f"data.path={text_corpus}"]
    seeds = [str(s) for s in range(PAIRS_AT_ONCE + 1)]
    plan = Plan("toy", "cpu", False, base, {"optim.lr": ["1e-3"], "train.seed": seeds}, tmp_path / "runs",
                tmp_path / "out", progress=False)
    Scored.asked = []
    Scored().measure(plan)
    assert Scored.asked == [seeds[:PAIRS_AT_ONCE], seeds[PAIRS_AT_ONCE:]]  # one call per group, its pairs trained
    assert carry.pack(plan, True, branches.reproduction_half(plan.compose(plan.combos()[0]))[1])
    fresh = Plan("toy", "cpu", False, base, dict(plan.grid), tmp_path / "machine2" / "runs", tmp_path / "out",
                 progress=False)
    assert carry.restore(fresh) == 2 * len(seeds)
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "machine2").glob("*/*/summary.json")}
    Scored.asked = []
    rows = Scored().measure(fresh)  # no checkpoint here: the measurements stand in for them at T and at T/2
    assert len(rows) == 2 * len(seeds) and {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert not list((tmp_path / "machine2").glob("**/*.pt"))


def test_a_t_run_that_diverged_before_the_branch_stands_at_t2_as_diverged_with_its_own_code():
    """dyt v5: two T runs diverged before step 640, and their T/2 rows, carrying no code, made the provenance
    check refuse the whole result as runs of unknown training code."""
    from normtrain.study.provenance import refuse_mixed

    code = {"code_commit": "abc", "code_dirty": False, "training_code_digest": "d1"}
    t_rows = [{"optim.lr": "0.01", "train.seed": "1", "status": "diverged", "diverged_at_step": 476,
               "run_dir": "a", **code},
              {"optim.lr": "0.01", "train.seed": "2", "status": "completed", "run_dir": "b", **code}]
    axes = ["optim.lr", "train.seed"]
    gone = branches.gone_before_branch(t_rows, axes, 640)
    lost = branches.lost_at_half(t_rows, axes, gone)
    assert [(r["train.seed"], r["status"], r["final_val_loss"]) for r in lost] == [("1", "diverged", float("inf"))]
    assert lost[0]["training_code_digest"] == "d1"
    assert refuse_mixed(t_rows + lost, allow_dirty=False, where="here")["training_code_digests"] == {"d1": 3}
