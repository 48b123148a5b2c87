"""ResiDual: a Post-LN stream and a Pre-LN-like sum of the sublayers' outputs, carried side by side."""

from __future__ import annotations

import torch
from torch import nn

from normtrain.model.config import GPTConfig
from normtrain.model.placements.base import Block, register_placement


@register_placement("resi_dual")
class ResiDualBlock(Block):
    """ResiDual (Xie et al. 2023, "ResiDual: Transformer with Dual Residual Connections"): each sublayer F_k reads
    the Post-LN stream x and feeds two residual streams, the Post-LN one and a dual stream d that only sums the
    sublayers' outputs (never normed, as Pre-LN's); the head reads the Post-LN stream plus the normed dual one:

        x_{k+1} = N_k(x_k + F_k(x_k))         x_0 = d_0 = the embedding
        d_{k+1} = d_k + F_k(x_k)              output: x_K + N_final(d_K)

        x ──┬── Attn ──┬─(+)── N1 ──┬── MLP ──┬─(+)── N2 ──▶  x
            └──────────│──┘         └─────────│──┘
        d ─────────────(+)────────────────────(+)─────────▶  d

    The block's stream is the pair (x, d) concatenated along the features, (B, T, 2d): ``stream_in`` doubles
    the embedding, ``stream_out`` sums x and N_final(d), so a block is still one tensor in, one out (the monitor's
    per-block statistics are then of the pair). The paper notes fp16 overflow in d (x-transformers dropped it);
    train in fp32 or bf16. GPAS scales the Post-LN stream's shortcut (as Post-LN) and the dual sum after its adds.
    """

    final_norm = True  # N_final of the dual stream
    uses_alpha = False

    @staticmethod
    def stream_in(x: torch.Tensor, cfg: GPTConfig) -> torch.Tensor:
        return torch.cat((x, x), dim=-1)

    @staticmethod
    def stream_out(x: torch.Tensor, final_norm: nn.Module | None, cfg: GPTConfig) -> torch.Tensor:
        post, dual = x.chunk(2, dim=-1)
        return post + final_norm(dual)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        post, dual = x.chunk(2, dim=-1)
        a = self.attn(post)
        post, dual = self.norm1.add_norm(a, residual=self.scaled(post))[0], self.added(dual, a)
        m = self.mlp(post)
        post, dual = self.norm2.add_norm(m, residual=self.scaled(post))[0], self.added(dual, m)
        return torch.cat((post, dual), dim=-1)
