"""Norms on the sublayer's output: Peri-LN (in and out) and the OLMo-2 reordered norm (out only)."""

from __future__ import annotations

import torch

from normtrain.model.placements.base import Block, register_placement
from normtrain.model.placements.pre import PreNormBlock
from normtrain.norms import NormSpec


@register_placement("peri")
class PeriNormBlock(PreNormBlock):
    """Peri-LN (Kim et al. 2025, "Peri-LN: Revisiting Layer Normalization in the Transformer Architecture"),
    the Sandwich-LN of CogView (Ding et al. 2021) and Gemma 2: a norm at the entrance *and* the exit of each
    sublayer, the residual stream itself never normed; a final norm before the head.

        x ← x + N_out(F(N_in(x)))

        x ──┬── N1 ── Attn ── N1' ──(+)──┬── N2 ── MLP ── N2' ──(+)──▶
            └─────────────────────────┘   └────────────────────────┘

    The output norms bound what each sublayer adds to the stream. (The embedding is not normed here, as in
    OLMo-core's peri-norm block.)
    """

    def build_norms(self, spec: NormSpec, d_model: int) -> None:
        super().build_norms(spec, d_model)
        self.out_norm1, self.out_norm2 = self.make_norm(spec, d_model), self.make_norm(spec, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, h = self.added_normed(self.norm2, self.out_norm1(self.attn(self.norm1(x))), x)  # y = N2(h)
        return self.added(h, self.out_norm2(self.mlp(y)))


@register_placement("reorder")
class ReorderedNormBlock(Block):
    """The OLMo-2 reordered norm (OLMo et al. 2024, "2 OLMo 2 Furious"): the norm moves from the
    sublayer's input to its output; a final norm before the head.

        x ← x + N(F(x))

        x ──┬── Attn ── N1 ──(+)──┬── MLP ── N2 ──(+)──▶
            └─────────────────┘   └────────────────┘
    """

    final_norm = True
    uses_alpha = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.added(x, self.norm1(self.attn(x)))
        return self.added(h, self.norm2(self.mlp(h)))
