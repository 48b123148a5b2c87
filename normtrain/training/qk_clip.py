"""QK-Clip (Kimi K2, Kimi Team 2025, §2.1; MuonClip with Muon): after each optimizer step, every head whose max
attention logit passed τ has its query and key projections rescaled so that it returns to τ.

Per head h, with S_max the largest pre-softmax logit q·k/√d_head of the step's forward passes (after the scale,
before any soft-cap; ``normtrain.model.qk_logits.head_logit_max``), over every micro-batch and rank:

    γ = min(1, τ / S_max),    W_q(h) ← γ^α · W_q(h),    W_k(h) ← γ^(1−α) · W_k(h)

so each logit of the head is scaled by γ^α·γ^(1−α) = γ (RoPE is a rotation, linear: it commutes with the scale),
and the head's max becomes τ. Heads under τ are left alone. W_q(h) are the rows of ``q_proj`` that make head h's
query (d_head of them; their bias too, so that the whole query scales), likewise for ``k_proj``: this attention
has one key head per query head and separate projections, so no fused or grouped (GQA) layout to untangle.

Under QK-norm it is refused (``normtrain.config``): a norm on q and k divides out any scale of W_q, W_k, so the clip
would change the weights without changing a logit. Clipping the norms' gains instead cannot act per head: the
per-head form has one gain of width d_head shared by every head. And QK-norm already bounds every logit
(|q·k|/√d ≤ √d·max γ²): Kimi K2 chose QK-Clip where QK-norm does not fit (MLA). Refusing says so; a substitute
would silently be another method.

The statistic costs nothing when QK-Clip is off: the attention tracks it only while ``track_logit_max`` is set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from normtrain.util.errors import ConfigError


def clip_factors(s_max: torch.Tensor, tau: float) -> torch.Tensor:
    """γ = min(1, τ/S_max) per head; 1 where S_max ≤ τ (and where it is not a number: the guard sees that)."""
    return torch.where(s_max > tau, tau / s_max, torch.ones_like(s_max))


def scale_rows(param: torch.Tensor, row_scale: torch.Tensor) -> None:
    """param[r] ← row_scale[r] · param[r] in place (a weight's rows, a bias's entries). An FSDP2 parameter
    (a DTensor sharded by rows) is scaled shard by shard, with the scale cut the way its rows are."""
    row_scale = row_scale.reshape(-1, *([1] * (param.dim() - 1))).to(param.dtype)
    if hasattr(param, "device_mesh"):
        from torch.distributed.tensor import distribute_tensor

        row_scale = distribute_tensor(row_scale.expand(param.shape[0], *([1] * (param.dim() - 1))),
                                      param.device_mesh, param.placements, src_data_rank=None)
    param.mul_(row_scale)


class QKClip:
    """Tracks each head's max logit in the training forward passes and clips after each optimizer step."""

    def __init__(self, attentions: Sequence[nn.Module], tau: float, alpha: float = 0.5,
                 all_reduce: Callable[[torch.Tensor, str], torch.Tensor] | None = None):
        normed = [i for i, a in enumerate(attentions)
                  if getattr(a, "q_norm", None) is not None or getattr(a, "k_norm", None) is not None]
        if normed:
            raise ConfigError("optim.qk_clip rescales W_q and W_k, and the QK-norm of block(s) "
                              f"{', '.join(map(str, normed))} divides that scale out again, so it would clip nothing: "
                              "use QK-norm or QK-Clip, not both (optim.qk_clip=0 or model.qk_norm=none)")
        self.attentions, self.tau, self.alpha, self.all_reduce = list(attentions), float(tau), float(alpha), all_reduce
        for attn in self.attentions:
            attn.track_logit_max = True

    @classmethod
    def of(cls, model: nn.Module, tau: float, alpha: float = 0.5,
           all_reduce: Callable[[torch.Tensor, str], torch.Tensor] | None = None) -> QKClip:
        """QK-Clip on every block's attention of ``model`` (its blocks' ``attn``)."""
        return cls([b.attn for b in model.blocks if hasattr(b, "attn")], tau, alpha, all_reduce)

    @torch.no_grad()
    def apply(self) -> torch.Tensor:
        """Clip every head over τ; returns γ (n_layers, H). On the device, no host sync; one all-reduce (max) of
        the maxima across ranks, so that every replica clips alike."""
        s_max = torch.stack([attn.take_logit_max() for attn in self.attentions])
        if self.all_reduce is not None:
            s_max = self.all_reduce(s_max, "max")
        gamma = clip_factors(s_max, self.tau)
        for attn, g in zip(self.attentions, gamma, strict=True):
            rows = g.repeat_interleave(attn.head_dim)  # head h owns rows h·d_head ... (h+1)·d_head − 1
            for proj, power in ((attn.q_proj, self.alpha), (attn.k_proj, 1.0 - self.alpha)):
                for param in proj.parameters():
                    scale_rows(param, rows.pow(power))
        return gamma
