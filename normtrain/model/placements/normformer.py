"""NormFormer: Pre-LN with three more norms (or scales) inside each block."""

from __future__ import annotations

import torch
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.config import GPTConfig
from normtrain.model.placements.base import Block, register_placement
from normtrain.model.placements.pre import PreNormBlock
from normtrain.norms import NormSpec


@register_placement("normformer")
class NormFormerBlock(PreNormBlock):
    """NormFormer (Shleifer et al. 2021, "NormFormer: Improved Transformer Pretraining with Extra
    Normalization"): Pre-LN, plus a norm on the attention's output before the add, a learned scale γ_h per head
    (init 1) on each head's output before W_O (``placement.head_scale``), and a norm after the MLP's activation,
    over its hidden width (``placement.post_act_norm``; gated MLPs: after act(gate)·up); optionally a learned
    per-feature λ (init 1) on the MLP's shortcut (``placement.resid_scale``, off as in the paper's larger models):

        h  = x + N_a(W_O · concat_h(γ_h · head_h(N1(x))))
        x' = λ ⊙ h + W_down · N_m(act(W_up · N2(h)))

        x ──┬── N1 ── Attn(γ_h) ── N_a ──(+)──┬── N2 ── W_up ── act ── N_m ── W_down ──(+)──▶
            └──────────────────────────┘      └───────────── λ⊙ ──────────────────┘

    The head scale sits before W_O, per head, as the paper's HeadScaleMHA writes it; fairseq's
    ``transformer_layer.py`` multiplies after W_O instead (d_head-wide slices of the projected output), a
    different function once W_O mixes the heads. A final norm before the head, as in Pre-LN.
    """

    def __init__(self, attn: CausalSelfAttention, mlp: nn.Module, d_model: int, norm: NormSpec,
                 alpha: float = 1.0, *, head_scale: bool = True, post_act_norm: bool = True,
                 resid_scale: bool = False, **kw):
        super().__init__(attn, mlp, d_model, norm, alpha, **kw)
        self.out_norm1 = self.make_norm(norm, d_model)
        if head_scale:
            attn.head_scale = nn.Parameter(torch.ones(attn.n_heads))
        if post_act_norm:
            mlp.inner_norm = self.make_norm(norm, mlp.down.in_features)
        self.resid_scale = nn.Parameter(torch.ones(d_model)) if resid_scale else None

    @classmethod
    def from_config(cls, cfg: GPTConfig, layer: int, attn: CausalSelfAttention, mlp: nn.Module,
                    alpha: float) -> Block:
        return cls(attn, mlp, cfg.d_model, cfg.norm, alpha, layer=layer, gpas=cfg.gpas, head_scale=cfg.head_scale,
                   post_act_norm=cfg.post_act_norm, resid_scale=cfg.resid_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, h = self.added_normed(self.norm2, self.out_norm1(self.attn(self.norm1(x))), x)  # y = N2(h)
        return self.added(h if self.resid_scale is None else self.resid_scale * h, self.mlp(y))
