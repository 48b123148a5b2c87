"""mHC (``placement=mhc``) pinned to its paper (Xie et al. 2025, arXiv:2512.24880) and its reference code: the block
and the whole model against eq. 3 and 7–9 as ``formulas.py`` states them, forward and backward, with every
parameter randomized (α, b and the norms' gains; φ is random from its init) and every norm type; H_res doubly
stochastic; the initial values; and, with the ``hf`` extra, transformers' ``DeepseekV4HyperConnection`` computing
the same mappings and the same stream update from the same parameters.
"""

import math

import pytest
import torch
from formulas import MHC_EPS, Model, Params, logits, sinkhorn_knopp
from test_formulas import NORM_TYPES, assert_same_function, build, close, idx_in, leaves, x_in

from normtrain.model import GPT, GPTConfig, MHCBlock
from normtrain.model.hyper_connections import sinkhorn

D, H, T, B = 16, 2, 6, 2


def streams_in(n: int, seed: int = 3) -> torch.Tensor:
    """n different streams (B, T, n·d): a block deep in the model sees them apart, not n copies."""
    return torch.cat([x_in(seed + j).detach() for j in range(n)], dim=-1).requires_grad_()


@pytest.mark.parametrize("norm_type", NORM_TYPES)
def test_each_norm_type_gives_the_mhc_block_its_formula(norm_type):
    """x ← H_res x + H_postᵀ F(N(H_pre x)), F the attention then the MLP; block ℓ = 2 of 3, biases on."""
    block = build("mhc", norm_type, L=3, bias=True).blocks[1]
    x = streams_in(4)
    want = Model(norm=norm_type, n_heads=H).block("mhc", Params.of(block), x, L=3, ell=2)
    assert_same_function(block(x), want, leaves(block, x=x))


@pytest.mark.parametrize("n", [1, 3, 4])
@pytest.mark.parametrize("gpas", [False, True])
def test_any_number_of_streams_and_gpas_are_the_formula(n, gpas):
    """n = 3 (no power of two) and n = 1; GPAS acts on each sublayer's result, g(H_res x + H_postᵀ F)."""
    block = build("mhc", "layernorm", L=3, streams=n, gpas=gpas).blocks[2]
    assert block.attn_hc.phi.weight.shape == (n * n + 2 * n, n * D)
    x = streams_in(n)
    want = Model(norm="layernorm", n_heads=H, streams=n, gpas=gpas).block("mhc", Params.of(block), x, L=3, ell=3)
    assert_same_function(block(x), want, leaves(block, x=x))


@pytest.mark.parametrize("depth_scaled", [False, True])
@pytest.mark.parametrize("norm_type", ["rmsnorm", "dyt"])
def test_the_whole_mhc_model_is_its_formula(norm_type, depth_scaled):
    """The embedding copied into n = 3 streams, 3 blocks, the mean of the streams, the final norm, the head."""
    model, idx = build("mhc", norm_type, L=3, depth_scaled=depth_scaled, streams=3), idx_in()
    assert model.final_norm is not None
    want = logits(Model(norm=norm_type, n_heads=H, streams=3), Params.of(model), idx, "mhc", 3,
                  depth_scaled=depth_scaled)
    assert_same_function(model(idx)[0], want, leaves(model))


def test_sinkhorn_is_the_papers_iteration_and_its_gradient_is_the_loops():
    """``sinkhorn`` (a softmax, then a hand-written backward) against eq. 9 written as exp and 20 alternating
    divisions, on logits up to ±12 (so exp's range shows), forward and gradient."""
    h = (torch.randn(3, 5, 4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 4).clamp(-12, 12)
    h.requires_grad_()
    assert_same_function(sinkhorn(h), sinkhorn_knopp(h), {"h": h})
    assert torch.isfinite(sinkhorn(torch.tensor([[1000.0, 0.0], [0.0, -1000.0]]))).all()  # no exp overflow


def test_h_res_is_doubly_stochastic():
    """Every token's H_res of a randomized block: entries ≥ 0, rows sum to 1 (T_r is the last step: up to ε),
    columns close to 1 after the paper's 20 iterations, and as close as wanted after more (the limit is doubly
    stochastic: Sinkhorn's theorem for a positive matrix)."""
    block = build("mhc", "rmsnorm", L=2).blocks[1]
    block(streams_in(4))
    _, _, res = block.attn_hc.seen
    assert res.shape == (B, T, 4, 4) and (res > 0).all()
    close(res.sum(-1), torch.ones(B, T, 4, dtype=res.dtype), "the row sums")
    assert (res.sum(-2) - 1).abs().max() < 1e-2, "the column sums after 20 iterations"
    h = torch.randn(500, 4, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2
    converged = sinkhorn(h, iters=500, eps=0.0)
    for dim in (-1, -2):
        torch.testing.assert_close(converged.sum(dim), torch.ones(500, 4, dtype=torch.float64), rtol=0, atol=1e-9)
    assert (sinkhorn(h).sum(-2) - 1).abs().max() > 1e-6  # 20 iterations leave the columns off 1, as the paper says


def test_the_initial_mappings_are_megatrons_and_the_papers():
    """α = 0.01 (Table 5), b = 0, φ Xavier-uniform (Megatron-LM): every token starts near H_pre = ½, H_post = 1,
    H_res = 1/n in every entry; each block's φ its own."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=D, n_heads=H, seq_len=T, placement="mhc", streams=4))
    for block in model.blocks:
        for hc in (block.attn_hc, block.mlp_hc):
            assert hc.alpha.tolist() == pytest.approx([0.01] * 3) and not hc.bias.any()
            bound = math.sqrt(6 / (24 + 4 * D))  # Xavier-uniform: √(6 / (fan_in + fan_out))
            w = hc.phi.weight.detach()
            assert w.abs().max() <= bound and w.std().item() == pytest.approx(bound / 3**0.5, rel=0.1)
    assert not torch.equal(model.blocks[0].attn_hc.phi.weight, model.blocks[1].attn_hc.phi.weight)
    model(idx_in())
    pre, post, res = model.blocks[1].mlp_hc.seen
    assert (pre - 0.5).abs().max() < 0.05 and (post - 1).abs().max() < 0.1 and (res - 0.25).abs().max() < 0.01


def test_the_streams_start_as_copies_and_leave_as_their_mean():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=1, d_model=D, n_heads=H, seq_len=T, placement="mhc", streams=3))
    x = torch.randn(B, T, D)
    assert torch.equal(MHCBlock.stream_in(x, model.cfg), torch.cat([x, x, x], dim=-1))
    three = torch.randn(B, T, 3 * D)
    final = model.final_norm
    torch.testing.assert_close(MHCBlock.stream_out(three, final, model.cfg), final(three.reshape(B, T, 3, D).mean(2)))
    assert [s.shape for s in model.blocks[0].streams(three)] == [(B, T, D)] * 3


def test_one_stream_keeps_the_plain_residual_with_gates():
    """n = 1: H_res is the 1 × 1 doubly stochastic matrix, 1 (the identity mapping, §4.1)."""
    block = build("mhc", "rmsnorm", L=2, streams=1).blocks[0]
    block(x_in())
    _, _, res = block.mlp_hc.seen
    torch.testing.assert_close(res, torch.ones_like(res), rtol=0, atol=3 * MHC_EPS)


def test_the_block_reports_each_streams_mappings():
    """``layer_diagnostics``: the mean H_pre and H_post per stream over tokens and the two sublayers, H_res's mean
    diagonal and its largest column sum (averaged over tokens, the larger sublayer)."""
    block = build("mhc", "rmsnorm", L=2, streams=3).blocks[1]
    assert block.layer_diagnostics() == {}  # no forward yet
    block(streams_in(3))
    stats = block.layer_diagnostics()
    seen = [block.attn_hc.seen, block.mlp_hc.seen]
    torch.testing.assert_close(stats["mhc_pre"], (seen[0][0] + seen[1][0]).mean((0, 1)) / 2)
    torch.testing.assert_close(stats["mhc_post"], (seen[0][1] + seen[1][1]).mean((0, 1)) / 2)
    diag = [torch.diagonal(r, dim1=-2, dim2=-1).mean() for _, _, r in seen]
    torch.testing.assert_close(stats["mhc_res_diag"], (diag[0] + diag[1]) / 2)
    gain = max(r.sum(-2).amax(-1).mean() for _, _, r in seen)
    torch.testing.assert_close(stats["mhc_res_gain"], gain)


# ---------------------------------------------------------------- transformers' DeepSeek-V4 hyper-connection

def hf_layout(n: int) -> torch.Tensor:
    """Where transformers' fn/base row k comes from in ours: pre and post in place; its comb[j, i] (applied as
    combᵀ) is our H_res[i, j], row-major in both."""
    res = [2 * n + i * n + j for j in range(n) for i in range(n)]
    return torch.tensor(list(range(2 * n)) + res)


@pytest.mark.extras("hf")
@pytest.mark.parametrize("n", [4, 3])
def test_transformers_deepseek_v4_hyper_connection_is_the_same_mapping(n):
    """The same φ, b and α in ``DeepseekV4HyperConnection`` (transformers, float32): the same collapsed input
    H_pre x, H_post and H_res (its comb transposed), and the decoder layer's update post·F + combᵀ·x equals our
    sublayer's, for the same sublayer output F."""
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra: pip install -e '.[hf]'")
    v4 = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")
    config = transformers.DeepseekV4Config(hidden_size=D, hc_mult=n, hc_sinkhorn_iters=20, hc_eps=1e-6,
                                           rms_norm_eps=1e-6)
    ours = build("mhc", "rmsnorm", L=2, streams=n).float().blocks[1].attn_hc
    theirs = v4.DeepseekV4HyperConnection(config).float()
    with torch.no_grad():
        order = hf_layout(n)
        theirs.fn.copy_(ours.phi.weight[order])
        theirs.base.copy_(ours.bias[order])
        theirs.scale.copy_(ours.alpha)
    x = torch.randn(B, T, n * D, generator=torch.Generator().manual_seed(5))
    pre, post, res = ours(x)
    hf_post, comb, collapsed = theirs(x.unflatten(-1, (n, D)))
    tol = dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(post, hf_post, **tol)
    torch.testing.assert_close(res, comb.transpose(-1, -2), **tol)
    streams = x.unflatten(-1, (n, D))
    from normtrain.model.hyper_connections import read, write

    torch.testing.assert_close(read(pre, streams), collapsed, **tol)
    f = torch.randn(B, T, D, generator=torch.Generator().manual_seed(6))
    hf_update = hf_post.unsqueeze(-1) * f.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), streams)
    torch.testing.assert_close(write(res, streams, post, f), hf_update, **tol)
