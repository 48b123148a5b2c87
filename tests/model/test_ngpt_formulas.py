"""nGPT (``placement=ngpt``) pinned to its paper (Loshchilov et al., ICLR 2025): the block and the whole model
against the equations written here, forward and backward with every scale randomized (signs included: |α| must
show); the paper's initial values and stored scales; and the unit-norm invariant of every matrix along d_model
after optimizer steps under AdamW and Muon.

The formulas read the module's parameters by name only (``Params``); every constant (α_init 0.05, the stored
scales 1/√d, the √d_k softmax scale, ν's √d_model, the dimension each matrix is normalized along) is stated here.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from formulas import EPS, Params, linear, rope
from test_formulas import assert_same_function, leaves

from normtrain.model import GPT, GPTConfig, NGPTBlock, NormSpec
from normtrain.training.optim import MuonSettings, build_optimizer

D, H, T, B = 16, 2, 6, 2
ALPHA_INIT, S_INIT = 0.05, 1.0  # §2.6: α_A,init = α_M,init = 0.05; s_qk, s_u, s_ν, s_z init 1
# The dimension of each matrix that holds d_model (nn.Linear stores (out, in)): rows of the matrices that read the
# stream and of the embeddings, columns of the two that write it (NVIDIA/ngpt's normalize_matrices).
UNIT_DIM = {"tok_emb.weight": 1, "lm_head.weight": 1, "attn.q_proj.weight": 1, "attn.k_proj.weight": 1,
            "attn.v_proj.weight": 1, "attn.out_proj.weight": 0, "mlp.gate.weight": 1, "mlp.up.weight": 1,
            "mlp.down.weight": 0}


def unit_dim(name: str) -> int:
    return UNIT_DIM[name.split(".", 2)[-1] if name.startswith("blocks.") else name]


def l2(x: torch.Tensor) -> torch.Tensor:
    """Norm(x) = x/‖x‖ over the last dimension (ε, large in these tests, inside the root as in every norm)."""
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + EPS)


def attention(p: Params, h: torch.Tensor) -> torch.Tensor:
    """§2.3.2: q, k per head after RoPE, normalized and times s_qk; softmax(q·kᵀ·√d_k); W_o."""
    Bn, Tn, d = h.shape
    dh = d // H
    q, k, v = (linear(h, p[f"attn.{n}_proj"]).reshape(Bn, Tn, H, dh).transpose(1, 2) for n in "qkv")
    s_qk = (p.tensor("attn.qk_sphere.s_qk.stored") * (S_INIT / d**-0.5)).reshape(H, 1, dh)  # s_qk,scale 1/√d
    q, k = l2(rope(q)) * s_qk, l2(rope(k)) * s_qk
    scores = q @ k.transpose(-1, -2) * math.sqrt(dh)
    future = torch.ones(Tn, Tn, dtype=torch.bool).triu(1)
    y = (torch.softmax(scores.masked_fill(future, float("-inf")), -1) @ v).transpose(1, 2).reshape(Bn, Tn, d)
    return linear(y, p["attn.out_proj"])


def mlp(p: Params, h: torch.Tensor) -> torch.Tensor:
    """§2.4.2: u ⊙ s_u and ν ⊙ s_ν·√d_model (s_u,scale = s_ν,scale = 1), then W_down(u ⊙ SiLU(ν))."""
    u = linear(h, p["mlp.up"]) * p.tensor("mlp.uv_scale.s_u.stored") * (S_INIT / 1.0)
    nu = linear(h, p["mlp.gate"]) * p.tensor("mlp.uv_scale.s_nu.stored") * (S_INIT / 1.0) * math.sqrt(h.shape[-1])
    return linear(u * F.silu(nu), p["mlp.down"])


def block(p: Params, h: torch.Tensor) -> torch.Tensor:
    """§2.2.2: h ← Norm(h + |α_A| ⊙ (Norm(Attn(h)) − h)), then the same with the MLP and α_M (α stored at
    1/√d_model); the h of the interpolation normalized again, as NVIDIA/ngpt does (a no-op on the sphere)."""
    d = h.shape[-1]
    for name, sub in (("alpha_attn", attention), ("alpha_mlp", mlp)):
        alpha = (p.tensor(f"{name}.stored") * (ALPHA_INIT / d**-0.5)).abs()
        target = l2(sub(p, h))
        h = l2(h)
        h = l2(h + alpha * (target - h))
    return h


def logits(p: Params, idx: torch.Tensor, L: int) -> torch.Tensor:
    """§2.1: the embedding rows, L blocks, no final norm, the head, z ⊙ s_z (s_z,scale 1/√d_model)."""
    h = p.tensor("tok_emb.weight")[idx]
    for i in range(L):
        h = block(p.block(i), h)
    d = h.shape[-1]
    return h @ p.tensor("lm_head.weight").T * (p.tensor("logit_scale.stored") * (S_INIT / d**-0.5))


def build(L: int = 2, mlp_kind: str = "swiglu", eps: float = EPS, **kw) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(n_layers=L, d_model=D, n_heads=H, seq_len=T, placement="ngpt", mlp=mlp_kind,
                    norm=NormSpec("l2", eps=eps, gain="none", impl="torch"), **kw)
    return GPT(cfg).double()


@torch.no_grad()
def randomize(model: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """Every scale to a random value of either sign (|α| then differs from α), magnitude 0.5 to 1.5."""
    g = torch.Generator().manual_seed(seed)
    for _, t in model.named_parameters():
        if t.ndim == 1:
            sign = torch.randint(0, 2, t.shape, generator=g, dtype=torch.float64) * 2 - 1
            t.copy_(sign * (0.5 + torch.rand(t.shape, generator=g, dtype=torch.float64)))
    return model


def x_in() -> torch.Tensor:
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2
    return x.requires_grad_()


def test_the_ngpt_block_is_its_formula():
    """A random input off the sphere (which only the interpolation's Norm(h) sees), every scale random."""
    model = randomize(build())
    blk, x = model.blocks[1], x_in()
    assert_same_function(blk(x), block(Params.of(blk), x), leaves(blk, x=x))


def test_the_whole_ngpt_model_is_its_formula():
    model = randomize(build(L=3))
    idx = torch.randint(0, 256, (B, T), generator=torch.Generator().manual_seed(4))
    assert model.final_norm is None
    assert_same_function(model(idx)[0], logits(Params.of(model), idx, L=3), leaves(model))


def test_every_hidden_state_is_a_unit_vector():
    model = randomize(build(L=3, eps=1e-12))
    h = model.tok_emb.weight[torch.randint(0, 256, (B, T))]
    for blk in model.blocks:
        h = blk(h)
        torch.testing.assert_close(h.norm(dim=-1), torch.ones(B, T, dtype=torch.float64))


def test_the_paper_initial_values_and_stored_scales():
    """Stored: α at 1/√d (effective 0.05), s_qk at 1/√d (effective 1), s_u and s_ν at 1 (ν's factor √d), s_z at
    1/√d (effective 1); every matrix a set of unit vectors along d_model; no norm layer with parameters."""
    model = build()
    p, d = dict(model.named_parameters()), D
    for name, t in p.items():
        leaf = name.rsplit(".", 2)[-2]
        if t.ndim == 2:
            norms = t.norm(dim=unit_dim(name))
            torch.testing.assert_close(norms, torch.ones_like(norms), msg=name)
        elif leaf in ("alpha_attn", "alpha_mlp", "s_qk", "logit_scale"):
            assert torch.allclose(t, torch.full_like(t, d**-0.5)), name
        else:
            assert leaf in ("s_u", "s_nu") and torch.equal(t, torch.ones_like(t)), name
    blk = model.blocks[0]
    assert torch.allclose(blk.alpha_attn(), torch.full((d,), ALPHA_INIT, dtype=torch.float64))
    assert torch.allclose(blk.attn.qk_sphere.s_qk(), torch.ones(d, dtype=torch.float64))
    assert torch.allclose(blk.mlp.uv_scale.s_nu(), torch.full_like(blk.mlp.uv_scale.s_nu(), math.sqrt(d)))
    assert torch.allclose(model.logit_scale(), torch.ones(256, dtype=torch.float64))
    assert blk.attn.softmax_scale == pytest.approx(math.sqrt(D // H))


def test_the_block_refuses_another_norm_or_an_ungated_mlp():
    with pytest.raises(ValueError, match="norm l2"):
        GPT(GPTConfig(n_layers=1, d_model=D, n_heads=H, placement="ngpt"))
    with pytest.raises(ValueError, match="gated MLP"):
        build(mlp_kind="gelu")


def matrices_off_the_unit_sphere(model: torch.nn.Module) -> list[str]:
    """The matrices (by name) with a vector along their d_model dimension whose norm is not 1."""
    bad = []
    for name, t in model.named_parameters():
        if t.ndim == 2:
            norms = t.detach().double().norm(dim=unit_dim(name))
            if not torch.allclose(norms, torch.ones_like(norms), atol=1e-5):
                bad.append(name)
    return bad


def hidden_matrices(model: GPT) -> list[torch.nn.Parameter]:
    return [p for n, p in model.named_parameters() if p.ndim == 2 and n.startswith("blocks.")]


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_every_matrix_is_unit_norm_along_d_model_after_each_step(optimizer):
    """Ten steps at a large learning rate, with weight decay: each moves the matrices off the sphere,
    ``after_optimizer_step`` puts them back. Under Muon (``optim=muon``'s split) Muon takes the hidden matrices,
    AdamW the embeddings, the head and the scales."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=32, n_heads=2, seq_len=16, placement="ngpt",
                          norm=NormSpec("l2", eps=1e-12, gain="none")))
    opt = build_optimizer(model, 0.05, (0.9, 0.95), 1e-8, 0.1, name=optimizer,
                          muon=MuonSettings(lr=0.05, weight_decay=0.1))
    if optimizer == "muon":
        assert {id(p) for p in opt.muon.param_groups[0]["params"]} == {id(p) for p in hidden_matrices(model)}
    x = torch.randint(0, 256, (4, 16))
    for _ in range(10):
        loss = model(x, x.roll(-1, 1))[1]
        loss.backward()
        opt.step()
        opt.zero_grad()
        assert matrices_off_the_unit_sphere(model)  # the step left the sphere: the hook has work to do
        model.after_optimizer_step()
        assert matrices_off_the_unit_sphere(model) == []
    alpha = model.blocks[0].alpha_attn.stored
    assert not torch.allclose(alpha, torch.full_like(alpha, 32**-0.5))  # the scales train, unnormalized


def test_the_other_placements_declare_no_weight_rule():
    model = GPT(GPTConfig(n_layers=1, d_model=D, n_heads=H))
    before = {n: t.clone() for n, t in model.state_dict().items()}
    model.after_optimizer_step()
    assert all(torch.equal(before[n], t) for n, t in model.state_dict().items())
    assert isinstance(build().blocks[0], NGPTBlock) and build().blocks[0].layer_diagnostics()
