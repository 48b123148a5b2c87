"""Feed-forward sublayers. ``down`` is always the matrix that writes back to the residual stream.

``inner_norm`` (None unless a placement sets it, e.g. Sub-LN) normalizes the hidden activations, after the
activation (for the gated MLPs after the gated product), right before ``down``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class GeluMLP(nn.Module):
    """down(GELU(up(x))), the GPT-2 / original-Transformer MLP."""

    def __init__(self, d_model: int, d_ff: int, bias: bool = False):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.inner_norm: nn.Module | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(_inner(self.inner_norm, F.gelu(self.up(x))))


class SwiGLU(nn.Module):
    """down(SiLU(gate(x)) ⊙ up(x)) (Shazeer 2020), the LLaMA MLP. ``uv_scale`` (None unless nGPT sets it) scales
    up(x) and gate(x) — nGPT's u and ν — before the product."""

    def __init__(self, d_model: int, d_ff: int, bias: bool = False):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.inner_norm: nn.Module | None = None
        self.uv_scale: nn.Module | None = None

    @staticmethod
    def activation(gate: torch.Tensor) -> torch.Tensor:
        return F.silu(gate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.uv_scale is not None:  # nGPT: u ⊙ s_u and ν ⊙ s_ν·√d
            u, nu = self.uv_scale(self.up(x), self.gate(x))
            return self.down(_inner(self.inner_norm, self.activation(nu) * u))
        return self.down(_inner(self.inner_norm, self.activation(self.gate(x)) * self.up(x)))


class GeGLU(SwiGLU):
    """down(GELU_tanh(gate(x)) ⊙ up(x)) (Shazeer 2020), the Gemma MLP: GELU's tanh approximation, as Gemma's
    ``gelu_pytorch_tanh``, not the exact erf form of ``GeluMLP``."""

    @staticmethod
    def activation(gate: torch.Tensor) -> torch.Tensor:
        return F.gelu(gate, approximate="tanh")


def _inner(norm: nn.Module | None, h: torch.Tensor) -> torch.Tensor:
    return h if norm is None else norm(h)


MLPS: dict[str, type[nn.Module]] = {"swiglu": SwiGLU, "gelu": GeluMLP, "geglu": GeGLU}
