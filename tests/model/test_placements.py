"""Each placement's block computes its paper's formula; DeepNorm's α, β and init follow Wang et al. 2022."""

import math

import pytest
import torch

from normtrain.model import GPT, PLACEMENTS, GPTConfig, NormSpec

D, H, T = 32, 4, 10
LN = NormSpec("layernorm", eps=1e-5, affine=False)


def make_block(placement, norm=LN, n_layers=12, **kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layers=n_layers, d_model=D, n_heads=H, seq_len=T, norm=norm, placement=placement,
                         **kw)).blocks[0]


@pytest.fixture
def x():
    return torch.randn(2, T, D, generator=torch.Generator().manual_seed(1)) * 3


def test_pre_is_x_plus_branch_of_normed_x(x):
    b = make_block("pre")
    h = x + b.attn(b.norm1(x))
    torch.testing.assert_close(b(x), h + b.mlp(b.norm2(h)))


def test_post_is_norm_of_x_plus_branch(x):
    b = make_block("post")
    h = b.norm1(x + b.attn(x))
    torch.testing.assert_close(b(x), b.norm2(h + b.mlp(h)))


def test_deepnorm_scales_the_shortcut_and_normalizes_after_the_add(x):
    b = make_block("deepnorm", n_layers=12)
    a = b.alpha
    assert a == pytest.approx(2.213, abs=1e-3)
    h = b.norm1(a * x + b.attn(x))
    expected = b.norm2(a * h + b.mlp(h))
    out = b(x)
    torch.testing.assert_close(out, expected)
    # trap 1: the norm really comes after the add, so every token's output is normalized
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, T), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(2, T), atol=1e-3, rtol=0)
    # trap 2: α multiplies the shortcut, not the branch
    h_wrong = b.norm1(x + a * b.attn(x))
    assert not torch.allclose(out, b.norm2(h_wrong + a * b.mlp(h_wrong)), atol=1e-3)


@pytest.mark.parametrize("n_layers,alpha,beta", [(12, 2.213, 0.320), (24, 2.632, 0.269), (48, 3.130, 0.226),
                                                 (96, 3.722, 0.190)])
def test_deepnorm_alpha_beta_for_decoder_only(n_layers, alpha, beta):
    a, b = PLACEMENTS["deepnorm"].scaling(n_layers)
    assert (a, b) == (pytest.approx(alpha, abs=1e-3), pytest.approx(beta, abs=1e-3))
    assert PLACEMENTS["pre"].scaling(n_layers) == PLACEMENTS["post"].scaling(n_layers) == (1.0, 1.0)


def test_deepnorm_init_statistics_match_the_formulas():
    d, L = 256, 24
    model = GPT(GPTConfig(n_layers=L, d_model=d, n_heads=4, seq_len=8, mlp="swiglu", placement="deepnorm"))
    beta = (8 * L) ** -0.25
    assert model.beta == pytest.approx(beta)

    def xavier_std(w, gain):
        fan_out, fan_in = w.shape
        return gain * math.sqrt(2.0 / (fan_in + fan_out))

    for block in (model.blocks[0], model.blocks[-1]):
        for proj, gain in [(block.attn.q_proj, 1.0), (block.attn.k_proj, 1.0), (block.attn.v_proj, beta),
                           (block.attn.out_proj, beta), (block.mlp.gate, beta), (block.mlp.up, beta),
                           (block.mlp.down, beta)]:
            w = proj.weight
            assert w.std().item() == pytest.approx(xavier_std(w, gain), rel=0.03)
            assert abs(w.mean().item()) < 0.05 * xavier_std(w, gain) * 10


def test_every_layer_is_initialized_independently():
    model = GPT(GPTConfig(n_layers=4, d_model=D, n_heads=H, seq_len=T, placement="deepnorm"))
    w = [b.attn.v_proj.weight for b in model.blocks]
    assert all(not torch.equal(w[0], other) for other in w[1:])


def test_alpha_beta_overrides_win_over_auto():
    model = GPT(GPTConfig(n_layers=6, d_model=D, n_heads=H, seq_len=T, placement="post", alpha=2.0, beta=0.5))
    assert (model.alpha, model.beta) == (2.0, 0.5)
    assert all(b.alpha == 2.0 for b in model.blocks)


@pytest.mark.parametrize("placement,final", [("pre", True), ("post", False), ("deepnorm", False)])
def test_final_norm_only_for_pre(placement, final):
    model = GPT(GPTConfig(n_layers=2, d_model=D, n_heads=H, seq_len=T, placement=placement))
    assert (model.final_norm is not None) == final
