"""Divergence is a durable fact: NaN between log steps, non-finite gradients, no non-finite resume point."""

from __future__ import annotations

import pytest
import torch
from fault_helpers import rows, summary

import normtrain
from normtrain.checkpoint import CKPT_NAME, all_finite, digest, load_checkpoint, save_checkpoint
from normtrain.model import GPT
from normtrain.util.errors import CheckpointError


def poison_loss_at(monkeypatch, step: int) -> None:
    """The training loss (and so every gradient) turns NaN at ``step`` (counting training forwards from 0)."""
    original = GPT.forward
    calls = {"n": 0}

    def forward(self, *args, **kwargs):
        if not self.training:  # evaluation and the monitor's probe
            return original(self, *args, **kwargs)
        logits, loss = original(self, *args, **kwargs)
        if loss is not None:
            calls["n"] += 1
            if calls["n"] - 1 == step:
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", forward)


def test_nan_after_the_last_log_step_is_recorded_diverged(tiny, tmp_path, monkeypatch):
    # logs at 0, 5, 10, 15 and the end (20); the NaN comes at 17, between the last log step and the end
    cfg = normtrain.compose([*tiny, "train.max_steps=20", "monitor.every=5", "train.eval_every=10"])
    poison_loss_at(monkeypatch, 17)
    result = normtrain.train(cfg, run_dir=tmp_path)
    assert result["status"] == "diverged" and result["diverged_at_step"] == 17
    assert result["final_val_loss"] is None and result["final_val_bpb"] is None
    assert result["last_finite_val_loss"] == rows(tmp_path)[2]["val/loss"]  # step 10's, the last finite one
    on_disk = summary(tmp_path)
    assert on_disk["status"] == "diverged" and on_disk["diverged_at_step"] == 17
    assert not (tmp_path / CKPT_NAME).exists()  # no checkpoint at all rather than a non-finite one


def test_checkpoint_keeps_the_last_finite_state_and_a_resume_keeps_the_record(tiny, tmp_path, monkeypatch):
    cfg = normtrain.compose([*tiny, "train.max_steps=20", "monitor.every=5", "train.ckpt_every=4"])
    poison_loss_at(monkeypatch, 13)  # checkpoints at 4, 8, 12 are finite; 16 would not be
    result = normtrain.train(cfg, run_dir=tmp_path)
    assert result["status"] == "diverged" and result["diverged_at_step"] == 13
    state = load_checkpoint(tmp_path / CKPT_NAME)
    assert state["step"] == 12 and all_finite(state["model"])
    monkeypatch.undo()

    before = (tmp_path / "metrics.jsonl").read_text()
    again = normtrain.train(cfg, run_dir=tmp_path)  # train.resume=auto: the record stands, nothing re-trained
    assert again["status"] == "diverged" and again["diverged_at_step"] == 13
    assert summary(tmp_path)["status"] == "diverged" and (tmp_path / "metrics.jsonl").read_text() == before

    fresh = normtrain.train(normtrain.compose([*tiny, "train.max_steps=20", "train.resume=none"]), run_dir=tmp_path)
    assert fresh["status"] == "completed"  # starting over is explicit


class InfiniteGradient(torch.autograd.Function):
    """Adds 0 to the loss and sends an infinite gradient back: a finite loss with non-finite gradients."""

    @staticmethod
    def forward(ctx, weight):
        ctx.shape = weight.shape
        return weight.new_zeros(())

    @staticmethod
    def backward(ctx, grad):
        return torch.full(ctx.shape, float("inf"))


def test_non_finite_gradients_with_a_finite_loss_diverge(tiny, tmp_path, monkeypatch):
    cfg = normtrain.compose([*tiny, "train.max_steps=12", "monitor.every=5", "optim.grad_clip=0"])
    original = GPT.forward
    calls = {"n": 0}

    def forward(self, *args, **kwargs):
        if not self.training:
            return original(self, *args, **kwargs)
        logits, loss = original(self, *args, **kwargs)
        if loss is not None:
            calls["n"] += 1
            if calls["n"] == 8:  # step 7: the loss stays finite, the gradient of the embedding does not
                loss = loss + InfiniteGradient.apply(self.tok_emb.weight)
        return logits, loss

    monkeypatch.setattr(GPT, "forward", forward)
    result = normtrain.train(cfg, run_dir=tmp_path)
    assert result["status"] == "diverged" and result["diverged_at_step"] == 7


def test_a_non_finite_checkpoint_is_refused(tiny, tmp_path):
    cfg = normtrain.compose([*tiny, "train.max_steps=4"])
    normtrain.train(cfg, run_dir=tmp_path)
    state = torch.load(tmp_path / CKPT_NAME, weights_only=True)
    poisoned = {k: v * float("nan") for k, v in state["model"].items()}
    with pytest.raises(ValueError, match="non-finite"):
        save_checkpoint(tmp_path / "other", {**state, "model": poisoned})
    # one written by hand (or by an older normtrain, which saved diverged runs), its digest in order
    state["model"] = poisoned
    state["digest"] = digest({k: v for k, v in state.items() if k != "digest"})
    torch.save(state, tmp_path / CKPT_NAME)
    with pytest.raises(CheckpointError, match="non-finite weights"):
        normtrain.train(normtrain.compose([*tiny, "train.max_steps=8"]), run_dir=tmp_path)
