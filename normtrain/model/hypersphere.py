"""The parts of nGPT (Loshchilov et al., ICLR 2025, "nGPT: Normalized Transformer with Representation Learning on
the Hypersphere") that live outside its block: the scale parametrization, the scaled and normalized q and k, the
scaled u and ν of the MLP, and the unit-norm projection of the weights after each optimizer step.

The block itself is ``normtrain.model.placements.ngpt``; the attention and MLP modules hold the parts set here
(``CausalSelfAttention.qk_sphere``, ``SwiGLU.uv_scale``), as Sub-LN's inner norms are set on them.
"""

from __future__ import annotations

import torch
from torch import nn

from normtrain.norms import Norm


class ScaledVector(nn.Module):
    """A learned vector s stored at a scale (§2.5 of the paper): s = s_stored · (s_init / s_scale), s_stored
    initialized to s_scale, so s starts at s_init.

    Why: Adam moves every stored entry by about the learning rate, so the stored scale sets how fast s moves
    (an s_scale of 1/√d makes s learn √d·s_init times faster than a plain parameter at s_init would). ``factor``
    multiplies the result (the √d_model of s_ν, §2.4.2).
    """

    def __init__(self, n: int, init: float, scale: float, factor: float = 1.0):
        super().__init__()
        self.init, self.scale, self.factor = float(init), float(scale), float(factor)
        self.stored = nn.Parameter(torch.full((n,), self.scale))

    def forward(self) -> torch.Tensor:
        return self.stored * (self.init / self.scale * self.factor)

    def extra_repr(self) -> str:
        return f"{self.stored.numel()}, init={self.init:g}, scale={self.scale:g}, factor={self.factor:g}"


class SphereQK(nn.Module):
    """q ← Norm(q) ⊙ s_qk and k ← Norm(k) ⊙ s_qk (§2.3.2), each head normalized over its d_k features after
    RoPE (as NVIDIA/ngpt), one s_qk entry per feature of every head (d_model in all; s_qk,init = 1,
    s_qk,scale = 1/√d_model). The attention then multiplies q·kᵀ by √d_k, not 1/√d_k (§2.3.2): with unit q and
    k the logits are cosines, which 1/√d_k would squash into a near-uniform softmax."""

    def __init__(self, norm: Norm, n_heads: int, head_dim: int, d_model: int):
        super().__init__()
        self.norm, self.n_heads, self.head_dim = norm, n_heads, head_dim
        self.s_qk = ScaledVector(n_heads * head_dim, init=1.0, scale=d_model**-0.5)

    def forward(self, t: torch.Tensor) -> torch.Tensor:  # (B, H, T, d_k)
        return self.norm(t) * self.s_qk().view(self.n_heads, 1, self.head_dim).to(t.dtype)


class ScaledUV(nn.Module):
    """u ← u ⊙ s_u and ν ← ν ⊙ s_ν·√d_model (§2.4.2) in the gated MLP u ⊙ SiLU(ν): s_u,init = s_ν,init = 1,
    s_u,scale = s_ν,scale = 1. The √d_model puts ν, whose entries are cosines of order 1/√d_model on the unit
    sphere, back in the range where SiLU is not linear.

    NVIDIA/ngpt scales u by √d_model too (one s_uv over both): the same function, since nGPT normalizes the
    MLP's output, which removes any constant factor on u.
    """

    def __init__(self, d_ff: int, d_model: int):
        super().__init__()
        self.s_u = ScaledVector(d_ff, init=1.0, scale=1.0)
        self.s_nu = ScaledVector(d_ff, init=1.0, scale=1.0, factor=d_model**0.5)

    def forward(self, u: torch.Tensor, nu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return u * self.s_u().to(u.dtype), nu * self.s_nu().to(nu.dtype)


@torch.no_grad()
def unit_norm_(weight: torch.Tensor, dim: int) -> None:
    """Divide ``weight`` in place by its L2 norms along ``dim`` (each vector along ``dim`` gets norm 1), in fp32
    at least; a zero vector stays zero."""
    w = weight if weight.dtype == torch.float64 else weight.float()
    weight.copy_(w / torch.linalg.vector_norm(w, dim=dim, keepdim=True).clamp_min(1e-30))
