"""The attention logits s = q·kᵀ/√d_head *before* any soft-cap, each head's largest over the causal (query, key)
pairs, and the share of them a soft-cap saturates.

``head_logit_max`` is the one definition of a head's max logit: the monitor's ``attn_logit_max/layer_i`` and
QK-Clip's S_max (normtrain/training/qk_clip.py) both read it. Taken before the cap because a cap hides exactly the
growth QK-Clip is there to contain (Kimi K2: the max pre-softmax logit).
"""

from __future__ import annotations

import torch

from normtrain.model.softcap import saturated

CHUNK_ELEMENTS = 1 << 26  # logits materialized at once by ``head_logit_max`` (256 MiB of fp32)


def attention_logits(q: torch.Tensor, k: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """q·kᵀ·scale (B, H, T, T) for q, k (B, H, T, d_head), in fp32 at least (fp64 stays fp64); the scale is
    1/√d_head unless the attention sets its own (nGPT: √d_head)."""
    dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return (q.to(dtype) @ k.to(dtype).transpose(-1, -2)) * scale


def causal(T: int, device: torch.device) -> torch.Tensor:
    """(T, T) True where key j may be seen from query i (j ≤ i)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def causal_head_max(logits: torch.Tensor) -> torch.Tensor:
    """(H,): each head's largest logit of ``logits`` (B, H, T, T) over the batch and the causal pairs."""
    masked = logits.masked_fill(~causal(logits.shape[-1], logits.device), float("-inf"))
    return masked.amax(dim=(0, 2, 3))


@torch.no_grad()
def head_logit_max(q: torch.Tensor, k: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """(H,): each head's largest q·kᵀ/√d_head over the batch and the causal pairs, before any cap. The fused
    attention kernel never materializes the logits, so they are recomputed here, a few sequences at a time
    (at most ``CHUNK_ELEMENTS`` logits at once)."""
    B, H, T, _ = q.shape
    per_chunk = max(1, CHUNK_ELEMENTS // (H * T * T))
    maxima = [causal_head_max(attention_logits(q[i:i + per_chunk], k[i:i + per_chunk], scale))
              for i in range(0, B, per_chunk)]
    return torch.stack(maxima).amax(0)


def cap_saturation(logits: torch.Tensor, cap: float) -> torch.Tensor:
    """The share of the causal pre-cap ``logits`` (B, H, T, T) that c·tanh(s/c) saturates (|s| > 2c, where its
    slope is below 0.071: normtrain/model/softcap.py): the logits the cap decides rather than the model."""
    keep = causal(logits.shape[-1], logits.device)
    return saturated(logits, cap).logical_and(keep).sum() / (keep.sum() * logits[..., 0, 0].numel())
