"""train.on_divergence=rollback end to end, with the test-only fault injector debug.inject_nan_at_step: the run goes
back to its last checkpoint, skips the batch that diverged, records the rollback everywhere, is reproducible from
its seed, survives kill -9 after a rollback, and stops as diverged after max_retries."""

from __future__ import annotations

import signal

import pytest
import torch
from fault_helpers import comparable, rows, run_victim, summary

import normtrain
from normtrain.checkpoint import CKPT_NAME, load_checkpoint
from normtrain.training.optim import lr_at

pytestmark = pytest.mark.slow

# tiny: 20 steps, log every 5, eval every 10. The loss of batch 9 is NaN; the flag is read at step 10's log row;
# the last checkpoint is step 8, so the run goes back to 8 and skips batches 8 and 9 (null skip_batches: through
# the diverged step), with the lr halved for steps 8, 9 and 10.
ROLLBACK = ["train.on_divergence=rollback", "train.ckpt_every=4", "debug.inject_nan_at_step=9",
            "train.rollback.lr_factor=0.5", "train.rollback.lr_steps=3"]


def without_paths(run_rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "rollback/checkpoint"} for r in run_rows]


_rolled: dict[tuple, tuple] = {}


@pytest.fixture
def rolled(tiny, tmp_path_factory):
    """The rollback run (trained once per session)."""
    overrides = [*tiny, *ROLLBACK]
    if tuple(overrides) not in _rolled:
        run_dir = tmp_path_factory.mktemp("rolled")
        _rolled[tuple(overrides)] = overrides, run_dir, normtrain.train(normtrain.compose(overrides), run_dir=run_dir)
    return _rolled[tuple(overrides)]


def test_a_rollback_skips_the_batch_that_diverged_and_is_recorded(rolled):
    overrides, run_dir, result = rolled
    assert result["status"] == "completed" and result["steps"] == 20 and result["diverged_at_step"] is None
    record = {"step": 9, "restored_step": 8, "checkpoint": str(run_dir / CKPT_NAME), "skipped_batches": 2,
              "lr_factor": 0.5, "lr_steps": 3, "retry": 1}
    assert result["rollbacks"] == [record] and summary(run_dir)["rollbacks"] == [record]
    state = load_checkpoint(run_dir / CKPT_NAME)
    assert state["rollbacks"] == [record]
    assert state["sampler"]["batches_drawn"] == 22  # 20 steps and the 2 skipped batches: none trained twice

    # metrics.jsonl: the abandoned attempt (its step 10 has a NaN loss), the event, then steps 10.. again
    logged = rows(run_dir)
    assert [r["step"] for r in logged] == [0, 5, 10, 9, 10, 15, 19, 20]  # 19: the last step, 20: the final eval
    assert logged[2]["train/loss"] is None and logged[4]["train/loss"] is not None
    assert logged[3] == {"step": 9, "event": "rollback", **{f"rollback/{k}": v for k, v in record.items()
                                                              if k != "step"}}
    scheduled = lr_at(10, lr=1e-3, warmup_steps=5, max_steps=20, schedule="cosine", min_lr_ratio=0.1)
    assert logged[2]["lr"] == pytest.approx(scheduled) and logged[4]["lr"] == pytest.approx(0.5 * scheduled)
    assert logged[5]["lr"] == pytest.approx(lr_at(15, lr=1e-3, warmup_steps=5, max_steps=20, schedule="cosine",
                                                  min_lr_ratio=0.1))  # lr_steps over: the schedule again


def test_a_run_with_a_rollback_is_reproducible_from_its_seed(rolled, tmp_path):
    overrides, run_dir, _ = rolled
    again = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path)
    assert again["rollbacks"][0]["restored_step"] == 8
    assert without_paths(comparable(tmp_path)) == without_paths(comparable(run_dir))  # bit for bit
    one, two = (load_checkpoint(d / CKPT_NAME)["model"] for d in (run_dir, tmp_path))
    assert one.keys() == two.keys() and all(torch.equal(one[k], two[k]) for k in one)


def test_kill_9_after_a_rollback_resumes_past_the_skipped_data(rolled, tmp_path):
    overrides, run_dir, _ = rolled
    # the 14th batch drawn in the process is step 11's (10 before the rollback, then 8, 9, 10 again): killed
    # there, the run resumes from the checkpoint written at the rollback, which holds the skip and the record
    proc = run_victim(overrides, tmp_path, "step", 14)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    final = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path)
    assert final["status"] == "completed" and len(final["rollbacks"]) == 1
    assert final["resumes"][0]["step"] == 8
    assert without_paths(comparable(tmp_path)) == without_paths(comparable(run_dir))


def test_replaying_the_bad_batch_rolls_back_max_retries_times_then_stops_as_diverged(tiny, tmp_path):
    cfg = normtrain.compose([*tiny, *ROLLBACK, "train.rollback.skip_batches=0", "train.rollback.max_retries=2"])
    result = normtrain.train(cfg, run_dir=tmp_path)
    assert result["status"] == "diverged" and result["diverged_at_step"] == 9 and result["steps"] == 11
    assert [(r["step"], r["restored_step"], r["skipped_batches"], r["retry"]) for r in result["rollbacks"]] == [
        (9, 8, 0, 1), (9, 8, 0, 2)]
    assert len([r for r in rows(tmp_path) if r.get("event") == "rollback"]) == 2
    assert load_checkpoint(tmp_path / CKPT_NAME)["step"] == 8  # the last finite resume point, untouched


def test_a_divergence_before_the_first_checkpoint_rolls_back_to_the_start(tiny, tmp_path):
    cfg = normtrain.compose([*tiny, "train.on_divergence=rollback", "train.ckpt_every=8", "debug.inject_nan_at_step=2"])
    result = normtrain.train(cfg, run_dir=tmp_path)
    assert result["status"] == "completed"
    assert [(r["step"], r["restored_step"], r["skipped_batches"]) for r in result["rollbacks"]] == [(2, 0, 3)]
