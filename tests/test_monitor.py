import math

import torch

from normtrain.model import GPT, GPTConfig
from normtrain.monitor import DivergenceGuard, Monitor


def setup(every=1):
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=3, d_model=16, n_heads=2, seq_len=8))
    params = list(model.parameters())
    return model, params, Monitor(model.blocks, params, every=every, divergence_factor=3.0)


def test_per_layer_statistics_match_a_direct_computation():
    model, params, monitor = setup()
    x = torch.randint(0, 256, (2, 8))
    outputs = []
    hooks = [b.register_forward_hook(lambda m, i, o: outputs.append(o.detach())) for b in model.blocks]
    with monitor.capture(0):
        _, loss = model(x, x)
    loss.backward()
    monitor.after_backward(0, loss)
    for h in hooks:
        h.remove()
    metrics, diverged = monitor.read()
    assert diverged is None
    assert metrics["train/loss"] == loss.item()
    for i, block in enumerate(model.blocks):
        expected = math.sqrt(sum(p.grad.pow(2).sum().item() for p in block.parameters()))
        assert math.isclose(metrics[f"grad_norm/layer_{i}"], expected, rel_tol=1e-5)
        assert math.isclose(metrics[f"act_mean/layer_{i}"], outputs[i].mean().item(), rel_tol=1e-4, abs_tol=1e-6)
        assert math.isclose(metrics[f"act_std/layer_{i}"], outputs[i].std().item(), rel_tol=1e-4)
    total = math.sqrt(sum(p.grad.pow(2).sum().item() for p in params))
    assert math.isclose(metrics["grad_norm/total"], total, rel_tol=1e-5)
    assert "grad_norm/layer_3" not in metrics


def test_nothing_is_collected_off_log_steps():
    model, _, monitor = setup(every=10)
    x = torch.randint(0, 256, (2, 8))
    with monitor.capture(3):
        _, loss = model(x, x)
    loss.backward()
    monitor.after_backward(3, loss)
    assert monitor.read() == ({}, None)
    assert not model.blocks[0]._forward_hooks


def test_divergence_guard_flags_the_first_bad_step():
    guard = DivergenceGuard(3.0, torch.device("cpu"))
    for step, loss in enumerate([5.0, 4.0, 16.0, float("nan"), 2.0]):
        guard.observe(step, torch.tensor(loss))
    assert guard.diverged_at.item() == 2
    guard = DivergenceGuard(3.0, torch.device("cpu"))
    for step, loss in enumerate([5.0, 4.0, float("inf")]):
        guard.observe(step, torch.tensor(loss))
    assert guard.diverged_at.item() == 2
