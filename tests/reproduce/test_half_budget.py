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
