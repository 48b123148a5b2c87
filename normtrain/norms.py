"""Norm layers, swappable behind one name (``norm=layernorm|rmsnorm|prmsnorm``).

Every norm can also fuse the residual add that precedes it (``add_norm``): the blocks in
``normtrain.model.placements`` call it so that RMSNorm on CUDA runs add + norm in one Triton pass.
Adding a norm means one class here (registered with ``@register_norm``) and one YAML in ``configs/norm/``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from normtrain.ops import rms_norm


@dataclass(frozen=True)
class NormSpec:
    """What the config says about the norm; each class reads the fields it needs."""

    name: str = "rmsnorm"
    eps: float = 1e-6
    affine: bool = True
    impl: str = "auto"  # auto | torch | triton (RMS norms only)
    p: float = 0.0625  # prmsnorm: fraction of features the RMS is estimated from


NORMS: dict[str, type[Norm]] = {}


def register_norm(name: str):
    def wrap(cls: type[Norm]) -> type[Norm]:
        cls.name = name
        NORMS[name] = cls
        return cls

    return wrap


def build_norm(spec: NormSpec, dim: int) -> Norm:
    if spec.name not in NORMS:
        raise ValueError(f"unknown norm {spec.name!r}; allowed: {', '.join(sorted(NORMS))}")
    return NORMS[spec.name](dim, spec)


class Norm(nn.Module):
    """A norm over the last dimension that can also absorb the residual add in front of it."""

    name = "norm"
    supports_triton = False

    def add_norm(self, x: torch.Tensor, residual: torch.Tensor, alpha: float = 1.0):
        """Return ``(N(alpha * residual + x), alpha * residual + x)``."""
        s = x + residual if alpha == 1.0 else x + alpha * residual
        return self(s), s


@register_norm("layernorm")
class LayerNorm(Norm):
    """y = γ ⊙ (x − μ)/√(σ² + ε) + β (Ba et al. 2016)."""

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__()
        self.dim, self.eps = dim, spec.eps
        self.weight = nn.Parameter(torch.ones(dim)) if spec.affine else None
        self.bias = nn.Parameter(torch.zeros(dim)) if spec.affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)


@register_norm("rmsnorm")
class RMSNorm(Norm):
    """y = γ ⊙ x / √(mean(x²) + ε) (Zhang & Sennrich 2019), fp32 statistics, LLaMA style."""

    supports_triton = True

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__()
        self.eps, self.impl = spec.eps, spec.impl
        self.weight = nn.Parameter(torch.ones(dim)) if spec.affine else None
        self.n_stat: int | None = None  # all features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps, impl=self.impl, n_stat=self.n_stat)

    def add_norm(self, x: torch.Tensor, residual: torch.Tensor, alpha: float = 1.0):
        return rms_norm(x, self.weight, self.eps, impl=self.impl, residual=residual, alpha=alpha,
                        n_stat=self.n_stat)


@register_norm("prmsnorm")
class PRMSNorm(RMSNorm):
    """Partial RMSNorm: the RMS is estimated from the first k = ⌈p·d⌉ features (at least 1)."""

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__(dim, spec)
        self.n_stat = max(1, math.ceil(spec.p * dim))


@register_norm("batchnorm")
class BatchNorm(Norm):
    """BatchNorm over batch × positions, per feature — for the ``batchnorm_leak`` experiment only.

    Do not train real models with it. In a causal LM the training-mode statistics of position t
    include every later token of the batch, so the model can read the future through them, and it
    meets different (running) statistics at evaluation; padding and small batches skew them further.
    """

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__()
        self.bn = nn.BatchNorm1d(dim, eps=spec.eps, affine=spec.affine)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x.reshape(-1, x.shape[-1])).reshape(x.shape)
