"""Where the norm sits: one block class per placement, each the formula from its paper.

x is the residual stream, F the attention or MLP sublayer, N a norm, α the shortcut scale.
Adding a placement means one class here (``@register_placement``) and one YAML in ``configs/placement/``.
Every block initializes its own weights (``init_weights``), so no two layers share values.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.norms import NormSpec, build_norm

PLACEMENTS: dict[str, type[Block]] = {}


def register_placement(name: str):
    def wrap(cls: type[Block]) -> type[Block]:
        cls.name = name
        PLACEMENTS[name] = cls
        return cls

    return wrap


class Block(nn.Module):
    """Parts shared by every placement: attention, MLP, two norms and the shortcut scale α."""

    name: ClassVar[str] = "block"
    final_norm: ClassVar[bool] = False  # does the model need a norm before the LM head?
    uses_alpha: ClassVar[bool] = True  # does α (shortcut scale) appear in the formula?

    def __init__(self, attn: CausalSelfAttention, mlp: nn.Module, d_model: int, norm: NormSpec,
                 alpha: float = 1.0):
        super().__init__()
        self.attn, self.mlp = attn, mlp
        self.norm1, self.norm2 = build_norm(norm, d_model), build_norm(norm, d_model)
        self.alpha = float(alpha)

    @classmethod
    def scaling(cls, n_layers: int) -> tuple[float, float]:
        """(α, β) for a decoder of ``n_layers`` blocks when the config says ``auto``."""
        return 1.0, 1.0

    @torch.no_grad()
    def init_weights(self, beta: float = 1.0) -> None:
        """Xavier-normal; gain β on v_proj, out_proj and every MLP matrix, gain 1 on q_proj and k_proj.

        With β = 1 this is the plain Xavier init of the original Transformer (used by Xiong et al. 2020);
        DeepNorm passes β = (8L)^-¼ (Wang et al. 2022, §4.1): q and k are never scaled.
        """
        for proj in (self.attn.q_proj, self.attn.k_proj):
            nn.init.xavier_normal_(proj.weight, gain=1.0)
        for proj in (self.attn.v_proj, self.attn.out_proj, *self.mlp.children()):
            nn.init.xavier_normal_(proj.weight, gain=beta)
        for lin in (m for m in self.modules() if isinstance(m, nn.Linear) and m.bias is not None):
            nn.init.zeros_(lin.bias)


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
        y, h = self.norm2.add_norm(self.attn(self.norm1(x)), residual=x)  # h = x + Attn(N1(x)); y = N2(h)
        return h + self.mlp(y)


@register_placement("post")
class PostNormBlock(Block):
    """Post-LN (Vaswani et al. 2017): x ← N(α·x + F(x)) with α = 1; no final norm.

        x ──┬── Attn ──(+)── N1 ──┬── MLP ──(+)── N2 ──▶
            └─── α· ────┘         └── α· ───┘
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1.add_norm(self.attn(x), residual=x, alpha=self.alpha)[0]
        return self.norm2.add_norm(self.mlp(x), residual=x, alpha=self.alpha)[0]


@register_placement("deepnorm")
class DeepNormBlock(PostNormBlock):
    """DeepNorm (Wang et al. 2022, "DeepNet", §4.1): x ← N(α·x + F(x)), the Post-LN formula with the
    *shortcut* up-weighted and the branch initialized small. For a decoder-only model of L blocks:

        α = (2L)^¼        β = (8L)^-¼   (Xavier-normal gain on v, out and every MLP matrix)

        x ──┬── Attn ──(+)── N1 ──┬── MLP ──(+)── N2 ──▶
            └─── α· ────┘         └── α· ───┘
    """

    @classmethod
    def scaling(cls, n_layers: int) -> tuple[float, float]:
        return (2 * n_layers) ** 0.25, (8 * n_layers) ** -0.25
