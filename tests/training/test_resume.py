"""Checkpoints, exact resume, preemption signals and torch.compile (issue: never lose a run)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from preemption import rows, sigterm_at_batch

import normtrain
from normtrain.checkpoint import CKPT_NAME, load_checkpoint
from normtrain.config import model_config
from normtrain.model import GPT

PEER = ["model.tie_embeddings=true", "model.init=gpt2", "norm=layernorm", "norm.bias=false", "model.pos=learned"]
RUNS = [pytest.param("adamw", [], id="adamw"), pytest.param("muon", [], id="muon"),
        pytest.param("adamw", PEER, marks=pytest.mark.slow, id="peer")]


@pytest.mark.parametrize("optim,peer", RUNS)
def test_stopped_and_resumed_run_repeats_the_uninterrupted_losses_exactly(optim, peer, tiny, tmp_path, monkeypatch):
    """Under Muon the checkpoint holds both optimizers' state (Muon's momentum, AdamW's moments); a tied model
    (the peer options: GPT-2's init, LayerNorm without β) saves and resumes its one matrix and its moments."""
    overrides = [*tiny, "train.max_steps=20", "monitor.every=1", "train.eval_every=5", f"optim={optim}", *peer]
    whole = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path / "whole")

    sigterm_at_batch(monkeypatch, 11)
    first = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path / "split")
    assert first["status"] == "interrupted" and first["steps"] == 11
    assert load_checkpoint(tmp_path / "split" / CKPT_NAME)["step"] == 11
    monkeypatch.undo()

    second = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path / "split")  # train.resume=auto
    assert second["status"] == "completed" and second["steps"] == 20 and second["resumed_from_step"] == 11

    a, b = rows(tmp_path / "whole"), rows(tmp_path / "split")
    assert [r["step"] for r in b] == [r["step"] for r in a] == list(range(21))  # continued, not duplicated
    for ra, rb in zip(a, b, strict=True):
        for key in ("train/loss", "val/loss", "grad_norm/total", "update/output_change"):
            assert ra.get(key) == rb.get(key), (ra["step"], key)  # bit for bit
    assert whole["final_val_loss"] == second["final_val_loss"]
    assert whole["best_val_loss"] == second["best_val_loss"]
    if peer:  # the one matrix, as the checkpoint stores it: two names, one tensor, loaded back tied
        state = load_checkpoint(tmp_path / "split" / CKPT_NAME)["model"]
        assert torch.equal(state["lm_head.weight"], state["tok_emb.weight"])
        untied = normtrain.build_model(normtrain.compose([o for o in overrides if o != "model.tie_embeddings=true"]))
        assert untied.num_params() - second["n_params"] == 256 * 32  # the summary counts the one matrix once


def test_resume_none_starts_over_and_a_bad_path_is_reported(tiny, tmp_path):
    overrides = [*tiny, "train.max_steps=6"]
    normtrain.train(normtrain.compose(overrides), run_dir=tmp_path)
    again = normtrain.train(normtrain.compose([*overrides, "train.resume=none"]), run_dir=tmp_path)
    assert again["resumed_from_step"] is None and [r["step"] for r in rows(tmp_path)][0] == 0
    with pytest.raises(normtrain.util.errors.ConfigError, match="no checkpoint there"):
        normtrain.train(normtrain.compose([*overrides, "train.resume=/no/such/ckpt.pt"]), run_dir=tmp_path / "x")


def test_checkpoint_holds_everything_and_loads_into_a_plain_model(tiny, tmp_path):
    cfg = normtrain.compose([*tiny, "train.max_steps=4", "train.ckpt_every=2"])
    normtrain.train(cfg, run_dir=tmp_path)
    state = load_checkpoint(tmp_path / CKPT_NAME)
    assert {"model", "optimizer", "step", "sampler", "rng", "monitor", "val_losses", "config"} <= set(state)
    assert set(state["rng"]) >= {"python", "numpy", "torch"}
    assert not any(k.startswith(("_orig_mod.", "module.")) for k in state["model"])
    GPT(model_config(cfg)).load_state_dict(state["model"])
    assert not list(tmp_path.glob(".ckpt.pt.*"))  # no temp file left behind


@pytest.mark.slow
def test_compile_with_monitor_does_not_recompile(tiny, tmp_path):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    cfg = normtrain.compose([*tiny, "train.max_steps=12", "monitor.every=3", "train.compile=true"])
    summary = normtrain.train(cfg, run_dir=tmp_path)
    assert summary["status"] == "completed"
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])  # 5 log steps (the last, 11), one graph
    assert "grad_norm/layer_1" in rows(tmp_path)[0] and "act_std/layer_1" in rows(tmp_path)[3]
    state = load_checkpoint(tmp_path / CKPT_NAME)
    assert not any(k.startswith("_orig_mod.") for k in state["model"])


@pytest.mark.slow
def test_sigterm_to_the_cli_checkpoints_and_a_rerun_resumes(tiny, tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "normtrain", *tiny, "train.max_steps=100000", "train.eval_every=0",
            f"hydra.run.dir={out}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        metrics = out / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["steps"] > 0
    assert load_checkpoint(out / CKPT_NAME)["step"] == summary["steps"]

    done = subprocess.run([*args[:-3], f"train.max_steps={summary['steps'] + 7}", "train.eval_every=0",
                           f"hydra.run.dir={out}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    final = json.loads((out / "summary.json").read_text())
    assert final["status"] == "completed" and final["resumed_from_step"] == summary["steps"]
    steps = [r["step"] for r in rows(out)]
    assert steps == sorted(set(steps)) and steps[-1] == summary["steps"] + 7


def test_first_signal_asks_to_stop_second_stops_at_once():
    from normtrain.training.preemption import StopRequested

    before = signal.getsignal(signal.SIGTERM)
    with StopRequested() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested == "SIGTERM"
        with pytest.raises(KeyboardInterrupt, match="second signal"):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored


def test_bookkeeping_is_one_list_for_a_resume_and_for_reusing_a_result():
    """normtrain.training.resume.BOOKKEEPING: a resume accepts a change of them inside FIXED groups (data.cache_dir) and
    normtrain-reproduce reuses a finished run across them; a change of what the run computes is neither."""
    from normtrain.config import to_container
    from normtrain.study.grid import same_run
    from normtrain.training.resume import config_changes
    from normtrain.util.errors import CheckpointError

    old = to_container(normtrain.compose(["data.cache_dir=/a", "logger=wandb"]))
    kept = to_container(normtrain.compose(["data.cache_dir=/b", "logger=csv", "train.progress=false"]))
    assert config_changes(old, kept, step=5)["data.cache_dir"] == ["/a", "/b"]  # not refused
    assert same_run(old, kept)
    changed = to_container(normtrain.compose(["data.cache_dir=/a", "logger=wandb", "data.val_fraction=0.2"]))
    assert not same_run(old, changed)
    with pytest.raises(CheckpointError, match="data.val_fraction"):
        config_changes(old, changed, step=5)
