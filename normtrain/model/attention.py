"""Causal self-attention with optional rotary position embeddings (Su et al. 2021) and QK-norm.

q, k, v and the output are separate projections because DeepNorm initializes them differently
(gain β on v and out, gain 1 on q and k; Wang et al. 2022, Lemma 4.1).

QK-norm (``model.qk_norm``; Dehghani et al. 2023, Wortsman et al. 2023) normalizes queries and keys with the
configured norm type, *before* RoPE, in one of the two forms published models use:

  per_head  each head's q and k over the head's features, one gain of head_dim shared by the heads
            (Qwen3, Gemma 3; Wortsman et al.'s qk-layernorm)
  full      the whole q projection and the whole k projection, one norm each over all d_model features
            (gain of width d_model), before the split into heads (OLMo-2)

(Gemma 2 has none.) Before RoPE, the rotation acts on normalized vectors, so q·k still depends on positions
only through their offset; a norm after RoPE would rescale the rotated coordinates feature by feature (γ, and
LayerNorm's mean), breaking that relative-position property. Per head it bounds every attention logit
(|q·k|/√d ≤ √d·max γ² for RMSNorm), which keeps the logits from growing at high learning rates (Wortsman et
al. 2023, §3.1.1); the full form bounds the sum of the heads' squared norms, so it bounds each head too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from normtrain.model.config import QK_NORMS
from normtrain.norms import NormSpec, build_norm


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
    """Multi-head causal self-attention; ``qk_norm`` (``none``, ``per_head`` or ``full``) adds QK-norm of the
    ``qk_spec`` norm type.

    ``inner_norm`` (None unless a placement sets it, e.g. Sub-LN) normalizes the heads' concatenated output
    before ``out_proj``.
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, rope: bool, bias: bool = False,
                 qk_norm: str = "none", qk_spec: NormSpec | None = None):
        super().__init__()
        if qk_norm not in QK_NORMS:
            raise ValueError(f"unknown QK-norm form {qk_norm!r}; allowed: {', '.join(QK_NORMS)}")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.rotary = Rotary(self.head_dim, max_len) if rope else None
        self.qk_norm = qk_norm
        width = {"per_head": self.head_dim, "full": d_model}.get(qk_norm)
        spec = qk_spec or NormSpec()
        self.q_norm = build_norm(spec, width) if width else None
        self.k_norm = build_norm(spec, width) if width else None
        self.inner_norm: nn.Module | None = None

    def _heads(self, t: torch.Tensor, norm: nn.Module | None = None) -> torch.Tensor:
        """(B, T, d) -> (B, H, T, d_head), QK-normed on the way by ``norm`` in the configured form."""
        B, T, _ = t.shape
        if norm is not None and self.qk_norm == "full":
            t = norm(t)
        t = t.view(B, T, self.n_heads, self.head_dim)
        if norm is not None and self.qk_norm == "per_head":
            t = norm(t)
        return t.transpose(1, 2)

    def _qk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = self._heads(self.q_proj(x), self.q_norm), self._heads(self.k_proj(x), self.k_norm)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        return q, k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self._qk(x)
        y = F.scaled_dot_product_attention(q, k, self._heads(self.v_proj(x)), is_causal=True)
        y = y.transpose(1, 2).reshape(x.shape)
        return self.out_proj(y if self.inner_norm is None else self.inner_norm(y))

    @torch.no_grad()
    def logit_stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean entropy in nats of the causal attention distributions, max attention logit q·k/√d_head) for
        input ``x`` (B, T, d); the max is over heads and the causal (query, key) pairs only.

        The fused attention kernel never materializes the logits, so this recomputes them explicitly, once for
        both statistics: O(B·H·T²) memory, meant for a diagnostic on one sequence every few steps.
        """
        q, k = self._qk(x.float() if x.dtype != torch.float32 else x)
        T = x.shape[1]
        scores = (q.float() @ k.float().transpose(-1, -2)) / self.head_dim**0.5
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        logp = torch.log_softmax(scores, dim=-1)
        entropy = -(logp.exp() * logp.masked_fill(~causal, 0.0)).sum(-1).mean()
        return entropy, scores.amax()

    def entropy(self, x: torch.Tensor) -> torch.Tensor:
        """Mean entropy (nats) of the causal attention distributions for input ``x`` (see ``logit_stats``)."""
        return self.logit_stats(x)[0]
