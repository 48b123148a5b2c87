"""Logit soft-capping (Gemma 2, Gemma Team 2024): z ← c·tanh(z/c), smooth, identity near 0 and bounded by ±c.

Gemma 2 caps the attention logits *after* the 1/√d_head scale at c = 50 and the output logits at c = 30
(transformers' ``attn_logit_softcapping``, ``final_logit_softcapping``); nanochat and the modded-nanogpt
speedrun cap the output at 15. c = 0 means no cap.

A logit is *saturated* when |z| > 2c: there the cap's slope 1 − tanh²(z/c) is below 1 − tanh²(2) = 0.071, so the
cap, not the model, decides its value (the monitor's ``*softcap_saturation`` metrics are the share of such logits).
"""

from __future__ import annotations

import math

import torch

SATURATION_Z = 2.0  # |z|/c beyond which a logit counts as saturated


def soft_cap(z: torch.Tensor, cap: float) -> torch.Tensor:
    """c·tanh(z/c), or ``z`` itself for c = 0."""
    return cap * torch.tanh(z / cap) if cap else z


def saturated(z: torch.Tensor, cap: float) -> torch.Tensor:
    """Where the pre-cap logits ``z`` are saturated by c·tanh(z/c): |z| > 2c."""
    return z.abs() > SATURATION_Z * cap


def saturated_after_cap(y: torch.Tensor, cap: float) -> torch.Tensor:
    """The same, read from capped logits y = c·tanh(z/c): |y| > c·tanh(2) (tanh is monotone)."""
    return y.abs() > cap * math.tanh(SATURATION_Z)
