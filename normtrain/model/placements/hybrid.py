"""HybridNorm: QKV-norm inside the attention, Post-LN around the FFN."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.config import GPTConfig
from normtrain.model.placements.base import Block, register_placement
from normtrain.model.placements.pre import PreNormBlock
from normtrain.norms import NormSpec

IMPLIED = {"qk_norm": "per_head", "v_norm": True}  # HybridNorm's QKV-norm, in the model's own keys


@register_placement("hybrid")
class HybridNormBlock(Block):
    """HybridNorm (Zhuo et al., NeurIPS 2025, "HybridNorm: Towards Stable and Efficient Transformer Training via
    Hybrid Normalization"; reference BryceZhuo/HybridNorm, an OLMo fork): the attention reads the raw stream and
    normalizes its queries, keys *and* values per head (a norm with a gain of d_head shared by the heads); the FFN
    is Post-LN, and its residual is the *normed* stream:

        Y  = X + Attn_QKV-norm(X)
        Z  = N(Y)
        X' = Z + FFN(Z)

        X ──┬── Attn(QKV-norm) ──(+)── N2 ──┬── MLP ──(+)──▶
            └────────────────────────┘      └──────────┘

    The QKV-norm is ``model.qk_norm=per_head`` + ``model.v_norm=true``, which this placement implies
    (``configured``; the config refuses ``model.qk_norm=full`` with it). HybridNorm* (``placement.first_pre``):
    block 0 is a Pre-LN block (its attention keeps the QKV-norm, as the reference's ``attn_norm: true,
    ffn_residual: false`` for layer 0). The stream leaving a block is not normed: a final norm before the head
    (OLMo's ``ln_f``).
    """

    final_norm = True
    uses_alpha = False

    @classmethod
    def configured(cls, cfg: GPTConfig) -> GPTConfig:
        return replace(cfg, **IMPLIED)

    @classmethod
    def from_config(cls, cfg: GPTConfig, layer: int, attn: CausalSelfAttention, mlp: nn.Module,
                    alpha: float) -> Block:
        if layer == 0 and cfg.first_pre:
            return PreNormBlock.from_config(cfg, layer, attn, mlp, alpha)
        return super().from_config(cfg, layer, attn, mlp, alpha)

    def build_norms(self, spec: NormSpec, d_model: int) -> None:
        self.norm2 = self.make_norm(spec, d_model)  # the attention's input is never normed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.added_normed(self.norm2, self.attn(x), x)[0]  # Z = N(X + Attn(X))
        return self.added(z, self.mlp(z))
