"""The newer placements on built models: which norms exist where, which matrices got which init, and each
block's formula (Peri-LN, OLMo-2 reordered, Mix-LN, Sub-LN, Admin, ReZero, no norm)."""

import math

import pytest
import torch

from normtrain.model import GPT, PLACEMENTS, GPTConfig, NormSpec
from normtrain.model.placements import PostNormBlock, PreNormBlock
from normtrain.norms import LayerNorm, Norm

D, H, T = 32, 4, 10
LN = NormSpec("layernorm", eps=1e-5, affine=False)


def model(placement, n_layers=4, norm=LN, **kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layers=n_layers, d_model=D, n_heads=H, seq_len=T, norm=norm, placement=placement, **kw))


def norm_names(module):
    return sorted(name for name, m in module.named_modules() if isinstance(m, Norm))


@pytest.fixture
def x():
    return torch.randn(2, T, D, generator=torch.Generator().manual_seed(1)) * 3


@pytest.mark.parametrize("placement,norms,final", [
    ("peri", ["norm1", "norm2", "out_norm1", "out_norm2"], True),
    ("reorder", ["norm1", "norm2"], True),
    ("subln", ["attn.inner_norm", "mlp.inner_norm", "norm1", "norm2"], True),
    ("admin", ["norm1", "norm2"], False),
    ("rezero", [], False),
    ("none", [], False),
])
def test_which_norms_exist_where(placement, norms, final):
    m = model(placement)
    assert all(norm_names(b) == norms for b in m.blocks)
    assert (m.final_norm is not None) == final
    assert all(b.name == placement for b in m.blocks)


def test_peri_normalizes_the_sublayer_input_and_output(x):
    b = model("peri").blocks[0]
    h = x + b.out_norm1(b.attn(b.norm1(x)))
    torch.testing.assert_close(b(x), h + b.out_norm2(b.mlp(b.norm2(h))))
    added = b(x) - h  # what the MLP sublayer adds is an LN output: zero mean, unit variance per token
    torch.testing.assert_close(added.var(-1, unbiased=False), torch.ones(2, T), atol=1e-3, rtol=0)


def test_reorder_puts_the_norm_after_the_sublayer(x):
    b = model("reorder").blocks[0]
    h = x + b.norm1(b.attn(x))
    torch.testing.assert_close(b(x), h + b.norm2(b.mlp(h)))
    assert not torch.allclose(b(x), x + b.attn(b.norm1(x)) + b.mlp(b.norm2(x)), atol=1e-3)  # not Pre-LN


@pytest.mark.parametrize("n_layers,fraction,n_post", [(8, 0.25, 2), (4, 0.25, 1), (3, 0.25, 0), (100, 0.57, 57),
                                                      (6, 0.0, 0), (6, 1.0, 6)])
def test_mix_is_post_ln_then_pre_ln_by_depth(n_layers, fraction, n_post):
    m = model("mix", n_layers=n_layers, post_fraction=fraction)
    kinds = [type(b) for b in m.blocks]
    assert kinds == [PostNormBlock] * n_post + [PreNormBlock] * (n_layers - n_post)
    assert (m.final_norm is not None) == (n_post < n_layers)  # a Pre-LN block last leaves the stream unnormed
    assert m.alpha == 1.0 and all(b.alpha == 1.0 for b in m.blocks)


def xavier_std(w, gain):
    fan_out, fan_in = w.shape
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


@pytest.mark.parametrize("mlp,matrices", [("swiglu", ("gate", "up", "down")), ("gelu", ("up", "down"))])
def test_subln_norms_before_out_proj_and_down_and_scales_the_init_up(mlp, matrices, x):
    L = 12
    torch.manual_seed(0)
    m = GPT(GPTConfig(n_layers=L, d_model=256, n_heads=4, seq_len=8, mlp=mlp, placement="subln", norm=LN))
    gain = math.sqrt(math.log(2 * L))  # torchscale, subln=True, decoder-only
    assert m.beta == pytest.approx(gain) and gain == pytest.approx(1.7827, abs=1e-4)
    for block in (m.blocks[0], m.blocks[-1]):
        assert block.mlp.inner_norm.dim == block.mlp.down.in_features and block.attn.inner_norm.dim == 256
        scaled = [block.attn.v_proj, block.attn.out_proj, *(getattr(block.mlp, n) for n in matrices)]
        for proj, g in [(block.attn.q_proj, 1.0), (block.attn.k_proj, 1.0), *((p, gain) for p in scaled)]:
            assert proj.weight.std().item() == pytest.approx(xavier_std(proj.weight, g), rel=0.03)


def test_subln_inner_norms_sit_before_the_output_matrices():
    b = model("subln").blocks[0]
    seen = {}
    b.attn.out_proj.register_forward_pre_hook(lambda mod, args: seen.update(out=args[0]))
    b.mlp.down.register_forward_pre_hook(lambda mod, args: seen.update(down=args[0]))
    b(torch.randn(2, T, D))
    for key in ("out", "down"):  # the matrices read LN outputs: zero mean, unit variance per token
        torch.testing.assert_close(seen[key].mean(-1), torch.zeros(seen[key].shape[:-1]), atol=1e-5, rtol=0)
        torch.testing.assert_close(seen[key].var(-1, unbiased=False), torch.ones(seen[key].shape[:-1]), atol=1e-3,
                                   rtol=0)
    x = torch.randn(2, T, D)
    h = x + b.attn.out_proj(b.attn.inner_norm(_attention_heads(b.attn, b.norm1(x))))
    hidden = torch.nn.functional.silu(b.mlp.gate(b.norm2(h))) * b.mlp.up(b.norm2(h))
    torch.testing.assert_close(b(x), h + b.mlp.down(b.mlp.inner_norm(hidden)))


def _attention_heads(attn, x):
    """The heads' concatenated output before out_proj, computed explicitly."""
    B, T_, d = x.shape
    q, k = attn._qk(x)
    v = attn.v_proj(x).view(B, T_, attn.n_heads, attn.head_dim).transpose(1, 2)
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).reshape(B, T_, d)


def test_admin_profiling_sets_omega_from_the_variances_of_the_sublayers_before(x):
    m = model("admin", n_layers=3)
    assert all(torch.equal(b.omega1, torch.ones(D)) for b in m.blocks)  # before profiling: plain Post-LN
    idx = torch.randint(0, 256, (4, T), generator=torch.Generator().manual_seed(2))
    expected, omega, h = [], 1.0, m.tok_emb(idx).detach()
    with torch.no_grad():  # ω_1 = 1, ω_{i+1}² = Var[ω_i·x_i] + Var[f_i(x_i)], sublayer by sublayer
        for b in m.blocks:
            for f, norm in ((b.attn, b.norm1), (b.mlp, b.norm2)):
                out = f(h)
                expected.append(omega)
                nxt = math.sqrt((omega * h).var(correction=0).item() + out.var(correction=0).item())
                h, omega = norm(omega * h + out), nxt
    assert m.data_init(idx) is True
    got = [v.item() for b in m.blocks for v in (b.omega1[0], b.omega2[0])]
    assert got == pytest.approx(expected, rel=1e-5)
    assert got[0] == 1.0 and got[-1] > got[1] > 1.0  # the shortcut weight grows with the depth profiled
    assert all(b.profile is None for b in m.blocks)
    assert "blocks.0.omega1" in m.state_dict() and m.blocks[0].omega1.requires_grad  # saved and learned
    b = m.blocks[1]
    h = b.norm1(b.omega1 * x + b.attn(x))
    torch.testing.assert_close(b(x), b.norm2(b.omega2 * h + b.mlp(h)))


def test_data_init_is_a_no_op_for_placements_that_need_none():
    m = model("post")
    before = {k: v.clone() for k, v in m.state_dict().items()}
    assert m.data_init(torch.randint(0, 256, (2, T))) is False
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert [k for k, c in PLACEMENTS.items() if c.data_dependent] == ["admin"]


def test_rezero_starts_as_the_identity_and_learns_its_gates(x):
    m = model("rezero")
    for b in m.blocks:
        assert b.a1.shape == (1,) and b.a1.item() == 0.0 and b.a2.item() == 0.0
        torch.testing.assert_close(b(x), x)
    idx = torch.randint(0, 256, (2, T))
    torch.testing.assert_close(m.hidden(idx), m.tok_emb(idx))  # the whole stack is the identity at init
    m(idx, idx)[1].backward()
    b = m.blocks[0]
    assert b.a1.grad.abs().item() > 0 and b.attn.q_proj.weight.grad.abs().sum().item() == 0  # only a moves first
    with torch.no_grad():
        b.a1.fill_(0.5), b.a2.fill_(-0.25)
    h = x + 0.5 * b.attn(x)
    torch.testing.assert_close(b(x), h - 0.25 * b.mlp(h))


def test_no_norm_is_the_plain_residual(x):
    b = model("none").blocks[0]
    h = x + b.attn(x)
    torch.testing.assert_close(b(x), h + b.mlp(h))
    assert not list(b.parameters(recurse=False))


def test_depth_scaled_norms_scale_block_l_by_one_over_sqrt_l(x):
    plain = model("peri")
    scaled = model("peri", norm=NormSpec("layernorm", eps=1e-5, affine=False, depth_scaled=True))
    for ell, (b0, b1) in enumerate(zip(plain.blocks, scaled.blocks, strict=True), start=1):
        for name in ("norm1", "norm2", "out_norm1", "out_norm2"):
            assert getattr(b1, name).layer == ell and isinstance(getattr(b1, name).inner, LayerNorm)
            torch.testing.assert_close(getattr(b1, name)(x), getattr(b0, name)(x) / math.sqrt(ell))
    assert isinstance(scaled.final_norm, LayerNorm)  # the final norm is never scaled
    pre = model("pre", norm=NormSpec("rmsnorm", impl="torch", depth_scaled=True)).blocks[2]
    h = x + pre.attn(pre.norm1.inner(x) / math.sqrt(3))  # LayerNorm Scaling's Pre-LN block, ℓ = 3
    torch.testing.assert_close(pre(x), h + pre.mlp(pre.norm2.inner(h) / math.sqrt(3)))


def test_qk_norm_normalizes_each_head_before_rope():
    torch.manual_seed(0)
    m = GPT(GPTConfig(n_layers=1, d_model=D, n_heads=H, seq_len=T, norm=NormSpec("rmsnorm", impl="torch"),
                      qk_norm=True))
    attn = m.blocks[0].attn
    assert attn.q_norm.weight.shape == (D // H,) and attn.k_norm.weight.shape == (D // H,)
    assert m.blocks[0].norm1.__class__ is attn.q_norm.__class__
    x = torch.randn(1, T, D) * 10
    q, k = attn._qk(x)
    # RoPE rotates pairs of features, so each head's rms (taken before it) survives it: 1 with γ = 1
    torch.testing.assert_close(q.square().mean(-1), torch.ones(1, H, T), atol=1e-4, rtol=0)
    torch.testing.assert_close(k.square().mean(-1), torch.ones(1, H, T), atol=1e-4, rtol=0)
    logit_max = attn.logit_stats(x).head_max.max()
    assert logit_max.item() <= math.sqrt(D // H) + 1e-4  # |q·k|/√d ≤ ‖q‖‖k‖/√d = √d per head
    m.blocks[0].attn.q_norm = m.blocks[0].attn.k_norm = None
    assert attn.logit_stats(x).head_max.max().item() > 10 * math.sqrt(D // H)  # without it the logits follow ‖x‖²
