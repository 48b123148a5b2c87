"""Logit soft-capping (Gemma 2, Gemma Team 2024): z ← c·tanh(z/c), smooth, identity near 0 and bounded by ±c.

Gemma 2 caps the attention logits *after* the 1/√d_head scale at c = 50 and the output logits at c = 30
(transformers' ``attn_logit_softcapping``, ``final_logit_softcapping``); nanochat and the modded-nanogpt
speedrun cap the output at 15. c = 0 means no cap.
"""

from __future__ import annotations

import torch


def soft_cap(z: torch.Tensor, cap: float) -> torch.Tensor:
    """c·tanh(z/c), or ``z`` itself for c = 0."""
    return cap * torch.tanh(z / cap) if cap else z
