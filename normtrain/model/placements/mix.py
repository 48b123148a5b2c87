"""Mix-LN: Post-LN blocks at the bottom of the model, Pre-LN blocks above them."""

from __future__ import annotations

import math

from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.config import GPTConfig
from normtrain.model.placements.base import Block, register_placement
from normtrain.model.placements.post import PostNormBlock
from normtrain.model.placements.pre import PreNormBlock


def n_post_blocks(post_fraction: float, n_layers: int) -> int:
    """⌊f·L⌋, robust to the float error of f·L (0.57 · 100 is 56.99999999999999)."""
    return math.floor(post_fraction * n_layers + 1e-9)


@register_placement("mix")
class MixNormBlock(Block):
    """Mix-LN (Li et al. 2024, "Mix-LN: Unleashing the Power of Deeper Layers by Combining Pre-LN and
    Post-LN"): the first ⌊f·L⌋ blocks are Post-LN, the rest Pre-LN; f = ``placement.post_fraction``
    (the paper's 0.25 by default).

        block ℓ ≤ ⌊f·L⌋:  x ← N(x + F(x))       (PostNormBlock)
        block ℓ > ⌊f·L⌋:  x ← x + F(N(x))       (PreNormBlock)

        emb ── Post ── … ── Post ── Pre ── … ── Pre ── N_final ── head

    Post-LN gives the early layers large gradients, Pre-LN keeps the deep ones from collapsing toward the
    identity. The final norm exists when the last block is Pre-LN (f < 1), as in the paper's LLaMA models;
    with f = 1 the model is plain Post-LN (no final norm), with f = 0 plain Pre-LN. This class only picks
    which block to build at each depth (``from_config``), so the model holds real Post and Pre blocks.
    """

    final_norm = True
    uses_alpha = False

    @classmethod
    def from_config(cls, cfg: GPTConfig, layer: int, attn: CausalSelfAttention, mlp: nn.Module,
                    alpha: float) -> Block:
        chosen = PostNormBlock if layer < n_post_blocks(cfg.post_fraction, cfg.n_layers) else PreNormBlock
        return chosen.from_config(cfg, layer, attn, mlp, alpha)
