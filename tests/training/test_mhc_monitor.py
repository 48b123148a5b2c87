"""placement=mhc in the training loop: it trains from the CLI and in process, and the per-layer diagnostics cover
each of its streams (the monitor asks the block for them through ``Block.streams`` and ``layer_diagnostics``)."""

import json
import math

import pytest
import torch
from test_cli import run_cli

import normtrain
from normtrain.model import GPT, GPTConfig
from normtrain.training.monitor import Monitor

N_LAYERS, N_STREAMS = 3, 4


def test_each_stream_has_its_own_per_layer_statistics():
    """act_rms/stream_j/layer_i and act_absmax/stream_j/layer_i are the rms and max |x| of stream j of block i's
    output alone; the block's mappings arrive as mhc_pre/stream_j/layer_i, ..., mhc_res_gain/layer_i."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=N_LAYERS, d_model=16, n_heads=2, seq_len=8, placement="mhc", streams=N_STREAMS))
    monitor = Monitor(model.blocks, list(model.parameters()), every=1, divergence_factor=3.0)
    outputs = []
    hooks = [b.register_forward_hook(lambda m, i, o: outputs.append(o.detach())) for b in model.blocks]
    x = torch.randint(0, 256, (2, 8))
    with monitor.capture(0):
        _, loss = model(x, x)
    loss.backward()
    monitor.after_backward(0, loss)
    for h in hooks:
        h.remove()
    metrics, _ = monitor.read()
    for i, out in enumerate(outputs):
        for j, stream in enumerate(out.unflatten(-1, (N_STREAMS, 16)).unbind(-2)):
            assert math.isclose(metrics[f"act_rms/stream_{j}/layer_{i}"], stream.pow(2).mean().sqrt().item(),
                                rel_tol=1e-5)
            assert metrics[f"act_absmax/stream_{j}/layer_{i}"] == stream.abs().max().item()
        assert math.isclose(metrics[f"act_rms/layer_{i}"], out.pow(2).mean().sqrt().item(), rel_tol=1e-5)
        stats = model.blocks[i].layer_diagnostics()
        for j in range(N_STREAMS):
            assert math.isclose(metrics[f"mhc_pre/stream_{j}/layer_{i}"], stats["mhc_pre"][j].item(), rel_tol=1e-6)
            assert math.isclose(metrics[f"mhc_post/stream_{j}/layer_{i}"], stats["mhc_post"][j].item(), rel_tol=1e-6)
        assert metrics[f"mhc_res_diag/layer_{i}"] == pytest.approx(1 / N_STREAMS, abs=0.01)  # near-uniform at init
        assert metrics[f"mhc_res_gain/layer_{i}"] == pytest.approx(1.0, abs=1e-3)
    assert not any("stream_" in k and f"layer_{N_LAYERS}" in k for k in metrics)


def test_a_single_stream_model_logs_no_stream_metrics():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=16, n_heads=2, seq_len=8))
    monitor = Monitor(model.blocks, list(model.parameters()), every=1, divergence_factor=3.0)
    with monitor.capture(0):
        _, loss = model(torch.randint(0, 256, (2, 8)), torch.randint(0, 256, (2, 8)))
    loss.backward()
    monitor.after_backward(0, loss)
    assert not [k for k in monitor.read()[0] if "stream_" in k or k.startswith("mhc_")]


def test_mhc_trains_with_every_norm_type_and_logs_its_streams(tiny, tmp_path):
    """10 steps of placement=mhc with LayerNorm (the summary and metrics.jsonl hold the streams' values), then the
    same model resumed from its checkpoint (the mappings are in the state dict)."""
    overrides = [*tiny, "placement=mhc", "placement.streams=3", "norm=layernorm", "train.max_steps=10",
                 "train.eval_every=0"]
    summary = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path)
    assert summary["status"] == "completed" and math.isfinite(summary["final_val_loss"])
    assert summary["config"]["placement"]["streams"] == 3
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    logged = next(r for r in rows if "act_rms/stream_2/layer_1" in r)
    assert all(math.isfinite(logged[f"{k}/stream_{j}/layer_{i}"]) for k in ("act_rms", "mhc_pre", "mhc_post")
               for j in range(3) for i in range(2))
    resumed = normtrain.train(normtrain.compose([*overrides[:-2], "train.max_steps=12", "train.eval_every=0"]),
                              run_dir=tmp_path)
    assert resumed["resumed_from_step"] == 10 and resumed["status"] == "completed"


@pytest.mark.slow
@pytest.mark.parametrize("norm", ["rmsnorm", "dyt"])
def test_mhc_trains_from_the_cli(norm, tiny, tmp_path):
    out = tmp_path / "run"
    proc = run_cli([*tiny, "placement=mhc", f"norm={norm}", "train.max_steps=10", f"hydra.run.dir={out}"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["config"]["placement"]["streams"] == 4
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    first = next(r["val/loss"] for r in rows if "val/loss" in r)
    assert summary["final_val_loss"] < first  # it learns


def test_a_bad_number_of_streams_exits_2_with_what_is_allowed(tiny, tmp_path):
    proc = run_cli([*tiny, "placement=mhc", "placement.streams=0", f"hydra.run.dir={tmp_path / 'run'}"],
                   cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "placement.streams=0: must be at least 1" in proc.stderr
