"""Every formula of the catalog, pinned: each module against the paper's equation written in ``formulas.py``,
forward and backward (the gradients with respect to the input and to every parameter), after randomizing every
parameter. At init every gain is 1 and every bias 0, so a bug that swaps two norms' gains, or moves a norm across
RoPE (RMS is rotation-invariant), computes the same function until training moves them: these tests would miss
it without ``randomize``. ``scripts/mutation_check.py`` plants such bugs and checks that a test here fails.

Everything runs in float64 (the RMS norms compute in fp32 inside, as in training), on tiny shapes.
"""

import math

import pytest
import torch
from formulas import EPS, FINAL_NORM, Model, P, Params, logits, norm

from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.norms import build_norm
from normtrain.training.qk_clip import QKClip

D, H, T, B = 16, 2, 6, 2
NORM_TYPES = ["layernorm", "rmsnorm", "prmsnorm", "dyt", "derf", "batchnorm", "batchnorm_causal"]
PER_TOKEN = ["layernorm", "rmsnorm", "prmsnorm", "dyt", "derf"]  # those QK-norm can use
GAINS = ["vector", "zero_centred", "scalar", "none"]
NORMED = ["pre", "post", "deepnorm", "admin", "subln", "peri", "reorder"]
RTOL = 1e-5  # and an absolute 1e-5 of the tensor's largest entry: RoPE's tables are fp32, as in training


def spec(kind: str, depth_scaled: bool = False, gain: str = "vector") -> NormSpec:
    return NormSpec(kind, eps=EPS, p=P, impl="torch", depth_scaled=depth_scaled, gain=gain)


@torch.no_grad()
def randomize(module: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """Every gain, bias and scalar to its own random value (matrices are random from their init already)."""
    g = torch.Generator().manual_seed(seed)
    for name, t in module.named_parameters():
        if t.ndim >= 2:
            continue
        leaf = name.rsplit(".", 1)[-1]
        u = torch.rand(t.shape, generator=g, dtype=torch.float64)
        t.copy_(torch.randn(t.shape, generator=g, dtype=torch.float64) * 0.5 if leaf == "bias"
                else 0.3 + u if leaf == "alpha"  # DyT's and Derf's α
                else u - 0.5 if leaf == "shift"  # Derf's s
                else 0.5 + u)  # gains (zero-centred: their w), Admin's ω, ReZero's a
    return module


def build(placement: str, norm_type: str = "rmsnorm", L: int = 3, depth_scaled: bool = False, gain: str = "vector",
          **kw) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(n_layers=L, d_model=D, n_heads=H, seq_len=T, norm=spec(norm_type, depth_scaled, gain),
                    placement=placement, **kw)
    return randomize(GPT(cfg).double())


def assert_same_function(module_out, formula_out, leaves: dict[str, torch.Tensor]) -> None:
    """Equal outputs, and equal gradients of ⟨output, c⟩ (c random) with respect to every leaf."""
    close(module_out, formula_out, "the output")
    c = torch.randn(module_out.shape, generator=torch.Generator().manual_seed(2), dtype=module_out.dtype)
    names, tensors = list(leaves), list(leaves.values())
    got = torch.autograd.grad(module_out, tensors, c, allow_unused=True, retain_graph=True)
    want = torch.autograd.grad(formula_out, tensors, c, allow_unused=True)
    for name, t, a, b in zip(names, tensors, got, want, strict=True):
        a = torch.zeros_like(t) if a is None else a
        b = torch.zeros_like(t) if b is None else b
        close(a, b, f"the gradient of {name}")


def close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(got, want, rtol=RTOL, atol=RTOL * want.abs().max().item() + 1e-10,
                               msg=lambda m: f"{what}: {m}")


def x_in(seed: int = 3) -> torch.Tensor:
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2
    return x.requires_grad_()


def leaves(module: torch.nn.Module, **inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    return {**inputs, **dict(module.named_parameters())}


# ---------------------------------------------------------------- norm types


@pytest.mark.parametrize("kind", NORM_TYPES)
def test_each_norm_type_is_its_formula(kind):
    n = randomize(build_norm(spec(kind), D).double())
    x = x_in()
    own = {name.rsplit(".", 1)[-1]: t for name, t in n.named_parameters()}  # weight, bias, alpha
    assert_same_function(n(x), norm(kind, x, own), leaves(n, x=x))


def test_prmsnorm_reads_the_first_ceil_p_d_features_only():
    n = build_norm(spec("prmsnorm"), D).double()
    x = x_in()
    y = n(x)
    k = math.ceil(P * D)  # 5 of 16
    x2 = x.detach().clone()
    x2[..., k:] *= 10  # what lies past the first k features does not change the scale
    torch.testing.assert_close(n(x2)[..., :k], y[..., :k])
    x2[..., k - 1] *= 10
    assert not torch.allclose(n(x2)[..., :k - 1], y[..., :k - 1])


# ---------------------------------------------------------------- placements, block by block


@pytest.mark.parametrize("norm_type", NORM_TYPES)
@pytest.mark.parametrize("placement", NORMED)
def test_each_placement_is_its_formula(placement, norm_type):
    """Block ℓ = 2 of 3 (DeepNorm's α = (2·3)^¼), biases on, every gain random."""
    model = build(placement, norm_type, L=3, bias=True)
    block, x = model.blocks[1], x_in()
    want = Model(norm=norm_type, n_heads=H).block(placement, Params.of(block), x, L=3, ell=2)
    assert_same_function(block(x), want, leaves(block, x=x))


@pytest.mark.parametrize("placement", ["rezero", "none"])
def test_the_norm_free_blocks_are_their_formula(placement):
    model = build(placement, L=2, bias=True)
    block, x = model.blocks[0], x_in()
    want = Model(n_heads=H).block(placement, Params.of(block), x, L=2, ell=1)
    assert_same_function(block(x), want, leaves(block, x=x))


@pytest.mark.parametrize("mlp", ["swiglu", "gelu", "geglu"])
def test_subln_normalizes_before_w_out_and_after_each_activation(mlp):
    model = build("subln", "layernorm", L=2, mlp=mlp)
    block, x = model.blocks[0], x_in()
    want = Model(norm="layernorm", n_heads=H, mlp=mlp).block("subln", Params.of(block), x, L=2, ell=1)
    assert_same_function(block(x), want, leaves(block, x=x))


# ---------------------------------------------------------------- the whole model: final norm, depth, Mix-LN


def idx_in() -> torch.Tensor:
    return torch.randint(0, 256, (B, T), generator=torch.Generator().manual_seed(4))


@pytest.mark.parametrize("depth_scaled", [False, True])
@pytest.mark.parametrize("placement", NORMED + ["rezero", "none"])
def test_the_whole_model_is_its_formula(placement, depth_scaled):
    """Embedding, 3 blocks (ℓ = 1, 2, 3: LayerNorm Scaling's 1/√ℓ differs in each), the final norm where the
    placement has one (never depth-scaled), the head."""
    if depth_scaled and placement in ("rezero", "none"):
        pytest.skip("no norm to scale (the config refuses it)")
    model, idx = build(placement, "rmsnorm", L=3, depth_scaled=depth_scaled), idx_in()
    assert (model.final_norm is not None) == FINAL_NORM[placement]
    want = _logits(model, idx, placement, depth_scaled=depth_scaled)
    assert_same_function(model(idx)[0], want, leaves(model))


def described(cfg: GPTConfig) -> Model:
    """The test's statement of the model ``cfg`` asks for (the choices, never the module's parts)."""
    return Model(norm=cfg.norm.name, n_heads=H, mlp=cfg.mlp, qk_norm=cfg.qk_norm, rope=cfg.pos == "rope",
                 gain=cfg.norm.gain, qk_norm_at=cfg.qk_norm_at, qk_gain=cfg.qk_norm_gain, v_norm=cfg.v_norm,
                 attn_softcap=cfg.attn_softcap, logit_softcap=cfg.logit_softcap, attn_gate=cfg.attn_gate,
                 emb_proj=cfg.emb_proj)


def _logits(model, idx, placement, **kw):
    return logits(described(model.cfg), Params.of(model), idx, placement, model.cfg.n_layers,
                  learned_pos=model.cfg.pos == "learned", **kw)


@pytest.mark.parametrize("L,fraction", [(3, 0.5), (4, 0.5), (3, 1.0), (3, 0.0)])
@pytest.mark.parametrize("depth_scaled", [False, True])
def test_mix_is_post_ln_in_the_first_floor_f_l_blocks_then_pre_ln(L, fraction, depth_scaled):
    model, idx = build("mix", "layernorm", L=L, post_fraction=fraction, depth_scaled=depth_scaled), idx_in()
    want = _logits(model, idx, "mix", post_fraction=fraction, depth_scaled=depth_scaled)
    assert_same_function(model(idx)[0], want, leaves(model))


def test_a_gpt2_like_model_with_learned_positions_is_its_formula():
    model, idx = build("pre", "layernorm", L=2, pos="learned", mlp="gelu"), idx_in()
    assert_same_function(model(idx)[0], _logits(model, idx, "pre"), leaves(model))


# ---------------------------------------------------------------- QK-norm and the MLPs


@pytest.mark.parametrize("pos", ["rope", "learned"])
@pytest.mark.parametrize("norm_type", PER_TOKEN)
@pytest.mark.parametrize("form", ["none", "per_head", "full"])
def test_qk_norm_forms_are_their_formula(form, norm_type, pos):
    """per_head: each head's q and k over its d_h features, one gain of d_h shared by the heads (Qwen3, Gemma 3);
    full: the whole q and k projections over d features, before the head split (OLMo-2); both before RoPE."""
    model = build("pre", norm_type, L=1, qk_norm=form, pos=pos, bias=True)
    block, x = model.blocks[0], x_in()
    widths = {"per_head": D // H, "full": D}
    for name in ("q_norm", "k_norm"):
        gain = getattr(block.attn, name)
        assert (None if gain is None else gain.weight.shape) == ((widths[form],) if form in widths else None)
    assert_same_function(block.attn(x), described(model.cfg).attention(Params.of(block), x), leaves(block.attn, x=x))


def test_qk_norm_gives_the_whole_model_its_formula_with_depth_scaled_norms():
    """QK-norm is never depth-scaled, the block's own norms are."""
    for form in ("per_head", "full"):
        model, idx = build("peri", "rmsnorm", L=2, qk_norm=form, depth_scaled=True), idx_in()
        want = _logits(model, idx, "peri", depth_scaled=True)
        assert_same_function(model(idx)[0], want, leaves(model))


# ---------------------------------------------------------------- the 2023–2026 catalog: gains, Derf, QK place, caps,
# ---------------------------------------------------------------- gated attention


@pytest.mark.parametrize("gain_form", GAINS)
@pytest.mark.parametrize("kind", PER_TOKEN + ["batchnorm"])
def test_each_gain_form_is_its_formula(kind, gain_form):
    """γ a vector, 1 + w (w init 0), one scalar, or nothing (and then no β): the stored tensors, the init, and the
    function with every parameter random."""
    if kind == "batchnorm" and gain_form in ("zero_centred", "scalar"):
        pytest.skip("BatchNorm has vector or no gains (the config refuses the others)")
    fresh = build_norm(spec(kind, gain=gain_form), D).double()
    shapes = {n.rsplit(".", 1)[-1]: tuple(t.shape) for n, t in fresh.named_parameters()}
    want = {"vector": (D,), "zero_centred": (D,), "scalar": (1,)}.get(gain_form)
    assert shapes.get("weight") == want
    assert shapes.get("bias") == (want and (D,) if kind in ("layernorm", "dyt", "derf", "batchnorm") else None)
    if gain_form == "zero_centred":  # stored w = 0: the same function as γ = 1 at init
        assert torch.equal(fresh.weight, torch.zeros(D, dtype=torch.float64))
        unit = build_norm(spec(kind), D).double()
        torch.testing.assert_close(fresh(x_in()), unit(x_in()))
    n, x = randomize(fresh), x_in()
    own = {name.rsplit(".", 1)[-1]: t for name, t in n.named_parameters()}
    assert_same_function(n(x), norm(kind, x, own, gain_form), leaves(n, x=x))


def test_derf_starts_at_alpha_one_half_and_shift_zero():
    d = build_norm(NormSpec("derf"), D)
    assert d.alpha.item() == 0.5 and d.shift.item() == 0.0
    x = x_in().detach().float()
    torch.testing.assert_close(d(x), torch.erf(0.5 * x))  # γ = 1, β = 0


@pytest.mark.parametrize("gain_form", GAINS)
def test_gain_forms_give_the_whole_model_its_formula(gain_form):
    """Every norm of a Peri-LN model (in, out, QK, final) with the gain form, LayerNorm (γ and β)."""
    model, idx = build("peri", "layernorm", L=2, gain=gain_form, qk_norm="per_head"), idx_in()
    assert_same_function(model(idx)[0], _logits(model, idx, "peri"), leaves(model))


QKV_CASES = [(form, at, qk_gain, v) for form in ("per_head", "full") for at in ("before_rope", "after_rope")
             for qk_gain in (True, False) for v in (False, True)] + [("none", "before_rope", g, True) for g in (1, 0)]


@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("form,at,qk_gain,v_norm", QKV_CASES)
def test_qk_norm_place_gain_and_v_norm_are_their_formula(form, at, qk_gain, v_norm, norm_type):
    """QK-norm before or after RoPE (nGPT), with or without its gain, and the same norm on v (HybridNorm,
    Gemma 3n): per head, or over the whole projection with the full form. RMSNorm without a gain is
    rotation-invariant (before = after RoPE), so LayerNorm's mean and the random gains are what pin the place."""
    model = build("pre", norm_type, L=1, qk_norm=form, qk_norm_at=at, qk_norm_gain=bool(qk_gain), v_norm=v_norm,
                  bias=True)
    attn, x = model.blocks[0].attn, x_in()
    width = D if form == "full" else D // H
    for name, present in (("q_norm", form != "none"), ("k_norm", form != "none"), ("v_norm", v_norm)):
        mod = getattr(attn, name)
        assert (mod is not None) == present, name
        if present:
            assert (mod.weight.shape if mod.weight is not None else None) == ((width,) if qk_gain else None)
    m = described(model.cfg)
    assert_same_function(attn(x), m.attention(Params.of(model.blocks[0]), x), leaves(attn, x=x))


@pytest.mark.parametrize("gate", ["none", "head", "elementwise"])
@pytest.mark.parametrize("cap", [0.0, 1.5])
def test_attention_softcap_and_gate_are_their_formula(cap, gate):
    """c·tanh(s/c) on s = q·kᵀ/√d_h (after the scale; c = 1.5 is well inside tanh's bend for these logits) and
    Y ⊙ σ(X·W_θ) on the heads' output before W_O, one gate per head or per feature."""
    model = build("pre", "rmsnorm", L=1, attn_softcap=cap, attn_gate=gate, bias=True)
    attn, x = model.blocks[0].attn, x_in()
    assert (attn.gate_proj is None) == (gate == "none")
    if gate != "none":
        assert attn.gate_proj.weight.shape == ({"head": H, "elementwise": D}[gate], D)
    want = described(model.cfg).attention(Params.of(model.blocks[0]), x)
    assert_same_function(attn(x), want, leaves(attn, x=x))


def test_the_gate_comes_before_sub_ln_inner_norm_and_w_out():
    model = build("subln", "layernorm", L=2, attn_gate="elementwise", attn_softcap=2.0)
    block, x = model.blocks[1], x_in()
    want = described(model.cfg).block("subln", Params.of(block), x, L=2, ell=2)
    assert_same_function(block(x), want, leaves(block, x=x))


def test_the_logit_softcap_bounds_the_output_and_is_its_formula():
    model, idx = build("pre", "rmsnorm", L=2, logit_softcap=0.8), idx_in()
    out = model(idx)[0]
    assert out.abs().max() < 0.8 and build("pre", "rmsnorm", L=2)(idx)[0].abs().max() > 0.8  # the cap bites
    assert_same_function(out, _logits(model, idx, "pre"), leaves(model))


def causal_max(scores: torch.Tensor) -> torch.Tensor:
    """(H,): per head, max over the batch and the pairs j ≤ i of ``scores`` (B, H, T, T), by enumeration."""
    n = scores.shape[-1]
    return torch.stack([torch.stack([scores[b, h, i, j] for b in range(scores.shape[0]) for i in range(n)
                                     for j in range(i + 1)]).max() for h in range(scores.shape[1])])


def test_attention_diagnostics_read_the_logits_before_the_cap():
    """Each head's max logit is the uncapped max of q·k/√d_h over the causal pairs (what a cap hides, what QK-Clip
    reads); the cap's saturation is the share of causal logits with |s| > 2c; the entropy is of the attention the
    model computes (capped)."""
    model, x = build("pre", "rmsnorm", L=1, attn_softcap=0.5), x_in().detach()
    plain = build("pre", "rmsnorm", L=1).blocks[0].attn
    attn, first = model.blocks[0].attn, x[:1]
    stats, plain_stats = attn.logit_stats(first), plain.logit_stats(first)
    raw = described(model.cfg).raw_scores(Params.of(model.blocks[0]), first)
    close(stats.head_max, causal_max(raw), "the max logit per head")
    assert stats.head_max.max() > 0.5 and torch.equal(stats.head_max, plain_stats.head_max)
    causal_logits = torch.cat([raw[0, :, i, :i + 1] for i in range(T)], dim=-1)  # (H, T(T+1)/2)
    expected = (causal_logits.abs() > 1.0).double().mean()  # |s| > 2c, c = 0.5
    assert 0 < expected < 1 and stats.cap_saturation.item() == pytest.approx(expected.item(), abs=1e-6)
    assert plain_stats.cap_saturation is None
    assert stats.entropy.item() > plain_stats.entropy.item() + 1e-3  # capped logits: flatter distributions


def test_a_tracked_max_is_each_heads_max_over_the_training_passes_only():
    """``track_logit_max``: the running per-head max of the passes that build a graph (micro-batches fold in);
    a pass without one (evaluation, the monitor's probe) leaves it alone; off, nothing is kept."""
    model, x, other = build("pre", "rmsnorm", L=1, attn_softcap=0.5), x_in().detach(), x_in(seed=9).detach()
    attn, p, m = model.blocks[0].attn, Params.of(model.blocks[0]), described(model.cfg)
    attn(x)
    assert attn.logit_max is None  # not tracked unless asked
    attn.track_logit_max = True
    attn(x)
    close(attn.logit_max, causal_max(m.raw_scores(p, x)), "the tracked max")
    with torch.no_grad():
        attn(other * 10)
    attn(other)
    both = torch.maximum(causal_max(m.raw_scores(p, x)), causal_max(m.raw_scores(p, other)))
    close(attn.take_logit_max(), both, "the max over two passes")
    assert attn.logit_max is None and torch.isinf(attn.take_logit_max()).all()


@pytest.mark.parametrize("alpha", [0.3, 0.5, 1.0])
def test_qk_clip_scales_each_heads_queries_and_keys_by_its_formula(alpha):
    """Kimi K2's QK-Clip on a model with RoPE, biases and a soft-cap: head h's rows of W_q (and b_q) × γ_h^α, of
    W_k × γ_h^(1−α), γ_h = min(1, τ/S_h), S_h the uncapped max; afterwards each clipped head's max is τ."""
    model, x = build("pre", "rmsnorm", L=1, bias=True, attn_softcap=0.5), x_in().detach()
    attn, p, m = model.blocks[0].attn, Params.of(model.blocks[0]), described(model.cfg)
    s = causal_max(m.raw_scores(p, x))
    tau = (s.min() * 0.25 + s.max() * 0.75).item()  # between the heads' maxima: one clipped, one not
    before = {n: t.detach().clone() for n, t in attn.named_parameters()}
    clip = QKClip([attn], tau, alpha)
    attn(x)
    clip.apply()
    gamma = torch.where(s > tau, tau / s, torch.ones_like(s))
    assert (gamma < 1).sum() == 1 and tau > 0.5  # one head clipped; τ above the cap: the capped max never exceeds it
    dh = D // H
    for name, power in (("q_proj", alpha), ("k_proj", 1 - alpha)):
        for leaf in ("weight", "bias"):
            want = before[f"{name}.{leaf}"].clone()
            for h in range(H):
                want[h * dh:(h + 1) * dh] *= gamma[h] ** power
            close(getattr(attn, name).get_parameter(leaf), want, f"{name}.{leaf}")
    for name in ("v_proj.weight", "out_proj.weight"):
        assert torch.equal(attn.get_parameter(name), before[name])
    close(causal_max(m.raw_scores(Params.of(model.blocks[0]), x)), torch.minimum(s, torch.full_like(s, tau)),
          "the maxima after the clip")


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_emb_proj_maps_the_embedding_in_and_the_final_state_out(pos):
    """OSP's projections: P_in on the embedding (token plus position), P_out between the final norm and the head;
    two matrices, orthogonal at init, not tied."""
    model, idx = build("pre", "rmsnorm", L=2, emb_proj=True, pos=pos), idx_in()
    for proj in (model.emb_in.weight, model.emb_out.weight):
        close(proj @ proj.T, torch.eye(D, dtype=proj.dtype), "P·Pᵀ at init")
    assert not torch.allclose(model.emb_in.weight, model.emb_out.weight)
    with torch.no_grad():  # off the orthogonal group: a transposed or swapped P shows
        model.emb_in.weight.add_(0.3 * torch.randn_like(model.emb_in.weight))
        model.emb_out.weight.add_(0.3 * torch.randn_like(model.emb_out.weight))
    assert_same_function(model(idx)[0], _logits(model, idx, "pre"), leaves(model))


def test_every_new_choice_at_once_gives_the_whole_model_its_formula():
    model = build("peri", "derf", L=2, gain="zero_centred", qk_norm="full", qk_norm_at="after_rope", v_norm=True,
                  attn_softcap=2.0, logit_softcap=3.0, attn_gate="head", depth_scaled=True)
    idx = idx_in()
    assert_same_function(model(idx)[0], _logits(model, idx, "peri", depth_scaled=True), leaves(model))


@pytest.mark.parametrize("mlp", ["swiglu", "gelu", "geglu"])
def test_each_mlp_is_its_formula(mlp):
    model = build("pre", L=1, mlp=mlp, bias=True)
    block, x = model.blocks[0], x_in()
    assert_same_function(block.mlp(x), Model(mlp=mlp).mlp_out(Params.of(block), x), leaves(block.mlp, x=x))
    d_ff = block.mlp.down.in_features
    assert d_ff == (4 * D if mlp == "gelu" else 48)  # 8/3·16 rounded up to a multiple of 8 for the gated ones


# ---------------------------------------------------------------- init scales and Admin's profiled ω


def xavier_std(w: torch.Tensor, gain: float) -> float:
    fan_out, fan_in = w.shape
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


@pytest.mark.parametrize("mlp", ["swiglu", "geglu", "gelu"])
@pytest.mark.parametrize("placement", ["deepnorm", "subln", "pre", "post"])
def test_init_gain_beta_on_v_out_and_every_mlp_matrix_gain_one_on_q_and_k(placement, mlp):
    """DeepNorm: β = (8L)^-¼ (Wang et al. 2022); Sub-LN: β = √(log 2L) (torchscale, decoder-only); else 1."""
    L = 12
    beta = {"deepnorm": (8 * L) ** -0.25, "subln": math.sqrt(math.log(2 * L))}.get(placement, 1.0)
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=L, d_model=128, n_heads=2, seq_len=8, mlp=mlp, placement=placement,
                          norm=spec("layernorm")))
    assert model.beta == pytest.approx(beta)
    for block in (model.blocks[0], model.blocks[-1]):
        mlp_matrices = [getattr(block.mlp, n) for n in ("gate", "up", "down") if hasattr(block.mlp, n)]
        assert len(mlp_matrices) == (2 if mlp == "gelu" else 3)
        for proj, gain in [(block.attn.q_proj, 1.0), (block.attn.k_proj, 1.0), (block.attn.v_proj, beta),
                           (block.attn.out_proj, beta), *((m, beta) for m in mlp_matrices)]:
            assert proj.weight.std().item() == pytest.approx(xavier_std(proj.weight, gain), rel=0.06)


def test_admin_profiles_omega_from_the_variances_of_the_sublayers_before():
    """ω_1 = 1 and ω_{i+1} = √(Var[ω_i·x_i] + Var[f_i(x_i)]) sublayer by sublayer (Liu et al. 2020, the reference
    code); x_{i+1} = N(ω_i·x_i + f_i(x_i)). Then each ω_i is a trained vector filled with its value."""
    model = build("admin", "layernorm", L=2)
    with torch.no_grad():  # the parameters ω hold before profiling play no part in it
        for name, t in model.named_parameters():
            if "omega" in name:
                t.fill_(7.0)
    idx = idx_in()
    m, p = Model(norm="layernorm", n_heads=H), Params.of(model)
    expected, omega = [], 1.0
    with torch.no_grad():
        x = p.tensor("tok_emb.weight")[idx]
        for i in range(2):
            bp = p.block(i)
            for f, name in ((m.attention, "norm1"), (m.mlp_out, "norm2")):
                out = f(bp, x)
                expected.append(omega)
                nxt = math.sqrt((omega * x).var(correction=0).item() + out.var(correction=0).item())
                x, omega = m.N(bp[name], omega * x + out), nxt
    assert model.data_init(idx) is True
    got = [model.blocks[i].get_parameter(n) for i in range(2) for n in ("omega1", "omega2")]
    assert all(torch.equal(v, v[:1].expand_as(v)) for v in got)  # one value per sublayer, in every feature
    assert [v[0].item() for v in got] == pytest.approx(expected, rel=1e-6)  # profiled in fp32


# ---------------------------------------------------------------- 2023–2026 placements: HybridNorm, NormFormer, B2T,
# ---------------------------------------------------------------- ResiDual; GPAS on every placement

NEW_PLACEMENTS = ["hybrid", "normformer", "b2t"]
ALL_PLACEMENTS = NORMED + ["rezero", "none"] + NEW_PLACEMENTS + ["resi_dual"]


def stated(placement: str, norm_type: str = "rmsnorm", **kw) -> Model:
    """The new placements' models as their papers state them (never read from the built model's config):
    HybridNorm normalizes q, k and v per head; the paper's NormFormer has the head scale and the post-activation
    norm (and no residual scale)."""
    paper = {"hybrid": dict(qk_norm="per_head", v_norm=True),
             "normformer": dict(head_scale=True, post_act_norm=True)}.get(placement, {})
    return Model(norm=norm_type, n_heads=H, **{**paper, **kw})


def stated_logits(model: GPT, idx: torch.Tensor, placement: str, m: Model, **kw) -> torch.Tensor:
    return logits(m, Params.of(model), idx, placement, model.cfg.n_layers, **kw)


@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm", "derf"])
@pytest.mark.parametrize("placement", NEW_PLACEMENTS)
def test_each_new_placement_is_its_formula(placement, norm_type):
    """HybridNorm: Z = N(X + Attn_QKV-norm(X)), X' = Z + FFN(Z); NormFormer: x + N_a(Attn_γ(N1 x)), then
    h + W_down·N_m(act(W_up·N2 h)); B2T: x_a = N1(x + Attn(x)), y = N2(x_a + FFN(x_a) + x). Block ℓ = 2 of 3."""
    model = build(placement, norm_type, L=3, bias=True)
    block, x = model.blocks[1], x_in()
    want = stated(placement, norm_type).block(placement, Params.of(block), x, L=3, ell=2)
    assert_same_function(block(x), want, leaves(block, x=x))


def test_hybrid_norms_q_k_and_v_per_head_and_never_the_attention_input():
    block = build("hybrid", "rmsnorm", L=2).blocks[1]
    assert not hasattr(block, "norm1") and block.norm2.weight.shape == (D,)
    for name in ("q_norm", "k_norm", "v_norm"):
        assert getattr(block.attn, name).weight.shape == (D // H,), name  # per head: a gain of d_head


def test_resi_dual_block_carries_the_post_ln_and_the_dual_stream():
    """x ← N(x + F(x)) and d ← d + F(x), sublayer by sublayer; the two streams enter with different values."""
    block = build("resi_dual", "layernorm", L=2, bias=True).blocks[1]
    pair = torch.cat((x_in(), x_in(seed=5)), dim=-1).detach().requires_grad_()
    want = Model(norm="layernorm", n_heads=H).block("resi_dual", Params.of(block), pair, L=2, ell=2)
    assert_same_function(block(pair), want, leaves(block, pair=pair))


@pytest.mark.parametrize("depth_scaled", [False, True])
@pytest.mark.parametrize("placement,first_pre", [("hybrid", False), ("hybrid", True), ("normformer", False),
                                                 ("b2t", False), ("resi_dual", False)])
def test_the_whole_model_of_each_new_placement_is_its_formula(placement, first_pre, depth_scaled):
    """Embedding, 3 blocks, the final norm (ResiDual: on the dual stream, added to the Post-LN stream), the head;
    HybridNorm* (first_pre): block 1 is Pre-LN, with the model's QKV-norm."""
    model, idx = build(placement, "rmsnorm", L=3, depth_scaled=depth_scaled, first_pre=first_pre), idx_in()
    kinds = [type(b).__name__ for b in model.blocks]
    assert kinds[0] == ("PreNormBlock" if first_pre else kinds[1]) and kinds[1] == kinds[2]
    assert (model.final_norm is not None) == FINAL_NORM[placement]
    want = stated_logits(model, idx, placement, stated(placement), depth_scaled=depth_scaled, first_pre=first_pre)
    assert_same_function(model(idx)[0], want, leaves(model))


@pytest.mark.parametrize("head_scale,post_act_norm,resid_scale", [(True, True, True), (False, False, False),
                                                                  (False, True, True), (True, False, False)])
@pytest.mark.parametrize("mlp", ["swiglu", "gelu"])
def test_normformer_options_are_their_formula(head_scale, post_act_norm, resid_scale, mlp):
    """γ_h: one per head (init 1), before W_O; N_m over the MLP's hidden width; λ_resid per feature (init 1)."""
    opts = dict(head_scale=head_scale, post_act_norm=post_act_norm, resid_scale=resid_scale)
    torch.manual_seed(0)
    fresh = GPT(GPTConfig(n_layers=2, d_model=D, n_heads=H, seq_len=T, norm=spec("layernorm"), mlp=mlp,
                          placement="normformer", **opts))
    block = fresh.blocks[0]
    d_ff = block.mlp.down.in_features
    assert (None if block.attn.head_scale is None else block.attn.head_scale.tolist()) == ([1.0] * H if head_scale
                                                                                           else None)
    assert (None if block.mlp.inner_norm is None else block.mlp.inner_norm.weight.shape) == (
        (d_ff,) if post_act_norm else None)
    assert (None if block.resid_scale is None else block.resid_scale.tolist()) == ([1.0] * D if resid_scale else None)
    block, x = randomize(fresh.double()).blocks[1], x_in()
    want = Model(norm="layernorm", n_heads=H, mlp=mlp, **opts).block("normformer", Params.of(block), x, L=2, ell=2)
    assert_same_function(block(x), want, leaves(block, x=x))


@pytest.mark.parametrize("placement", ALL_PLACEMENTS)
def test_gpas_is_its_formula_on_every_placement(placement):
    """g(x) = x − SiLU(a)·sg(x), a per block: after each add where the stream is not normed after it, on the
    shortcut inside Post-LN's norm; sg: the backward pass sees g as the identity (the gradients are compared)."""
    model = build(placement, "layernorm", L=3, bias=True, gpas=True)
    block, x = model.blocks[1], x_in()
    assert block.gpas_gate.shape == (1,)
    if placement == "resi_dual":
        x = torch.cat((x, x_in(seed=5)), dim=-1).detach().requires_grad_()
    want = stated(placement, "layernorm", gpas=True).block(placement, Params.of(block), x, L=3, ell=2)
    assert_same_function(block(x), want, leaves(block, x=x))


@pytest.mark.parametrize("placement", ["mix", "hybrid", "resi_dual"])
def test_gpas_gives_the_whole_model_its_formula(placement):
    model, idx = build(placement, "rmsnorm", L=4, gpas=True, post_fraction=0.5, first_pre=placement == "hybrid"), \
        idx_in()
    want = stated_logits(model, idx, placement, stated(placement, gpas=True), post_fraction=0.5,
                         first_pre=placement == "hybrid")
    assert_same_function(model(idx)[0], want, leaves(model))


def test_gpas_starts_as_the_identity_and_its_gradient_skips_the_scale():
    """a = 0: SiLU(0) = 0, the same model as without GPAS. With a ≠ 0 the stream shrinks by 1 − SiLU(a) while
    ∂g(x)/∂x stays the identity."""
    torch.manual_seed(0)
    plain = GPT(GPTConfig(n_layers=2, d_model=D, n_heads=H, seq_len=T, placement="pre"))
    torch.manual_seed(0)
    gpas = GPT(GPTConfig(n_layers=2, d_model=D, n_heads=H, seq_len=T, placement="pre", gpas=True))
    assert all(b.gpas_gate.item() == 0.0 for b in gpas.blocks)
    idx = idx_in()
    torch.testing.assert_close(gpas(idx)[0], plain(idx)[0])
    block = gpas.blocks[0]
    with torch.no_grad():
        block.gpas_gate.fill_(2.0)
    x = torch.randn(B, T, D, requires_grad=True)
    y = block.scaled(x)
    torch.testing.assert_close(y, x * (1 - torch.nn.functional.silu(torch.tensor(2.0))))
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, torch.ones_like(x))
