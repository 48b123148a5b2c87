"""Pre-LN and Sub-LN: the norm sits at the entrance of each sublayer, the residual stream is never normed."""

from __future__ import annotations

import math

import torch

from normtrain.model.placements.base import Block, register_placement
from normtrain.norms import NormSpec


@register_placement("pre")
class PreNormBlock(Block):
    """Pre-LN (GPT-2, LLaMA; Xiong et al. 2020): x ← x + F(N(x)), and a final norm before the head.

        x ──┬── N1 ── Attn ──(+)──┬── N2 ── MLP ──(+)──▶
            └─────────────────┘   └─────────────────┘

    The add in the middle is fused with N2 (one pass over the residual stream).
    """

    final_norm = True
    uses_alpha = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, h = self.added_normed(self.norm2, self.attn(self.norm1(x)), x)  # h = x + Attn(N1(x)); y = N2(h)
        return self.added(h, self.mlp(y))


@register_placement("subln")
class SubLNBlock(PreNormBlock):
    """Sub-LN (Wang et al. 2022b, "Foundation Transformers" / Magneto): Pre-LN plus a norm inside each sublayer,
    right before the matrix that writes back to the residual stream:

        x ← x + W_out · N_a(Attn(N1(x)))         (N_a before the attention output projection)
        x ← x + W_down · N_m(act(W_up · N2(x)))  (N_m after the activation; gated: after act(gate)·up)

        x ──┬── N1 ── Attn ── N_a ── W_out ──(+)──┬── N2 ── W_up ── act ── N_m ── W_down ──(+)──▶
            └─────────────────────────────────┘   └────────────────────────────────────────┘

    Init (the paper's Theorem and torchscale's ``subln=True`` for a decoder-only model of L blocks): v_proj,
    out_proj and every MLP matrix (fc1 and fc2; SwiGLU, GeGLU: gate, up and down) are Xavier-normal with gain
    β = √(log 2L) (1.58, 1.78, 1.97 for L = 6, 12, 24: scaled *up*, unlike DeepNorm); q_proj and k_proj keep
    gain 1. ``placement.beta`` overrides it.
    """

    def build_norms(self, spec: NormSpec, d_model: int) -> None:
        super().build_norms(spec, d_model)
        self.attn.inner_norm = self.make_norm(spec, d_model)
        self.mlp.inner_norm = self.make_norm(spec, self.mlp.down.in_features)

    @classmethod
    def scaling(cls, n_layers: int) -> tuple[float, float]:
        return 1.0, math.sqrt(math.log(2 * n_layers))
