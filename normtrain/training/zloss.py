"""The output-logit stabilizer: z-loss, and the log-partition it shares with the output diagnostics.

z-loss (Chowdhery et al. 2022, PaLM; Wortsman et al. 2023, §3.1.2) adds coefficient × mean(log² Z) to the
loss, Z = Σ_v exp(logit_v) the softmax's normalizer at each position. It keeps log Z near 0, the output-logit
divergence Wortsman et al. show at high learning rates (the loss itself is invariant to a shift of all logits,
so nothing else pins them).
"""

from __future__ import annotations

import torch


def log_partition(logits: torch.Tensor) -> torch.Tensor:
    """log Z at every position, in fp32: (B, T, V) -> (B, T)."""
    return torch.logsumexp(logits.float(), dim=-1)


def z_loss(log_z: torch.Tensor) -> torch.Tensor:
    """mean(log² Z) over positions (the coefficient is applied by the caller)."""
    return log_z.square().mean()
