"""Blocks without any norm: ReZero's gated residual, and the plain residual baseline."""

from __future__ import annotations

import torch
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.placements.base import Block, register_placement
from normtrain.norms import NormSpec


class NormFreeBlock(Block):
    """A block that holds no norm (and the model no final norm): ``norm.*`` does not apply to it."""

    uses_alpha = False
    has_norms = False

    def build_norms(self, spec: NormSpec, d_model: int) -> None:
        pass


@register_placement("rezero")
class ReZeroBlock(NormFreeBlock):
    """ReZero (Bachlechner et al. 2020, "ReZero is All You Need"): no norm, each sublayer's output gated by a
    learned scalar a that starts at 0, so every block is the identity at init and the network grows out of it.

        x ← x + a·F(x),   a = 0 at init

        x ──┬── Attn ── ·a1 ──(+)──┬── MLP ── ·a2 ──(+)──▶
            └──────────────────┘   └─────────────────┘
    """

    def __init__(self, attn: CausalSelfAttention, mlp: nn.Module, d_model: int, norm: NormSpec,
                 alpha: float = 1.0, **kw):
        super().__init__(attn, mlp, d_model, norm, alpha, **kw)
        self.a1 = nn.Parameter(torch.zeros(1))  # shape (1,) as in the reference code; never weight-decayed
        self.a2 = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.added(x, self.a1 * self.attn(x))
        return self.added(h, self.a2 * self.mlp(h))


@register_placement("none")
class NoNormBlock(NormFreeBlock):
    """No normalization at all: the baseline that shows what the norms buy.

        x ← x + F(x)

        x ──┬── Attn ──(+)──┬── MLP ──(+)──▶
            └───────────┘   └──────────┘
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.added(x, self.attn(x))
        return self.added(h, self.mlp(h))
