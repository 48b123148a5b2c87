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


# ------------------------------------------------------- norms (Ba 2016; Zhang & Sennrich 2019; Zhu 2025; Derf)

def gain(w: torch.Tensor | None, form: str) -> torch.Tensor | None:
    """γ from the stored gain ``w``: itself (a vector, or one scalar that broadcasts), 1 + w when zero-centred
    (Gemma, Megatron's layernorm-1p), none at all."""
    if w is None or form == "none":
        return None
    return 1 + w if form == "zero_centred" else w


def norm(kind: str, x: torch.Tensor, prm: dict[str, torch.Tensor], gain_form: str = "vector") -> torch.Tensor:
    """N(x) over the last dimension, for the norm type ``kind``, with the gains and biases ``prm`` (γ in the form
    ``gain_form``; no γ means no β either)."""
    d = x.shape[-1]
    g, b = gain(prm.get("weight"), gain_form), prm.get("bias")
    if kind == "layernorm":  # (x − μ)/√(σ² + ε)
        mu = x.mean(-1, keepdim=True)
        y = (x - mu) / torch.sqrt((x - mu).pow(2).mean(-1, keepdim=True) + EPS)
    elif kind == "rmsnorm":  # x/√(mean(x²) + ε)
        y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    elif kind == "prmsnorm":  # the RMS from the first k = ⌈p·d⌉ features
        k = math.ceil(P * d)
        y = x / torch.sqrt(x[..., :k].pow(2).mean(-1, keepdim=True) + EPS)
    elif kind == "dyt":  # tanh(α·x), α one scalar
        y = torch.tanh(prm["alpha"] * x)
    elif kind == "derf":  # erf(α·x + s), α and s one scalar each
        y = torch.erf(prm["alpha"] * x + prm["shift"])
    elif kind == "batchnorm":  # per feature, statistics over every token of the batch (training mode)
        flat = x.reshape(-1, d)
        mu, var = flat.mean(0), flat.var(0, unbiased=False)
        y = (x - mu) / torch.sqrt(var + EPS)
    elif kind == "batchnorm_causal":  # position t: statistics over every sequence's positions 0…t only
        out = []
        for t in range(x.shape[1]):
            seen = x[:, : t + 1].reshape(-1, d)
            mu, var = seen.mean(0), seen.var(0, unbiased=False)
            out.append((x[:, t] - mu) / torch.sqrt(var + EPS))
        y = torch.stack(out, dim=1)
    else:
        raise AssertionError(f"no formula for the norm {kind}")
    if g is not None:
        y = y * g
    return y if b is None else y + b


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
    gain: str = "vector"  # vector | zero_centred | scalar | none
    qk_norm_at: str = "before_rope"  # before_rope | after_rope
    qk_gain: bool = True  # false: QK- and V-norm without γ (nor β)
    v_norm: bool = False  # the norm on v too, in QK-norm's form (per head without QK-norm)
    attn_softcap: float = 0.0  # c·tanh(s/c) on s = q·kᵀ/√d_h (Gemma 2); 0 = none
    logit_softcap: float = 0.0  # c·tanh(z/c) on the output logits; 0 = none
    attn_gate: str = "none"  # Y ⊙ σ(X·W_θ) before W_O: per head or per feature (Qiu et al. 2025)
    head_scale: bool = False  # NormFormer: γ_h times head h's output, before W_O
    post_act_norm: bool = False  # NormFormer: a norm on the MLP's hidden vector, after the activation
    resid_scale: bool = False  # NormFormer: λ ⊙ on the MLP's shortcut
    gpas: bool = False  # GPAS: g(x) = x − SiLU(a)·sg(x) at each residual add
    emb_proj: bool = False  # OSP: x_0 = P_in·E[idx], logits = W_head·P_out·h (two untied d × d matrices)
    streams: int = 4  # mHC: n, the residual streams each token carries

    def N(self, prm: dict[str, torch.Tensor], x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return norm(self.norm, x, prm, self.gain) * scale

    def head_norm(self, p: Params, name: str, t: torch.Tensor) -> torch.Tensor:
        """QK- or V-norm ``name`` on heads t (B, H, T, d_h): per head over d_h, or (full) over a token's d."""
        prm, form = (p[f"attn.{name}"], self.gain) if self.qk_gain else ({}, "none")
        if (self.qk_norm if self.qk_norm != "none" else "per_head") == "per_head":
            return norm(self.norm, t, prm, form)
        B, H, T, dh = t.shape
        whole = norm(self.norm, t.transpose(1, 2).reshape(B, T, H * dh), prm, form)
        return whole.reshape(B, T, H, dh).transpose(1, 2)

    def qkv(self, p: Params, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each head's q, k (normed and rotated as configured) and v, (B, H, T, d_h)."""
        B, T, d = x.shape
        H, dh = self.n_heads, d // self.n_heads
        q, k, v = (linear(x, p[f"attn.{n}_proj"]).reshape(B, T, H, dh).transpose(1, 2) for n in "qkv")
        qk = self.qk_norm != "none"
        if qk and self.qk_norm_at == "before_rope":
            q, k = self.head_norm(p, "q_norm", q), self.head_norm(p, "k_norm", k)
        if self.rope:
            q, k = rope(q), rope(k)
        if qk and self.qk_norm_at == "after_rope":  # nGPT's place: on the rotated vectors
            q, k = self.head_norm(p, "q_norm", q), self.head_norm(p, "k_norm", k)
        if self.v_norm:
            v = self.head_norm(p, "v_norm", v)
        return q, k, v

    def raw_scores(self, p: Params, x: torch.Tensor) -> torch.Tensor:
        """The attention logits q·kᵀ/√d_h (B, H, T, T) before any cap and mask."""
        q, k, _ = self.qkv(p, x)
        return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])

    def attention(self, p: Params, x: torch.Tensor, inner: dict | None = None, scale: float = 1.0) -> torch.Tensor:
        """softmax(cap(q·kᵀ/√d_h) + causal mask)·v per head, [⊙ σ(x·W_θ)], heads concatenated, [N_inner], W_out."""
        B, T, d = x.shape
        H, dh = self.n_heads, d // self.n_heads
        q, k, v = self.qkv(p, x)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        if self.attn_softcap:  # after the 1/√d_h scale, before the mask (Gemma 2)
            scores = self.attn_softcap * torch.tanh(scores / self.attn_softcap)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        y = (torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v).transpose(1, 2)  # (B, T, H, d_h)
        if self.attn_gate == "head":  # one gate per head: W_θ maps d to H
            y = y * torch.sigmoid(linear(x, p["attn.gate_proj"]))[..., None]
        elif self.attn_gate == "elementwise":  # one gate per feature of the concatenated heads
            y = y * torch.sigmoid(linear(x, p["attn.gate_proj"])).reshape(B, T, H, dh)
        if self.head_scale:  # NormFormer's HeadScaleMHA: concat(γ_1·head_1, …, γ_H·head_H)·W_O
            y = y * p.tensor("attn.head_scale").reshape(1, 1, H, 1)
        y = y.reshape(B, T, d)
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
        g = lambda t: t - F.silu(p.tensor("gpas_gate")) * t.detach() if self.gpas else t  # noqa: E731
        if placement in ("pre", "subln", "peri", "reorder", "rezero", "none", "normformer", "hybrid"):
            return self.stream_block(placement, p, x, A, M, N, g)  # g after each add: the stream is not normed
        # The Post-LN family: the add is inside a norm, so GPAS scales the shortcut (dandingsky/GPAS, deeppost_gpas)
        if placement in ("post", "deepnorm"):  # N(α·x + F(x)); DeepNorm: α = (2L)^¼, on the shortcut
            a = (2 * L) ** 0.25 if placement == "deepnorm" else 1.0
            h = N("norm1", a * g(x) + A(x))
            return N("norm2", a * g(h) + M(h))
        if placement == "admin":  # N(ω ⊙ x + F(x))
            h = N("norm1", p.tensor("omega1") * g(x) + A(x))
            return N("norm2", p.tensor("omega2") * g(h) + M(h))
        if placement == "b2t":  # x_a = N(x + Attn(x)); y = N(x_a + FFN(x_a) + x) (Takase et al. 2023)
            xa = N("norm1", g(x) + A(x))
            return N("norm2", g(xa) + M(xa) + g(x))
        if placement == "mhc":  # x ← H_res·x + H_postᵀ·F(N(H_pre·x)) at each sublayer, on n streams
            x = mhc_layer(p["attn_hc"], x, self.streams, lambda h: A(N("norm1", h)), g)
            return mhc_layer(p["mlp_hc"], x, self.streams, lambda h: M(N("norm2", h)), g)
        if placement == "resi_dual":  # x ← N(x + F(x)), d ← d + F(x): the pair (x, d) side by side
            xs, d = x.chunk(2, dim=-1)
            f = A(xs)
            xs, d = N("norm1", g(xs) + f), g(d + f)
            f = M(xs)
            return torch.cat((N("norm2", g(xs) + f), g(d + f)), dim=-1)
        raise AssertionError(f"no formula for the placement {placement}")

    def stream_block(self, placement: str, p: Params, x, A, M, N, g):
        """The placements whose residual stream leaves the block un-normed (GPAS g after each add)."""
        if placement == "pre":  # x + F(N(x))
            h = g(x + A(N("norm1", x)))
            return g(h + M(N("norm2", h)))
        if placement == "subln":  # Pre-LN, and a norm before W_out and before W_down
            h = g(x + A(N("norm1", x), p["attn.inner_norm"]))
            return g(h + M(N("norm2", h), p["mlp.inner_norm"]))
        if placement == "peri":  # x + N_out(F(N_in(x)))
            h = g(x + N("out_norm1", A(N("norm1", x))))
            return g(h + N("out_norm2", M(N("norm2", h))))
        if placement == "reorder":  # x + N(F(x)) (OLMo-2)
            h = g(x + N("norm1", A(x)))
            return g(h + N("norm2", M(h)))
        if placement == "rezero":  # x + a·F(x)
            h = g(x + p.tensor("a1") * A(x))
            return g(h + p.tensor("a2") * M(h))
        if placement == "none":
            h = g(x + A(x))
            return g(h + M(h))
        if placement == "normformer":  # x + N_a(Attn_γ(N1(x))); λ ⊙ h + W_down·N_m(act(W_up·N2(h)))
            h = g(x + N("out_norm1", A(N("norm1", x))))
            lam = p.tensor("resid_scale") if self.resid_scale else 1.0
            return g(lam * h + M(N("norm2", h), p["mlp.inner_norm"] if self.post_act_norm else None))
        # hybrid (HybridNorm): Y = X + Attn(X) (QKV-normed), Z = N(Y), X' = Z + FFN(Z)
        z = N("norm2", g(x + A(x)))
        return g(z + M(z))


# ---------------------------------------------------------------- mHC (Xie et al. 2025, arXiv:2512.24880)

MHC_EPS = 1e-6  # the reference code's floor (Megatron-LM, transformers' DeepSeek-V4): H_pre, Sinkhorn entries, sums
MHC_RMS_EPS = 1e-6  # ε of RMSNorm(vec x_l), inside the root
MHC_ITERS = 20  # t_max (§4.2)


def sinkhorn_knopp(h: torch.Tensor, iters: int = MHC_ITERS, eps: float = MHC_EPS) -> torch.Tensor:
    """Eq. 9 on each n × n matrix (the last two dimensions): M⁰ = exp(H̃), then t_max times M ← T_r(T_c(M)), T_c
    dividing every column by its sum and T_r every row by its sum, each sum plus ε, except the first T_c's,
    whose result is floored by + ε instead (as the reference code's softmax + ε)."""
    m = torch.exp(h)
    for t in range(iters):
        col = m.sum(dim=-2, keepdim=True)
        m = m / (col + eps) if t else m / col + eps  # T_c
        m = m / (m.sum(dim=-1, keepdim=True) + eps)  # T_r
    return m


def mhc_mappings(prm: dict[str, torch.Tensor], x: torch.Tensor, n: int):
    """Eq. 7–8 for each token of x (B, T, n·d) = vec(x_l): x̃ = RMSNorm(vec x_l) without a gain; [H̃_pre, H̃_post,
    vec H̃_res] = α ⊙ (x̃ φ) + b, φ's columns in that order (``prm["weight"]`` is φᵀ, an nn.Linear's), mat(·) row
    by row; H_pre = σ(H̃_pre) + ε, H_post = 2σ(H̃_post), H_res = Sinkhorn-Knopp(H̃_res)."""
    xt = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + MHC_RMS_EPS)
    proj = xt @ prm["weight"].T  # x̃ φ: (B, T, 2n + n²)
    a, b = prm["alpha"], prm["bias"]
    h_pre = a[0] * proj[..., :n] + b[:n]
    h_post = a[1] * proj[..., n:2 * n] + b[n:2 * n]
    h_res = a[2] * proj[..., 2 * n:].reshape(*x.shape[:-1], n, n) + b[2 * n:].reshape(n, n)
    return torch.sigmoid(h_pre) + MHC_EPS, 2 * torch.sigmoid(h_post), sinkhorn_knopp(h_res)


def mhc_layer(prm: dict[str, torch.Tensor], x: torch.Tensor, n: int, F, g) -> torch.Tensor:
    """Eq. 3: x_{l+1} = H_res x_l + H_postᵀ F(H_pre x_l) per token, x_l the n × d matrix of streams (stream j in
    features j·d … (j+1)·d − 1 of x); ``F`` includes the Pre-LN norm; ``g`` GPAS on the result."""
    B, T, nd = x.shape
    xs = x.reshape(B, T, n, nd // n)
    pre, post, res = mhc_mappings(prm, x, n)
    f = F(torch.einsum("btj,btjd->btd", pre, xs))  # the 1 × n H_pre times the n × d x_l
    out = torch.einsum("btij,btjd->btid", res, xs) + torch.einsum("bti,btd->btid", post, f)  # H_postᵀ is n × 1
    return g(out.reshape(B, T, nd))


# Which placements end in a norm before the LM head (the papers' models): Pre-LN's family does, Post-LN's does not
# (ResiDual's final norm is on its dual stream only).
FINAL_NORM = {"pre": True, "subln": True, "peri": True, "reorder": True, "post": False, "deepnorm": False,
              "admin": False, "rezero": False, "none": False, "hybrid": True, "normformer": True, "b2t": False,
              "resi_dual": True, "mhc": True}


def n_post_blocks(post_fraction: float, L: int) -> int:
    """Mix-LN: the first ⌊f·L⌋ blocks are Post-LN."""
    return math.floor(post_fraction * L + 1e-9)


def logits(m: Model, p: Params, idx: torch.Tensor, placement: str, L: int, depth_scaled: bool = False,
           post_fraction: float = 0.25, learned_pos: bool = False, first_pre: bool = False) -> torch.Tensor:
    """The whole decoder: embeddings, L blocks, the final norm (never depth-scaled) where the placement has
    one, the LM head. ResiDual: both streams start at the embedding; the head reads x + N_final(d).
    HybridNorm* (``first_pre``): block 1 is Pre-LN; OSP's projections around them."""
    x = p.tensor("tok_emb.weight")[idx]
    if learned_pos:
        x = x + p.tensor("pos_emb.weight")[: idx.shape[1]]
    if m.emb_proj:
        x = x @ p.tensor("emb_in.weight").T
    kinds = [placement] * L
    if placement == "mix":
        n_post = n_post_blocks(post_fraction, L)
        kinds = ["post"] * n_post + ["pre"] * (L - n_post)
    if first_pre:
        kinds[0] = "pre"
    if placement == "resi_dual":
        x = torch.cat((x, x), dim=-1)
    if placement == "mhc":  # every stream starts as the embedding
        x = torch.cat([x] * m.streams, dim=-1)
    for i, kind in enumerate(kinds):
        x = m.block(kind, p.block(i), x, L, i + 1, depth_scaled)
    if placement == "mhc":  # the mean of the streams (Megatron-LM's output_contract), then the final norm
        x = torch.stack(x.chunk(m.streams, dim=-1)).mean(0)
    if placement == "resi_dual":
        xs, d = x.chunk(2, dim=-1)
        x = xs + m.N(p["final_norm"], d)
    elif FINAL_NORM[kinds[-1]]:
        x = m.N(p["final_norm"], x)
    if m.emb_proj:
        x = x @ p.tensor("emb_out.weight").T
    z = x @ p.tensor("lm_head.weight").T
    return m.logit_softcap * torch.tanh(z / m.logit_softcap) if m.logit_softcap else z

