import inspect
import math
from dataclasses import fields

import pytest
import torch

from normtrain.config import MonitorSchema
from normtrain.model import GPT, GPTConfig
from normtrain.training.monitor import SWITCHES, DivergenceGuard, Monitor


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


def test_attention_entropy_matches_explicit_softmax():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=1, d_model=16, n_heads=2, seq_len=8, pos="learned"))
    attn = model.blocks[0].attn
    x = torch.randn(1, 8, 16)
    q = attn.q_proj(x).view(1, 8, 2, 8).transpose(1, 2)
    k = attn.k_proj(x).view(1, 8, 2, 8).transpose(1, 2)
    scores = (q @ k.transpose(-1, -2)) / 8**0.5
    p = torch.softmax(scores.masked_fill(~torch.ones(8, 8, dtype=torch.bool).tril(), float("-inf")), -1)
    expected = -(p * torch.log(p.clamp(min=1e-30))).sum(-1).mean()
    torch.testing.assert_close(attn.logit_stats(x).entropy, expected)
    assert 0 <= attn.logit_stats(x).entropy.item() <= torch.log(torch.tensor(8.0)).item()


def test_update_diagnostics_start_at_zero_and_grow():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=3, d_model=16, n_heads=2, seq_len=8))
    params = list(model.parameters())
    probe_x = torch.randint(0, 256, (2, 8))
    monitor = Monitor(model.blocks, params, every=1, divergence_factor=3.0,
                      probe=lambda: {"hidden": model.hidden(probe_x).detach()})
    opt = torch.optim.Adam(params, lr=1e-2)
    x = torch.randint(0, 256, (4, 8))
    emb_norm = model.tok_emb(x).norm(dim=-1).mean().item()
    rows = []
    for step in range(4):
        with monitor.capture(step):
            _, loss = model(x, x)
        loss.backward()
        monitor.after_backward(step, loss)
        opt.step()
        monitor.after_update(step)
        opt.zero_grad()
        rows.append(monitor.read()[0])
    changes = [r["update/output_change"] for r in rows]
    assert changes[0] == 0.0 and 0 < changes[1] < changes[2] < changes[3]
    for r in rows:
        for i in range(3):
            assert 0 < r[f"update/layer_{i}"] < 1
            assert r[f"resid_norm/layer_{i}"] > 0
            assert 0 < r[f"attn_entropy/layer_{i}"] <= math.log(8) + 1e-6
    # the residual stream entering block 0 is the embedding output
    assert math.isclose(rows[0]["resid_norm/layer_0"], emb_norm, rel_tol=1e-5)


def test_attention_and_output_logit_diagnostics_match_an_explicit_computation():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=16, n_heads=2, seq_len=8, pos="rope", qk_norm=True))
    params = list(model.parameters())
    monitor = Monitor(model.blocks, params, every=1, divergence_factor=3.0)
    x = torch.randint(0, 256, (3, 8))
    inputs = []
    hooks = [b.attn.register_forward_pre_hook(lambda m, a: inputs.append(a[0].detach())) for b in model.blocks]
    with monitor.capture(0):
        logits, loss = model(x, x)
    monitor.observe_output(0, logits)
    loss.backward()
    monitor.after_backward(0, loss)
    for h in hooks:
        h.remove()
    metrics, _ = monitor.read()
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    for i, block in enumerate(model.blocks):
        q, k = block.attn._qk(inputs[i][:1])  # the batch's first sequence, as attn_entropy
        scores = (q @ k.transpose(-1, -2)) / (16 // 2) ** 0.5
        per_head = [scores[0, h][causal].max().item() for h in range(2)]
        assert per_head[0] != per_head[1]
        for h in range(2):
            assert math.isclose(metrics[f"attn_logit_max/layer_{i}/head_{h}"], per_head[h], rel_tol=1e-5)
        assert math.isclose(metrics[f"attn_logit_max/layer_{i}"], max(per_head), rel_tol=1e-5)
        entropy = block.attn.logit_stats(inputs[i][:1]).entropy.item()
        assert math.isclose(metrics[f"attn_entropy/layer_{i}"], entropy, rel_tol=1e-6)
    log_z = torch.log(torch.exp(logits.double()).sum(-1))
    assert math.isclose(metrics["output/log_z"], log_z.mean().item(), rel_tol=1e-5)
    assert metrics["output/logit_max"] == logits.max().item()
    assert "train/z_loss" not in metrics


def test_each_new_diagnostic_has_its_switch():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=16, n_heads=2, seq_len=8))
    monitor = Monitor(model.blocks, list(model.parameters()), every=1, divergence_factor=3.0, attn_entropy=False,
                      activations=False, attn_logit_max=True, output_log_z=False, output_logit_max=False,
                      residual_stats=False, block_cos=False)
    x = torch.randint(0, 256, (2, 8))
    with monitor.capture(0):
        logits, loss = model(x, x)
    monitor.observe_output(0, logits, z_loss=torch.tensor(2.0))
    metrics, _ = monitor.read()
    per_head = [f"attn_logit_max/layer_{i}/head_{h}" for i in range(2) for h in range(2)]
    assert sorted(metrics) == sorted(["attn_logit_max/layer_0", "attn_logit_max/layer_1", *per_head, "train/z_loss"])
    monitor.attn_logit_max_heads = False
    with monitor.capture(0):
        model(x, x)
    assert sorted(monitor.read()[0]) == ["attn_logit_max/layer_0", "attn_logit_max/layer_1"]
    monitor.recorder.attn_logit_max = False
    with monitor.capture(0):
        logits, loss = model(x, x)
    assert monitor.read()[0] == {}
    assert not model.blocks[0].attn._forward_pre_hooks


def test_per_head_max_logit_is_the_one_qk_clip_reads():
    """With QK-Clip's tracking on, the monitor logs the attention's own per-head S_max (computed once), not a
    recomputation on one sequence: every head of every block equals what ``take_logit_max`` hands QK-Clip."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=24, n_heads=3, seq_len=8))
    for b in model.blocks:
        b.attn.track_logit_max = True
    monitor = Monitor(model.blocks, list(model.parameters()), every=1, divergence_factor=3.0, attn_entropy=False,
                      activations=False, residual_stats=False, block_cos=False)
    x = torch.randint(0, 256, (4, 8))
    with monitor.capture(0):
        model(x, x)
    metrics, _ = monitor.read()
    for i, block in enumerate(model.blocks):
        read_by_clip = block.attn.take_logit_max().tolist()
        logged = [metrics[f"attn_logit_max/layer_{i}/head_{h}"] for h in range(3)]
        assert logged == pytest.approx(read_by_clip, rel=1e-6)
        assert metrics[f"attn_logit_max/layer_{i}"] == pytest.approx(max(read_by_clip), rel=1e-6)
    assert not block.attn._forward_pre_hooks  # no explicit recomputation was hooked in


def test_residual_stream_statistics_match_a_direct_computation():
    """act_rms, act_absmax and block_cos against the block's own input and output, computed independently."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=3, d_model=16, n_heads=2, seq_len=8, placement="post"))
    monitor = Monitor(model.blocks, list(model.parameters()), every=1, divergence_factor=3.0, activations=False,
                      attn_entropy=False, attn_logit_max=False)
    seen = []
    hooks = [b.register_forward_hook(lambda m, a, o: seen.append((a[0].detach(), o.detach()))) for b in model.blocks]
    with monitor.capture(0):
        model(torch.randint(0, 256, (2, 8)))
    for h in hooks:
        h.remove()
    metrics, _ = monitor.read()
    assert sorted({k.split("/")[0] for k in metrics}) == ["act_absmax", "act_rms", "block_cos"]
    for i, (x_in, x_out) in enumerate(seen):
        flat = x_out.double().flatten()
        assert math.isclose(metrics[f"act_rms/layer_{i}"], flat.square().mean().sqrt().item(), rel_tol=1e-5)
        assert metrics[f"act_absmax/layer_{i}"] == flat.abs().max().item()
        cos = [(a @ b / (a.norm() * b.norm())).item() for a, b in zip(x_in.double().reshape(-1, 16),
                                                                      x_out.double().reshape(-1, 16), strict=True)]
        assert math.isclose(metrics[f"block_cos/layer_{i}"], sum(cos) / len(cos), rel_tol=1e-5)
    # Post-LN's stream after a block is the output of a LayerNorm-like RMSNorm with unit gains: rms 1
    assert all(math.isclose(metrics[f"act_rms/layer_{i}"], 1.0, rel_tol=1e-3) for i in range(3))


def test_an_identity_block_has_cosine_one():
    """ReZero starts every block as the identity (a = 0): its input and output streams are parallel."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=16, n_heads=2, seq_len=8, placement="rezero"))
    monitor = Monitor(model.blocks, list(model.parameters()), every=1, divergence_factor=3.0)
    with monitor.capture(0):
        model(torch.randint(0, 256, (2, 8)))
    metrics, _ = monitor.read()
    assert all(math.isclose(metrics[f"block_cos/layer_{i}"], 1.0, abs_tol=1e-6) for i in range(2))
    monitor = Monitor(model.blocks, list(model.parameters()), every=1, divergence_factor=3.0, residual_stats=False,
                      block_cos=False)
    with monitor.capture(0):
        model(torch.randint(0, 256, (2, 8)))
    assert not any(k.startswith(("act_rms", "act_absmax", "block_cos")) for k in monitor.read()[0])


def test_every_switch_of_the_monitor_group_reaches_it():
    """The trainer hands Monitor each ``monitor.*`` on/off key of ``SWITCHES`` by its own name; the other switches
    are the trainer's own (the probe's outputs, the spike score)."""
    assert set(SWITCHES) <= set(inspect.signature(Monitor).parameters)
    switches = {f.name for f in fields(MonitorSchema) if f.type in (bool, "bool")}
    assert switches - set(SWITCHES) == {"output_change", "output_kl", "stream_change", "spike_score"}
