"""Resume only what matches: a changed experiment key is refused with ``old → new``; bookkeeping may change."""

from __future__ import annotations

import os

import pytest
import torch
from fault_helpers import comparable, summary

import normtrain
from normtrain.checkpoint import CKPT_NAME
from normtrain.util.errors import CheckpointError


@pytest.fixture
def stopped(tiny, tmp_path):
    """A run folder whose checkpoint is at step 6 of 12 (as if it had been preempted there)."""
    normtrain.train(normtrain.compose([*tiny, "train.max_steps=6"]), run_dir=tmp_path)
    return tmp_path


# one key of each kind that defines the experiment
@pytest.mark.parametrize("change,shown", [
    ("model.n_heads=4", "model.n_heads: 2 → 4"),
    ("model.d_model=64", "model.d_model: 32 → 64"),
    ("norm.eps=1e-5", "norm.eps: 1e-06 → 1e-05"),
    ("placement=post", "placement.name: 'pre' → 'post'"),
    ("data.val_fraction=0.2", "data.val_fraction: 0.05 → 0.2"),
    ("optim.lr=3e-3", "optim.lr: 0.001 → 0.003"),
    ("optim.schedule=constant", "optim.schedule: 'cosine' → 'constant'"),
    ("train.seed=1", "train.seed: 0 → 1"),
    ("train.batch_size=8", "global_batch_size: 4 → 8"),
])
def test_a_changed_experiment_key_is_refused(change, shown, tiny, stopped):
    with pytest.raises(CheckpointError) as err:
        normtrain.train(normtrain.compose([*tiny, "train.max_steps=12", change]), run_dir=stopped)
    message = str(err.value)
    assert shown in message and "train.resume=none" in message and "train.allow_changes" in message
    assert summary(stopped)["status"] == "completed" and summary(stopped)["steps"] == 6  # nothing overwritten


def test_the_global_batch_may_be_kept_with_another_micro_batch(tiny, stopped):
    """A per-rank batch change is refused unless the global batch stays (what another world size needs too):
    the message says how; train.global_batch_size=4 with micro-batches of 2 then resumes (2 accumulated)."""
    with pytest.raises(CheckpointError, match="keep the global batch instead: train.global_batch_size=4"):
        normtrain.train(normtrain.compose([*tiny, "train.max_steps=12", "train.batch_size=2"]), run_dir=stopped)
    result = normtrain.train(normtrain.compose([*tiny, "train.max_steps=12", "train.batch_size=2",
                                                "train.global_batch_size=4"]), run_dir=stopped)
    assert result["status"] == "completed" and result["grad_accumulation"] == 2 and result["global_batch_size"] == 4
    assert result["resumes"][0]["changes"]["train.batch_size"] == [4, 2]


def test_bookkeeping_may_change_and_is_recorded(tiny, stopped, capfd):
    capfd.readouterr()
    result = normtrain.train(normtrain.compose([*tiny, "train.max_steps=12", "monitor.every=3", "train.eval_every=4",
                                                "train.ckpt_every=2"]), run_dir=stopped)
    assert f"resuming from step 6 ({stopped / CKPT_NAME})" in capfd.readouterr().err
    assert result["status"] == "completed" and result["resumed_from_step"] == 6
    (resume,) = result["resumes"]
    assert resume["step"] == 6 and resume["changes"]["train.max_steps"] == [6, 12]
    assert resume["changes"]["monitor.every"] == [5, 3]


def test_an_explicit_opt_in_accepts_a_change_and_records_it(tiny, stopped):
    result = normtrain.train(normtrain.compose([*tiny, "train.max_steps=12", "optim.lr=3e-3",
                                                "train.allow_changes=[optim.lr]"]), run_dir=stopped)
    assert result["status"] == "completed" and result["resumes"][0]["changes"]["optim.lr"] == [1e-3, 3e-3]
    assert summary(stopped)["resumes"][0]["changes"]["optim.lr"] == [1e-3, 3e-3]


def test_resume_history_accumulates(tiny, stopped):
    normtrain.train(normtrain.compose([*tiny, "train.max_steps=9"]), run_dir=stopped)
    result = normtrain.train(normtrain.compose([*tiny, "train.max_steps=12"]), run_dir=stopped)
    assert [r["step"] for r in result["resumes"]] == [6, 9]
    # each leg's last step is logged (5, 8, 11); its final evaluation row (6, 9) is replaced by the next leg's
    assert [r["step"] for r in comparable(stopped)] == [0, 5, 8, 10, 11, 12]


def test_max_steps_below_the_checkpoint_is_refused(tiny, stopped):
    with pytest.raises(CheckpointError, match="train.max_steps: 4 is below the checkpoint's step 6"):
        normtrain.train(normtrain.compose([*tiny, "train.max_steps=4"]), run_dir=stopped)


def test_a_checkpoint_of_another_model_given_by_path_is_refused(tiny, stopped, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    with pytest.raises(CheckpointError, match="model.n_layers: 2 → 3"):
        normtrain.train(normtrain.compose([*tiny, "model.n_layers=3", f"train.resume={stopped}"]), run_dir=other)


DAMAGE = {  # what is done to the checkpoint, and what the message must say the file is
    "flipped": "is damaged: its contents do not match the digest written with it",
    "truncated": "cannot be read: it is cut short: a zip archive (torch.save's format) of ",
    "empty": "cannot be read: it is empty (0 bytes)",
    "not_a_checkpoint": "is not a normtrain checkpoint: torch.save wrote a dict of 'weights' into it, without [",
    "text": "cannot be read: it is a text file (it begins 'step: 6'), not the zip archive torch.save writes",
    "safetensors": "cannot be read: it is a safetensors file (weights alone, as normtrain-export and Hugging Face",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_checkpoint_says_what_the_file_is_and_what_to_do(damage, tiny, stopped):
    path = stopped / CKPT_NAME
    data = bytearray(path.read_bytes())
    if damage == "flipped":
        middle = slice(len(data) // 3, len(data) // 3 + 64)
        data[middle] = bytes(b ^ 0xFF for b in data[middle])  # every bit flipped, the size unchanged
        path.write_bytes(data)
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "text":
        path.write_text("step: 6\nmodel: pre-rmsnorm\n")
    elif damage == "safetensors":
        from safetensors.torch import save_file

        save_file({"w": torch.zeros(3)}, str(path))
    else:
        torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(CheckpointError) as err:
        normtrain.train(normtrain.compose([*tiny, "train.max_steps=12"]), run_dir=stopped)
    message = str(err.value)
    assert f"{path} {DAMAGE[damage]}" in message
    assert message.endswith(". Start over with train.resume=none, or point train.resume at another checkpoint")
    assert "weights_only" not in message and "Re-running" not in message  # never torch's unsafe hint


class Payload:
    """Pickled, it would run code when loaded."""

    def __reduce__(self):
        import os

        return (os.system, ("touch PWNED",))


def test_a_checkpoint_with_code_in_it_is_not_run(tiny, stopped, monkeypatch):
    monkeypatch.chdir(stopped)
    torch.save({"model": Payload()}, stopped / CKPT_NAME)
    with pytest.raises(CheckpointError) as err:
        normtrain.train(normtrain.compose([*tiny, "train.max_steps=12"]), run_dir=stopped)
    assert not (stopped / "PWNED").exists()
    assert f"cannot be read: it holds pickled Python objects whose loading would call {os.system.__module__}.system; " \
           "normtrain loads checkpoints without running code from them (weights only)" in str(err.value)
    assert "weights_only=False" not in str(err.value) and "weights_only` set to `False`" not in str(err.value)
