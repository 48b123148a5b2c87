"""Post-LN and its descendants: the norm sits on the residual stream after each add (no final norm).

DeepNorm up-weights the shortcut by a constant α; Admin by a learned vector ω profiled from data at init.
"""

from __future__ import annotations

import torch
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.placements.base import Block, register_placement
from normtrain.norms import NormSpec


@register_placement("post")
class PostNormBlock(Block):
    """Post-LN (Vaswani et al. 2017): x ← N(α·x + F(x)) with α = 1; no final norm.

        x ──┬── Attn ──(+)── N1 ──┬── MLP ──(+)── N2 ──▶
            └─── α· ────┘         └── α· ───┘
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1.add_norm(self.attn(x), residual=self.scaled(x), alpha=self.alpha)[0]
        return self.norm2.add_norm(self.mlp(x), residual=self.scaled(x), alpha=self.alpha)[0]


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


@register_placement("admin")
class AdminBlock(PostNormBlock):
    """Admin (Liu et al. 2020, "Understanding the Difficulty of Training Transformers"): Post-LN with the
    shortcut scaled by a learned vector ω_i per sublayer i, set at init from a profiling pass:

        x_i = N(ω_i ⊙ x_{i-1} + f_i(x_{i-1})),      ω_i² = Σ_{j<i} Var f_j(x_{j-1})   (f_0: the embedding)

        x ──┬── Attn ──(+)── N1 ──┬── MLP ──(+)── N2 ──▶
            └─── ω1⊙ ───┘         └── ω2⊙ ──┘

    The profiling follows the reference code (Transformer-Clinic): one forward pass on data, sublayer by
    sublayer in order, ω_1 = 1 and ω_{i+1} = √(Var[ω_i·x_i] + Var[f_i(x_i)]) (variances over every element of
    the batch), which is the formula above when the normed inputs have unit variance; each ω_i is then filled
    with its profiled value and trained like any gain (no weight decay), as in the reference. The training
    loop profiles the run's first training batch before step 0 (``GPT.data_init``); a resumed run takes ω from
    its checkpoint instead. Without profiling (a bare ``GPT(...)``) ω = 1: plain Post-LN.
    """

    uses_alpha = False
    data_dependent = True

    def __init__(self, attn: CausalSelfAttention, mlp: nn.Module, d_model: int, norm: NormSpec,
                 alpha: float = 1.0, **kw):
        super().__init__(attn, mlp, d_model, norm, alpha, **kw)
        self.omega1 = nn.Parameter(torch.ones(d_model))
        self.omega2 = nn.Parameter(torch.ones(d_model))
        self.profile: dict | None = None  # the running profile while ``GPT.data_init`` runs, else None
        self.profiled: list[tuple[str, float]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attn(x)
        x = self.norm1.add_norm(a, residual=self.shortcut("omega1", x, a) * self.scaled(x))[0]
        m = self.mlp(x)
        return self.norm2.add_norm(m, residual=self.shortcut("omega2", x, m) * self.scaled(x))[0]

    def shortcut(self, name: str, x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        """ω of one sublayer: its parameter, or while profiling the value the sublayers before it give."""
        if self.profile is None:
            return getattr(self, name)
        omega = self.profile.get("omega", torch.ones((), device=x.device))
        self.profiled.append((name, float(omega)))
        self.profile["omega"] = ((omega * x).float().var(correction=0) + f.float().var(correction=0)).sqrt()
        return omega

    def begin_data_init(self, carry: dict) -> None:
        self.profile, self.profiled = carry, []

    @torch.no_grad()
    def end_data_init(self, complete: bool) -> None:
        if complete:
            for name, value in self.profiled:  # the (possibly sharded) parameter, after the pass
                getattr(self, name).fill_(value)
        self.profile, self.profiled = None, []


@register_placement("b2t")
class B2TBlock(Block):
    """B2T connection (Takase et al. 2023, "B2T Connection: Serving Stability and Performance in Deep
    Transformers"): Post-LN plus a connection from the block's input (bottom) to the sum that its last norm
    takes (top), skipping every norm of the block but that last one, so the gradient reaches the input without
    passing through the norms that make deep Post-LN vanish:

        x_a = N1(x + Attn(x))
        y   = N2(x_a + FFN(x_a) + x)

        x ──┬── Attn ──(+)── N1 ──┬── MLP ──(+)── N2 ──▶
            ├───────────┘         └─────────┤
            └───────────────────────────────┘

    No final norm (the block ends in one), as Post-LN. With GPAS both shortcuts are scaled, as in Post-LN.
    """

    uses_alpha = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bottom = self.scaled(x)
        top = self.norm1.add_norm(self.attn(x), residual=bottom)[0]  # x_a
        return self.norm2.add_norm(self.mlp(top), residual=self.scaled(top) + bottom)[0]
