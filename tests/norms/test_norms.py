import math

import pytest
import torch
import torch.nn.functional as F

from normtrain.norms import NORMS, NormSpec, build_norm


def randomize(norm):
    with torch.no_grad():
        for p in norm.parameters():
            p.normal_(1.0, 0.3)
    return norm


def test_layernorm_matches_torch():
    x = torch.randn(3, 5, 48)
    norm = randomize(build_norm(NormSpec("layernorm", eps=1e-5), 48))
    torch.testing.assert_close(norm(x), F.layer_norm(x, (48,), norm.weight, norm.bias, 1e-5))


def test_layernorm_without_affine_has_no_parameters():
    norm = build_norm(NormSpec("layernorm", eps=1e-5, affine=False), 16)
    assert list(norm.parameters()) == []
    x = torch.randn(4, 16) * 7 + 3
    y = norm(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(4), atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rmsnorm_matches_torch_in_fp32_and_keeps_dtype(dtype):
    x = (torch.randn(4, 7, 64) * 3).to(dtype)
    norm = randomize(build_norm(NormSpec("rmsnorm", eps=1e-6, impl="torch"), 64))
    y = norm(x)
    assert y.dtype == dtype
    ref = F.rms_norm(x.float(), (64,), norm.weight.float(), 1e-6)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]
    torch.testing.assert_close(y.float(), ref, atol=tol, rtol=tol)


def test_prmsnorm_with_p_one_equals_rmsnorm():
    x = torch.randn(6, 40)
    full = build_norm(NormSpec("rmsnorm"), 40)
    partial = build_norm(NormSpec("prmsnorm", p=1.0), 40)
    torch.testing.assert_close(partial(x), full(x))


def test_prmsnorm_uses_the_first_ceil_p_d_features():
    d, p = 64, 0.0625
    x = torch.randn(5, d)
    norm = build_norm(NormSpec("prmsnorm", p=p, eps=1e-6), d)
    k = math.ceil(p * d)
    assert norm.n_stat == k == 4
    expected = x * torch.rsqrt(x[:, :k].pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(norm(x), expected)
    assert build_norm(NormSpec("prmsnorm", p=0.001), 16).n_stat == 1  # keep at least one feature


@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("alpha", [1.0, 2.5])
def test_add_norm_is_norm_of_scaled_shortcut_plus_branch(name, alpha):
    norm = randomize(build_norm(NormSpec(name), 32))
    x, r = torch.randn(3, 32), torch.randn(3, 32)
    y, s = norm.add_norm(x, residual=r, alpha=alpha)
    torch.testing.assert_close(s, alpha * r + x)
    torch.testing.assert_close(y, norm(alpha * r + x))


def test_rmsnorm_zero_rows_stay_finite():
    norm = build_norm(NormSpec("rmsnorm"), 8)
    assert torch.equal(norm(torch.zeros(2, 8)), torch.zeros(2, 8))


def test_unknown_norm_lists_allowed():
    with pytest.raises(ValueError, match="allowed: batchnorm, batchnorm_causal, derf, dyt, l2, layernorm, prmsnorm, "
                                         "rmsnorm"):
        build_norm(NormSpec("groupnorm"), 8)


def test_batchnorm_normalizes_over_batch_and_positions_and_leaks_the_future():
    d = 16
    norm = build_norm(NormSpec("batchnorm", eps=1e-5), d)
    x = torch.randn(4, 10, d) * 3 + 1
    expected = torch.nn.functional.batch_norm(x.reshape(-1, d), None, None, training=True, eps=1e-5)
    torch.testing.assert_close(norm(x), expected.reshape(x.shape))
    changed = x.clone()
    changed[:, -1] += 50.0  # only the last position changes
    assert not torch.allclose(norm(x)[:, :-1], norm(changed)[:, :-1])  # training mode: earlier outputs move
    norm.eval()  # running statistics: each position depends on itself only
    torch.testing.assert_close(norm(x)[:, :-1], norm(changed)[:, :-1])


def test_causal_batchnorm_uses_the_batch_and_positions_up_to_t_only():
    d = 8
    norm = build_norm(NormSpec("batchnorm_causal", eps=1e-5), d)
    with torch.no_grad():
        norm.bn.weight.uniform_(0.5, 2.0), norm.bn.bias.uniform_(-1, 1)  # a gain mix-up would show
    x = (torch.randn(3, 7, d) * 2 + 0.5).requires_grad_()
    y = norm(x)
    for t in range(7):  # the formula, position by position: statistics over batch × positions 0…t
        seen = x[:, : t + 1].reshape(-1, d)
        mean, var = seen.mean(0), seen.var(0, unbiased=False)
        expected = (x[:, t] - mean) / torch.sqrt(var + 1e-5) * norm.bn.weight + norm.bn.bias
        torch.testing.assert_close(y[:, t], expected)
    changed = x.detach().clone()
    changed[:, -1] += 50.0  # a future token moves nothing before it
    torch.testing.assert_close(norm(x)[:, :-1], norm(changed)[:, :-1])
    y.square().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert norm.bn.num_batches_tracked.item() == 3  # running statistics tracked as BatchNorm does
    norm.eval()
    torch.testing.assert_close(norm(x), torch.nn.functional.batch_norm(
        x.reshape(-1, d), norm.bn.running_mean, norm.bn.running_var, norm.bn.weight, norm.bn.bias, False, 0.0,
        1e-5).reshape(x.shape))


def test_dyt_is_gamma_tanh_alpha_x_plus_beta():
    d = 24
    norm = build_norm(NormSpec("dyt", alpha_init=0.5), d)
    assert norm.alpha.shape == (1,) and norm.alpha.item() == 0.5  # the paper's default init
    assert torch.equal(norm.weight, torch.ones(d)) and torch.equal(norm.bias, torch.zeros(d))
    x = torch.randn(3, 7, d) * 4
    torch.testing.assert_close(norm(x), torch.tanh(0.5 * x))
    randomize(norm)
    expected = norm.weight * torch.tanh(norm.alpha * x) + norm.bias
    torch.testing.assert_close(norm(x), expected)
    assert norm(x * 1e6).abs().max() <= (norm.weight.abs() + norm.bias.abs()).max() + 1e-5  # squashed, not scaled
    bare = build_norm(NormSpec("dyt", alpha_init=2.0, affine=False), d)
    assert [n for n, _ in bare.named_parameters()] == ["alpha"]
    torch.testing.assert_close(bare(x), torch.tanh(2.0 * x))


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm", "dyt"])
def test_depth_scaled_norm_divides_by_sqrt_of_the_blocks_depth(name):
    spec = NormSpec(name, depth_scaled=True)
    x, r = torch.randn(3, 32), torch.randn(3, 32)
    assert type(build_norm(spec, 32)) is NORMS[name]  # no depth (final norm, QK-norm): not scaled
    for layer in (1, 4, 9):
        norm = randomize(build_norm(spec, 32, layer=layer))
        assert norm.scale == pytest.approx(layer**-0.5)
        torch.testing.assert_close(norm(x), norm.inner(x) / math.sqrt(layer))
        y, s = norm.add_norm(x, residual=r, alpha=2.0)
        torch.testing.assert_close(s, 2.0 * r + x)
        torch.testing.assert_close(y, norm.inner(2.0 * r + x) / math.sqrt(layer))
    assert type(build_norm(NormSpec(name), 32, layer=4)) is NORMS[name]  # the switch is off by default


@pytest.mark.parametrize("name", ["layernorm", "dyt", "derf"])
@pytest.mark.parametrize("gain", ["vector", "zero_centred", "scalar"])
def test_bias_false_keeps_the_gain_and_drops_beta(name, gain):
    """norm.bias=false (nanoGPT's bias=False, PaLM): γ ⊙ N(x) with no + β; null keeps the norm's β."""
    x = torch.randn(3, 5, 16) * 2 + 1
    with_beta = randomize(build_norm(NormSpec(name, gain=gain, eps=1e-5), 16))
    without = build_norm(NormSpec(name, gain=gain, eps=1e-5, bias=False), 16)
    assert without.bias is None and with_beta.bias.shape == (16,)
    assert {n for n, _ in without.named_parameters()} == {n for n, _ in with_beta.named_parameters()} - {"bias"}
    with torch.no_grad():
        for n, p in without.named_parameters():
            p.copy_(dict(with_beta.named_parameters())[n])
    torch.testing.assert_close(without(x), with_beta(x) - with_beta.bias)  # the same function, minus β
    s = torch.randn_like(x)
    torch.testing.assert_close(without.add_norm(x, s)[0], without(x + s))


def test_bias_false_is_the_convention_of_norms_without_beta_and_true_needs_a_beta():
    for name in ("rmsnorm", "prmsnorm", "l2"):
        plain, explicit = build_norm(NormSpec(name), 16), build_norm(NormSpec(name, bias=False), 16)
        assert plain.bias is None and explicit.bias is None
        with pytest.raises(ValueError, match=f"norm '{name}' takes bias=False \\(or None: its convention\\), not True"):
            build_norm(NormSpec(name, bias=True), 16)
    with pytest.raises(ValueError, match="norm 'batchnorm' takes bias=True"):
        build_norm(NormSpec("batchnorm", bias=False), 16)
    assert build_norm(NormSpec("layernorm", bias=True), 16).bias is not None
    assert build_norm(NormSpec("layernorm", gain="none", bias=False), 16).bias is None  # neither γ nor β
    assert NormSpec("layernorm", bias=False).without_gain().bias is None
