"""An interrupted run's final loss is measured where it stopped (when cheap), and always labelled with its step;
the extra evaluation changes nothing a resume reads."""

import json

from preemption import rows, sigterm_at_batch

import normtrain
from normtrain.training import evaluation
from normtrain.training.ending import end_line


def test_an_interrupted_run_is_evaluated_where_it_stopped_and_resumes_exactly(tiny, tmp_path, monkeypatch):
    overrides = [*tiny, "train.max_steps=16", "train.eval_every=5"]
    whole = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path / "whole")
    sigterm_at_batch(monkeypatch, 8)
    first = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path / "split")
    assert first["status"] == "interrupted" and first["steps"] == 8
    assert first["final_val_loss_step"] == 8  # not the step-5 evaluation
    at_5 = next(r["val/loss"] for r in rows(tmp_path / "split") if r["step"] == 5)
    assert first["final_val_loss"] != at_5
    assert json.loads((tmp_path / "split" / "summary.json").read_text())["final_val_loss_step"] == 8
    assert "interrupted after 8 steps: final val loss" in end_line(first) and "(step 8)" in end_line(first)
    assert all(r["step"] < 8 for r in rows(tmp_path / "split"))  # the summary's alone: no row at step 8
    monkeypatch.undo()

    second = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path / "split")
    a, b = rows(tmp_path / "whole"), rows(tmp_path / "split")
    assert [r["step"] for r in b] == [r["step"] for r in a]
    for ra, rb in zip(a, b, strict=True):
        for key in ("train/loss", "val/loss", "grad_norm/total", "lr"):
            assert ra.get(key) == rb.get(key), (ra["step"], key)  # bit for bit
    assert second["final_val_loss"] == whole["final_val_loss"] and second["final_val_loss_step"] == 16


def test_an_expensive_evaluation_is_not_repeated_on_the_way_out_but_its_step_is_said(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(evaluation, "EXIT_EVAL_MAX_S", 0.0)
    sigterm_at_batch(monkeypatch, 8)
    first = normtrain.train(normtrain.compose([*tiny, "train.max_steps=16", "train.eval_every=5"]),
                           run_dir=tmp_path / "run")
    assert first["status"] == "interrupted" and first["final_val_loss_step"] == 5
    assert "final val loss" in end_line(first) and "(step 5, the last evaluation)" in end_line(first)
