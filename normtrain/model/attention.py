"""Causal self-attention with optional rotary position embeddings (Su et al. 2021).

q, k, v and the output are separate projections because DeepNorm initializes them differently
(gain β on v and out, gain 1 on q and k; Wang et al. 2022, Lemma 4.1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Rotary(nn.Module):
    """Precomputed cos/sin tables for RoPE; rotates pairs (x[i], x[i + d/2]) of each head."""

    def __init__(self, head_dim: int, max_len: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)  # (T, d/2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, H, T, d)
        T = x.shape[-2]
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, max_len: int, rope: bool, bias: bool = False):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.rotary = Rotary(self.head_dim, max_len) if rope else None

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)

    def _qk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = self._heads(self.q_proj(x)), self._heads(self.k_proj(x))
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        return q, k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self._qk(x)
        y = F.scaled_dot_product_attention(q, k, self._heads(self.v_proj(x)), is_causal=True)
        return self.out_proj(y.transpose(1, 2).reshape(x.shape))

    @torch.no_grad()
    def entropy(self, x: torch.Tensor) -> torch.Tensor:
        """Mean entropy (nats) of the causal attention distributions for input ``x`` (B, T, d).

        The fused attention kernel never materializes the probabilities, so this recomputes them
        explicitly: O(B·H·T²) memory, meant for a diagnostic on one sequence every few steps.
        """
        q, k = self._qk(x.float() if x.dtype != torch.float32 else x)
        T = x.shape[1]
        scores = (q.float() @ k.float().transpose(-1, -2)) / self.head_dim**0.5
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        logp = torch.log_softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return -(logp.exp() * logp.masked_fill(~causal, 0.0)).sum(-1).mean()
