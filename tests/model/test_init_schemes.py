"""``model.init``: each scheme's per-tensor std against its formula (written here from the papers and reference
code, not read from normtrain/model/init.py), the truncation bounds, DeepNorm's β and Admin's ω composing with every
scheme, and the default (xavier) drawing exactly what normtrain drew before the schemes existed."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.model.placements import MHCBlock, NGPTBlock

L, D, V = 4, 128, 256
SCHEMES = ("xavier", "gpt2", "olmo2", "mitchell", "small")
# the std of N(0, σ²) truncated at ±3σ, over σ: √(1 − 2·3·φ(3) / (2Φ(3) − 1))
PHI3, CDF3 = math.exp(-4.5) / math.sqrt(2 * math.pi), 0.5 * (1 + math.erf(3 / math.sqrt(2)))
TRUNCATED_STD = math.sqrt(1 - 6 * PHI3 / (2 * CDF3 - 1))  # 0.9866


def model(init: str, **kw) -> GPT:
    torch.manual_seed(0)
    base = dict(n_layers=L, d_model=D, n_heads=4, seq_len=32, mlp="gelu", pos="learned", bias=True,
                norm=NormSpec("layernorm"), init=init)
    return GPT(GPTConfig(**{**base, **kw}))


def role(name: str) -> str:
    if name in ("tok_emb.weight", "pos_emb.weight"):
        return "embedding"
    if name == "lm_head.weight":
        return "head"
    return "writer" if name.endswith(("attn.out_proj.weight", "mlp.down.weight")) else "reader"


def expected_std(init: str, name: str, weight: torch.Tensor, emb_std: float = 1.0, sigma: float = 0.02) -> float:
    """The std each scheme's paper or reference code gives the weight ``name`` (out × in)."""
    fan_out, fan_in = weight.shape
    r, layer = role(name), int(name.split(".")[1]) if name.startswith("blocks.") else 0
    if init == "xavier":  # Glorot & Bengio; normtrain's embeddings N(0, emb_std²)
        return emb_std if r == "embedding" else math.sqrt(2 / (fan_in + fan_out))
    if init == "gpt2":  # nanoGPT: 0.02, c_proj 0.02/√(2L)
        return sigma / math.sqrt(2 * L) if r == "writer" else sigma
    if init == "olmo2":  # OLMo-core InitMethod.normal: trunc_normal_(std=0.02, a=−3σ, b=3σ) everywhere
        return sigma * TRUNCATED_STD
    if init == "mitchell":  # OLMo 1: 1/√d_in, outputs also 1/√(2(layer_id + 1)); truncated at ±3 std
        std = 1 / math.sqrt(fan_in)
        return TRUNCATED_STD * (std / math.sqrt(2 * (layer + 1)) if r == "writer" else std)
    assert init == "small"  # Nguyen & Salazar, GPT-NeoX small_init: √(2/(5d))
    return math.sqrt(2 / (5 * D))


def matrices(m: GPT) -> dict[str, torch.Tensor]:
    return {n: p.detach() for n, p in m.named_parameters() if p.dim() == 2}


@pytest.mark.parametrize("init", SCHEMES)
def test_each_tensor_has_its_schemes_std(init):
    """Every matrix and embedding within 4% of its formula (the sample std of ≥ 16k draws: ~0.6% noise), with mean
    ≈ 0; biases 0 and norm gains 1 under every scheme; the truncated schemes never pass ±3 std."""
    m = model(init)
    for name, w in matrices(m).items():
        std = expected_std(init, name, w)
        assert w.std().item() == pytest.approx(std, rel=0.04), name
        assert abs(w.mean().item()) < 0.05 * std, name
        if init in ("olmo2", "mitchell"):
            assert w.abs().max().item() <= 3 * std / TRUNCATED_STD * (1 + 1e-6), name
    for name, p in m.named_parameters():
        if p.dim() == 1:
            assert torch.equal(p, torch.ones_like(p) if name.endswith("norm1.weight") or name.endswith("norm2.weight")
                               or name == "final_norm.weight" else torch.zeros_like(p)), name


@pytest.mark.parametrize("init", ["gpt2", "olmo2"])
def test_init_std_sets_the_base_std(init):
    m = model(init, init_std=0.05)
    for name, w in matrices(m).items():
        assert w.std().item() == pytest.approx(expected_std(init, name, w, sigma=0.05), rel=0.04), name


@pytest.mark.parametrize("init", SCHEMES)
def test_deepnorm_beta_scales_v_out_and_the_mlp_under_every_scheme(init):
    """DeepNet's rule under any scheme: v_proj, out_proj and the MLP's matrices × β, q_proj and k_proj as the scheme
    draws them (β = (8L)^-¼; here a larger β = 3 makes the factor unmistakable)."""
    for beta in ((8 * L) ** -0.25, 3.0):
        m = model(init, placement="deepnorm", beta=beta)
        for name, w in matrices(m).items():
            scaled = name.startswith("blocks.") and not name.endswith(("q_proj.weight", "k_proj.weight"))
            std = expected_std(init, name, w) * (beta if scaled else 1.0)
            assert w.std().item() == pytest.approx(std, rel=0.04), (name, beta)


@pytest.mark.parametrize("init", ["xavier", "gpt2", "small"])
def test_admin_profiles_omega_on_the_weights_the_scheme_drew(init):
    """ω_2 of block 0 = √(Var[x_0] + Var[Attn(x_0)]) of the embedding x_0 as this scheme drew it (Admin's profile):
    ω follows the init, so a small init gives a small ω."""
    m = model(init, placement="admin")
    idx = torch.randint(0, V, (4, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        x0 = m.tok_emb(idx) + m.pos_emb(torch.arange(32))
        expected = (x0.var(correction=0) + m.blocks[0].attn(x0).var(correction=0)).sqrt()
    assert m.data_init(idx) is True
    torch.testing.assert_close(m.blocks[0].omega1.detach(), torch.ones(D))
    torch.testing.assert_close(m.blocks[0].omega2.detach(), expected.expand(D), rtol=1e-5, atol=0)
    if init != "xavier":
        assert expected < 0.5  # embeddings of std 0.02 or √(2/(5d)), not xavier's unit variance


def old_init_weights(m: GPT) -> None:
    """normtrain's init before ``model.init`` existed (GPT.init_weights and Block.init_weights as of c20b098),
    spelt out with torch's own initializers: what ``xavier`` must keep drawing, bit for bit."""
    with torch.no_grad():
        for emb in (m.tok_emb, m.pos_emb):
            if emb is not None:
                nn.init.normal_(emb.weight, std=m.cfg.emb_std)
        for block in m.blocks:
            if isinstance(block, NGPTBlock):  # its own init, unchanged
                block.init_weights(m.init, m.beta)
                continue
            a = block.attn
            for proj in (a.q_proj, a.k_proj, *([a.gate_proj] if a.gate_proj else [])):
                nn.init.xavier_normal_(proj.weight, gain=1.0)
            for proj in (a.v_proj, a.out_proj, *(c for c in block.mlp.children() if isinstance(c, nn.Linear))):
                nn.init.xavier_normal_(proj.weight, gain=m.beta)
            for lin in (c for c in block.modules() if isinstance(c, nn.Linear) and c.bias is not None):
                nn.init.zeros_(lin.bias)
            if isinstance(block, MHCBlock):
                block.attn_hc.reset_parameters()
                block.mlp_hc.reset_parameters()
        nn.init.xavier_normal_(m.lm_head.weight)
        for proj in (m.emb_in, m.emb_out):
            if proj is not None:
                nn.init.orthogonal_(proj.weight)
        m.after_optimizer_step()


@pytest.mark.parametrize("kw", [
    {}, dict(mlp="gelu", pos="learned", bias=True, norm=NormSpec("layernorm", eps=1e-5)),
    dict(placement="deepnorm"), dict(placement="subln", mlp="geglu"), dict(placement="post", beta=0.5, emb_std=0.3),
    dict(placement="mhc", streams=2), dict(placement="ngpt", norm=NormSpec("l2", gain="none")),
    dict(placement="hybrid", attn_gate="head", emb_proj=True),
], ids=["default", "gpt2-shaped", "deepnorm", "subln", "post-beta", "mhc", "ngpt", "hybrid-gate-osp"])
def test_xavier_draws_what_normtrain_drew_before_the_schemes(kw):
    """The default scheme consumes the generator in the old order with the old stds: a run of an earlier
    normtrain reproduces bit for bit (same seed, same weights)."""
    m = GPT(GPTConfig(n_layers=3, d_model=32, n_heads=4, seq_len=16, **kw))
    assert m.cfg.init == "xavier"
    torch.manual_seed(1234)
    m.init_weights()
    now = {k: v.clone() for k, v in m.state_dict().items()}
    torch.manual_seed(1234)
    old_init_weights(m)
    for name, before in m.state_dict().items():
        assert torch.equal(now[name], before), name


def test_an_unknown_scheme_or_a_misplaced_init_std_is_refused_by_the_model():
    with pytest.raises(ValueError, match="unknown init scheme 'normal'; allowed: xavier, gpt2, olmo2, mitchell, small"):
        model("normal")
    with pytest.raises(ValueError, match="init scheme 'mitchell' has no base std"):
        model("mitchell", init_std=0.02)
    with pytest.raises(ValueError, match="placement ngpt .* init and init_std do not apply to it"):
        model("gpt2", placement="ngpt", norm=NormSpec("l2", gain="none"), mlp="swiglu", pos="rope", bias=False)
