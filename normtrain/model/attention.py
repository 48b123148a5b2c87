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

The 2023–2026 catalog adds, all off by default:

  qk_norm_at=after_rope   QK-norm on the rotated q and k (nGPT); q·k then depends on absolute positions
                          through γ (and LayerNorm's mean), which is the trade-off the trackers argue about
  qk_norm_gain=false      QK-norm (and V-norm) without γ (or β): a parameter-free norm (nanochat)
  v_norm                  the same norm on the values, in QK-norm's form (per head when QK-norm is off),
                          as HybridNorm's QKV-norm and Gemma 3n
  softcap                 c·tanh(s/c) on the attention logits s = q·kᵀ/√d_head, after the scale (Gemma 2);
                          the attention is then computed explicitly, not by the fused SDPA kernel
  gate                    gated attention (Qiu et al., NeurIPS 2025, Qwen): Y ← Y ⊙ σ(X·W_θ) on the heads'
                          output Y, before W_O (and before Sub-LN's inner norm), X the attention's input;
                          ``head``: one gate per head (W_θ: d → H), ``elementwise``: one per feature (d → d)
  head_scale              NormFormer's learned γ_h (init 1) on head h's output, after the gate and before W_O
                          (set by ``placement=normformer``)

``track_logit_max`` (set by QK-Clip, normtrain/training/qk_clip.py) keeps each head's max logit before any cap
(``head_logit_max``) of the forward passes that build a graph, in ``logit_max``, until ``take_logit_max``: off,
the forward pass does no extra work.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from normtrain.model.config import ATTN_GATES, QK_NORM_AT, QK_NORMS, GPTConfig
from normtrain.model.qk_logits import attention_logits, cap_saturation, causal, causal_head_max, head_logit_max
from normtrain.model.softcap import soft_cap
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


class LogitStats(NamedTuple):
    """The monitor's attention statistics of one input (``CausalSelfAttention.logit_stats``)."""

    entropy: torch.Tensor  # mean entropy (nats) of the causal attention distributions, as computed (capped)
    head_max: torch.Tensor  # (H,) each head's max logit q·k/√d_head before any cap
    cap_saturation: torch.Tensor | None  # share of causal logits the soft-cap saturates; None without a cap


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; ``qk_norm`` (``none``, ``per_head`` or ``full``) adds QK-norm of the
    ``qk_spec`` norm type, at ``qk_norm_at``; ``v_norm``, ``softcap`` and ``gate`` as the module's docstring says.

    ``inner_norm`` (None unless a placement sets it, e.g. Sub-LN) normalizes the heads' concatenated output
    before ``out_proj``.
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, rope: bool, bias: bool = False,
                 qk_norm: str = "none", qk_spec: NormSpec | None = None, *, qk_norm_at: str = "before_rope",
                 qk_norm_gain: bool = True, v_norm: bool = False, softcap: float = 0.0, gate: str = "none"):
        super().__init__()
        for value, allowed, what in ((qk_norm, QK_NORMS, "QK-norm form"), (qk_norm_at, QK_NORM_AT, "QK-norm place"),
                                     (gate, ATTN_GATES, "attention gate")):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.rotary = Rotary(self.head_dim, max_len) if rope else None
        self.qk_norm, self.qk_norm_at, self.softcap = qk_norm, qk_norm_at, float(softcap)
        self.norm_form = "per_head" if qk_norm == "none" else qk_norm  # V-norm's form without QK-norm
        width = {"per_head": self.head_dim, "full": d_model}[self.norm_form]
        spec = qk_spec or NormSpec()
        spec = spec if qk_norm_gain else spec.without_gain()
        self.q_norm = build_norm(spec, width) if qk_norm != "none" else None
        self.k_norm = build_norm(spec, width) if qk_norm != "none" else None
        self.v_norm = build_norm(spec, width) if v_norm else None
        self.gate_proj = nn.Linear(d_model, {"head": n_heads, "elementwise": d_model}[gate], bias=bias) \
            if gate != "none" else None
        self.inner_norm: nn.Module | None = None
        self.head_scale: nn.Parameter | None = None  # NormFormer's γ_h, set by its block
        self.qk_sphere: nn.Module | None = None  # nGPT's scaled unit q and k (normtrain/model/hypersphere.py)
        self.softmax_scale = self.head_dim**-0.5  # nGPT sets √d_head
        self.track_logit_max = False
        self.logit_max: torch.Tensor | None = None  # (H,) running max while tracked

    @classmethod
    def from_config(cls, cfg: GPTConfig) -> CausalSelfAttention:
        return cls(cfg.d_model, cfg.n_heads, cfg.seq_len, rope=cfg.pos == "rope", bias=cfg.bias, qk_norm=cfg.qk_norm,
                   qk_spec=cfg.norm, qk_norm_at=cfg.qk_norm_at, qk_norm_gain=cfg.qk_norm_gain, v_norm=cfg.v_norm,
                   softcap=cfg.attn_softcap, gate=cfg.attn_gate)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, H, T, d_head)."""
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)

    def _normed(self, t: torch.Tensor, norm: nn.Module | None) -> torch.Tensor:
        """``norm`` on the heads ``t`` (B, H, T, d_head) in the configured form: each head over its d_head
        features, or (``full``) all heads of a token together over d."""
        if norm is None:
            return t
        if self.norm_form == "per_head":
            return norm(t)
        B, H, T, dh = t.shape
        return norm(t.transpose(1, 2).reshape(B, T, H * dh)).view(B, T, H, dh).transpose(1, 2)

    def _qk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = self._heads(self.q_proj(x)), self._heads(self.k_proj(x))
        if self.qk_norm_at == "before_rope":
            q, k = self._normed(q, self.q_norm), self._normed(k, self.k_norm)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        if self.qk_norm_at == "after_rope":
            q, k = self._normed(q, self.q_norm), self._normed(k, self.k_norm)
        if self.qk_sphere is not None:  # nGPT: s_qk ⊙ q/‖q‖ per head, after RoPE
            q, k = self.qk_sphere(q), self.qk_sphere(k)
        return q, k

    def _capped_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(c·tanh(s/c) + causal mask)·v, explicitly: the fused kernel has no soft-cap."""
        scores = soft_cap(attention_logits(q, k, self.softmax_scale), self.softcap)
        visible = causal(q.shape[-2], q.device)
        return torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1).to(v.dtype) @ v

    def _track(self, q: torch.Tensor, k: torch.Tensor) -> None:
        """With ``track_logit_max``, fold this pass's per-head max logit into ``logit_max`` (training passes only:
        evaluation and the monitor's probe run without a graph)."""
        if not (self.track_logit_max and torch.is_grad_enabled()):
            return
        now = head_logit_max(q.detach(), k.detach(), self.softmax_scale)
        self.logit_max = now if self.logit_max is None else torch.maximum(self.logit_max, now)

    def take_logit_max(self) -> torch.Tensor:
        """(H,) the per-head max logit tracked since the last call (-inf for a head not seen), and reset."""
        seen, self.logit_max = self.logit_max, None
        return seen if seen is not None else torch.full((self.n_heads,), float("-inf"),
                                                        device=self.q_proj.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self._qk(x)
        self._track(q, k)
        v = self._normed(self._heads(self.v_proj(x)), self.v_norm)
        if self.softcap:
            y = self._capped_attention(q, k, v)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale)
        y = y.transpose(1, 2)  # (B, T, H, d_head)
        if self.gate_proj is not None:  # σ(X·W_θ): (B, T, H, 1) per head, (B, T, H, d_head) per feature
            y = y * torch.sigmoid(self.gate_proj(x)).view(*y.shape[:3], -1)
        if self.head_scale is not None:  # NormFormer: head h's output times γ_h, before W_O
            y = y * self.head_scale[:, None]
        y = y.reshape(x.shape)
        return self.out_proj(y if self.inner_norm is None else self.inner_norm(y))

    @torch.no_grad()
    def logit_stats(self, x: torch.Tensor) -> LogitStats:
        """The attention statistics of input ``x`` (B, T, d) over the causal (query, key) pairs: the entropy of
        the (capped) attention, each head's max logit *before* any soft-cap (a cap hides the growth it is there to
        contain), and the share of logits the cap saturates (``cap_saturation``).

        The fused attention kernel never materializes the logits, so this recomputes them explicitly, once for
        every statistic: O(B·H·T²) memory, meant for a diagnostic on one sequence every few steps.
        """
        q, k = self._qk(x.to(self.q_proj.weight.dtype))  # autocast's bf16 input to fp32 weights; bf16 storage: bf16
        raw = attention_logits(q, k, self.softmax_scale)
        visible = causal(x.shape[1], x.device)
        logp = torch.log_softmax(soft_cap(raw, self.softcap).masked_fill(~visible, float("-inf")), dim=-1)
        entropy = -(logp.exp() * logp.masked_fill(~visible, 0.0)).sum(-1).mean()
        saturation = cap_saturation(raw, self.softcap) if self.softcap else None
        return LogitStats(entropy, causal_head_max(raw), saturation)
