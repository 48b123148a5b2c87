"""The catalog's formulas, written from the papers' equations in plain torch ops: the independent statements that
``test_formulas.py`` holds normtrain's modules against.

Nothing here calls normtrain's code. A module only lends its parameter tensors, found by their names in its
state dict (``Params``), so that the formula and the module compute on the same leaves and their gradients can
be compared; which formula applies (the placement, the norm type, α, the depth scale, the QK form) is decided
here from the papers, never read from the module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

EPS = 0.05  # every norm's ε in these tests: large, so that where ε sits in a formula shows
P = 0.3  # pRMSNorm's fraction: p·d is no integer for d = 8 or 16, so ⌈p·d⌉ and ⌊p·d⌋ differ
ROPE_BASE = 10000.0


class Params:
    """A module's parameters by dotted prefix: ``Params.of(block)["norm1"]`` is {"weight": ..., "bias": ...} of the
    norm named norm1, whatever wraps it (a depth-scaling wrapper, BatchNorm's inner module)."""

    def __init__(self, named: dict[str, torch.Tensor]):
        self.named = named

    @classmethod
    def of(cls, module: torch.nn.Module) -> Params:
        return cls(dict(module.named_parameters()))

    def __getitem__(self, prefix: str) -> dict[str, torch.Tensor]:
        return {name.rsplit(".", 1)[1]: t for name, t in self.named.items() if name.startswith(prefix + ".")}

    def tensor(self, name: str) -> torch.Tensor:
        return self.named[name]

    def block(self, i: int) -> Params:
        """The parameters of ``blocks.<i>``, named as in the block."""
        prefix = f"blocks.{i}."
        return Params({n[len(prefix):]: t for n, t in self.named.items() if n.startswith(prefix)})


# ---------------------------------------------------------------- norms (Ba 2016; Zhang & Sennrich 2019; Zhu 2025)

def norm(kind: str, x: torch.Tensor, prm: dict[str, torch.Tensor]) -> torch.Tensor:
    """N(x) over the last dimension, for the norm type ``kind``, with the gains and biases ``prm``."""
    d = x.shape[-1]
    w, b = prm.get("weight"), prm.get("bias")
    if kind == "layernorm":  # γ ⊙ (x − μ)/√(σ² + ε) + β
        return F.layer_norm(x, (d,), w, b, EPS)
    if kind == "rmsnorm":  # γ ⊙ x/√(mean(x²) + ε)
        return F.rms_norm(x, (d,), w, EPS)
    if kind == "prmsnorm":  # the RMS from the first k = ⌈p·d⌉ features
        k = math.ceil(P * d)
        return x / torch.sqrt(x[..., :k].pow(2).mean(-1, keepdim=True) + EPS) * w
    if kind == "dyt":  # γ ⊙ tanh(α·x) + β, α one scalar
        return w * torch.tanh(prm["alpha"] * x) + b
    if kind == "batchnorm":  # per feature, statistics over every token of the batch (training mode)
        flat = x.reshape(-1, d)
        mu, var = flat.mean(0), flat.var(0, unbiased=False)
        return (x - mu) / torch.sqrt(var + EPS) * w + b
    if kind == "batchnorm_causal":  # position t: statistics over every sequence's positions 0…t only
        out = []
        for t in range(x.shape[1]):
            seen = x[:, : t + 1].reshape(-1, d)
            mu, var = seen.mean(0), seen.var(0, unbiased=False)
            out.append((x[:, t] - mu) / torch.sqrt(var + EPS) * w + b)
        return torch.stack(out, dim=1)
    raise AssertionError(f"no formula for the norm {kind}")


# ---------------------------------------------------------------- attention (Vaswani 2017; Su 2021; QK-norm)

def rope(t: torch.Tensor) -> torch.Tensor:
    """RoPE on (B, H, T, d_h) in the half-split layout: feature i pairs with i + d_h/2 as the complex number
    z_i = t_i + j·t_{i+d_h/2}, which position m multiplies by e^{j·m·θ_i}, θ_i = base^(−2i/d_h)."""
    half = t.shape[-1] // 2
    theta = ROPE_BASE ** (-2.0 * torch.arange(half, dtype=torch.float64) / t.shape[-1])
    angle = torch.arange(t.shape[-2], dtype=torch.float64)[:, None] * theta  # (T, d_h/2)
    z = torch.complex(t[..., :half].double(), t[..., half:].double()) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat((z.real, z.imag), dim=-1).to(t.dtype)


def linear(x: torch.Tensor, prm: dict[str, torch.Tensor]) -> torch.Tensor:
    y = x @ prm["weight"].T
    return y + prm["bias"] if "bias" in prm else y


@dataclass
class Model:
    """What a model is, as the test states it: the formulas below read their choices from here."""

    norm: str = "layernorm"
    n_heads: int = 2
    qk_norm: str = "none"  # none | per_head (Qwen3, Gemma 3) | full (OLMo-2)
    rope: bool = True
    mlp: str = "swiglu"

    def N(self, prm: dict[str, torch.Tensor], x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return norm(self.norm, x, prm) * scale

    def attention(self, p: Params, x: torch.Tensor, inner: dict | None = None, scale: float = 1.0) -> torch.Tensor:
        """softmax(q·kᵀ/√d_h + causal mask)·v per head, heads concatenated, [N_inner], W_out."""
        B, T, d = x.shape
        H, dh = self.n_heads, d // self.n_heads
        q, k, v = (linear(x, p[f"attn.{n}_proj"]) for n in "qkv")
        if self.qk_norm == "full":  # one norm over the whole projection (all heads), before the split
            q, k = norm(self.norm, q, p["attn.q_norm"]), norm(self.norm, k, p["attn.k_norm"])
        q, k, v = (t.reshape(B, T, H, dh) for t in (q, k, v))
        if self.qk_norm == "per_head":  # each head's features, one gain of d_h shared by the heads
            q, k = norm(self.norm, q, p["attn.q_norm"]), norm(self.norm, k, p["attn.k_norm"])
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.rope:  # after QK-norm
            q, k = rope(q), rope(k)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        y = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, d)
        if inner is not None:  # Sub-LN: before the output projection
            y = self.N(inner, y, scale)
        return linear(y, p["attn.out_proj"])

    def mlp_out(self, p: Params, x: torch.Tensor, inner: dict | None = None, scale: float = 1.0) -> torch.Tensor:
        """GELU: W_down·gelu(W_up·x); SwiGLU: W_down·(silu(W_gate·x) ⊙ W_up·x); GeGLU: the same with GELU's tanh
        form (Gemma's gelu_pytorch_tanh); Sub-LN's norm on the hidden vector, after the activation."""
        if self.mlp == "gelu":
            h = F.gelu(linear(x, p["mlp.up"]))
        else:
            g = linear(x, p["mlp.gate"])
            act = F.silu(g) if self.mlp == "swiglu" else 0.5 * g * (1 + torch.tanh(
                math.sqrt(2 / math.pi) * (g + 0.044715 * g**3)))
            h = act * linear(x, p["mlp.up"])
        if inner is not None:
            h = self.N(inner, h, scale)
        return linear(h, p["mlp.down"])

    # ------------------------------------------------------------ one block per placement

    def block(self, placement: str, p: Params, x: torch.Tensor, L: int, ell: int, depth_scaled: bool = False):
        """Block ℓ (from 1) of an L-block model, by its paper's formula; ``depth_scaled``: LayerNorm Scaling
        (Sun et al. 2025), every norm of block ℓ times 1/√ℓ."""
        s = 1 / math.sqrt(ell) if depth_scaled else 1.0
        A = lambda t, inner=None: self.attention(p, t, inner, s)  # noqa: E731
        M = lambda t, inner=None: self.mlp_out(p, t, inner, s)  # noqa: E731
        N = lambda name, t: self.N(p[name], t, s)  # noqa: E731
        if placement == "pre":  # x + F(N(x))
            h = x + A(N("norm1", x))
            return h + M(N("norm2", h))
        if placement in ("post", "deepnorm"):  # N(α·x + F(x)); DeepNorm: α = (2L)^¼, on the shortcut
            a = (2 * L) ** 0.25 if placement == "deepnorm" else 1.0
            h = N("norm1", a * x + A(x))
            return N("norm2", a * h + M(h))
        if placement == "admin":  # N(ω ⊙ x + F(x))
            h = N("norm1", p.tensor("omega1") * x + A(x))
            return N("norm2", p.tensor("omega2") * h + M(h))
        if placement == "subln":  # Pre-LN, and a norm before W_out and before W_down
            h = x + A(N("norm1", x), p["attn.inner_norm"])
            return h + M(N("norm2", h), p["mlp.inner_norm"])
        if placement == "peri":  # x + N_out(F(N_in(x)))
            h = x + N("out_norm1", A(N("norm1", x)))
            return h + N("out_norm2", M(N("norm2", h)))
        if placement == "reorder":  # x + N(F(x)) (OLMo-2)
            h = x + N("norm1", A(x))
            return h + N("norm2", M(h))
        if placement == "rezero":  # x + a·F(x)
            h = x + p.tensor("a1") * A(x)
            return h + p.tensor("a2") * M(h)
        if placement == "none":
            h = x + A(x)
            return h + M(h)
        raise AssertionError(f"no formula for the placement {placement}")


# Which placements end in a norm before the LM head (the papers' models): Pre-LN's family does, Post-LN's does not.
FINAL_NORM = {"pre": True, "subln": True, "peri": True, "reorder": True, "post": False, "deepnorm": False,
              "admin": False, "rezero": False, "none": False}


def n_post_blocks(post_fraction: float, L: int) -> int:
    """Mix-LN: the first ⌊f·L⌋ blocks are Post-LN."""
    return math.floor(post_fraction * L + 1e-9)


def logits(m: Model, p: Params, idx: torch.Tensor, placement: str, L: int, depth_scaled: bool = False,
           post_fraction: float = 0.25, learned_pos: bool = False) -> torch.Tensor:
    """The whole decoder: embeddings, L blocks, the final norm (never depth-scaled) where the placement has
    one, the LM head."""
    x = p.tensor("tok_emb.weight")[idx]
    if learned_pos:
        x = x + p.tensor("pos_emb.weight")[: idx.shape[1]]
    kinds = [placement] * L
    if placement == "mix":
        n_post = n_post_blocks(post_fraction, L)
        kinds = ["post"] * n_post + ["pre"] * (L - n_post)
    for i, kind in enumerate(kinds):
        x = m.block(kind, p.block(i), x, L, i + 1, depth_scaled)
    if FINAL_NORM[kinds[-1]]:
        x = m.N(p["final_norm"], x)
    return x @ p.tensor("lm_head.weight").T

