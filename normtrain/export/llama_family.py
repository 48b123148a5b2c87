"""The transformers classes of the Llama lineage a normtrain model can be written as, weight by weight:

    Pre-LN                                  RMSNorm, SwiGLU, RoPE                 ->  LlamaForCausalLM
    Pre-LN + per-head QK-norm               RMSNorm, SwiGLU, RoPE, no biases      ->  Qwen3ForCausalLM
    reordered x + N(F(x)) + full QK-norm    RMSNorm, SwiGLU, RoPE, no biases      ->  Olmo2ForCausalLM
    Peri-LN x + N(F(N(x)))                  RMSNorm, GeGLU, RoPE, no biases       ->  Gemma2ForCausalLM
    Peri-LN + per-head QK-norm              RMSNorm, GeGLU, RoPE, no biases       ->  Gemma3ForCausalLM

Conventions that must agree (each is checked numerically by the round-trip tests in tests/export):
  * RoPE: ours rotates the pairs (x[i], x[i + d/2]) of each head with base 10000, exactly HF's ``rotate_half``
    layout, so q and k are copied as they are (no interleaving permutation); every class gets θ = 10000.
  * QK-norm: Qwen3's and Gemma 3's ``q_norm``/``k_norm`` have head_dim features and act on each head before
    RoPE (our ``per_head``); OLMo-2's act on the whole projection before the head split (our ``full``).
    Their ε is ``rms_norm_eps``, as ours is ``norm.eps`` for every norm.
  * Gemma's RMSNorm multiplies by (1 + w) and its weights start at 0: a gain γ is stored as γ − 1.
  * Gemma multiplies the embeddings by √d before the first block; ours has no such scale, so the exported
    embedding table is ours divided by √d (the product is ours again, to fp32 rounding). The LM head is written
    as its own matrix (``tie_word_embeddings: false``), not scaled, also for a tied model: Gemma's tie would
    reuse the stored table, ours / √d, as the head.
  * Llama, Qwen3 and OLMo-2 tie as we do: a tied model (``model.tie_embeddings``) is ``tie_word_embeddings: true``
    with no ``lm_head`` weight written.
  * Gemma 2's defaults that ours lacks are switched off: the attention and final logit soft-caps (null, unless
    the model has them), the sliding-window layers (every layer ``full_attention``); its attention scale
    1/√``query_pre_attn_scalar`` is ours with ``query_pre_attn_scalar`` = head_dim.
    GeGLU is Gemma's ``gelu_pytorch_tanh``.
  * Norms without affine parameters (``norm.affine=false``) are written as unit gains. Zero-centred gains
    (``norm.gain=zero_centred``, γ = 1 + w) are written as the γ they stand for, so Gemma's stored weight is our w
    itself; a scalar gain maps nowhere (normtrain's format keeps it one number).
  * Soft-caps: ``model.attn_softcap`` goes into Gemma 2's ``attn_logit_softcapping`` (after the 1/√d_head scale,
    as ours), ``model.logit_softcap`` into Gemma 2's and Gemma 3's ``final_logit_softcapping``. Gemma 3's
    attention reads no cap in transformers (the key exists, its attention never passes it on), and the other
    classes have none: those models stay in normtrain's format.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch

from normtrain.export.architecture import ROPE_BASE, Architecture, inverse, rename
from normtrain.model.config import GPTConfig

ATTENTION_MLP = {"attn.q_proj": "self_attn.q_proj", "attn.k_proj": "self_attn.k_proj",
                 "attn.v_proj": "self_attn.v_proj", "attn.out_proj": "self_attn.o_proj", "mlp.gate": "mlp.gate_proj",
                 "mlp.up": "mlp.up_proj", "mlp.down": "mlp.down_proj"}
QK_NORMS = {"attn.q_norm": "self_attn.q_norm", "attn.k_norm": "self_attn.k_norm"}
PRE_NORMS = {"norm1": "input_layernorm", "norm2": "post_attention_layernorm"}
PERI_NORMS = {"norm1": "input_layernorm", "out_norm1": "post_attention_layernorm",
              "norm2": "pre_feedforward_layernorm", "out_norm2": "post_feedforward_layernorm"}
NO_BIAS = {"model.bias": False}  # these classes' MLPs have no bias


class LlamaFamily(Architecture):
    """RMSNorm, a gated MLP, RoPE, separate q/k/v/o projections; the classes differ in their norms."""

    TOP: ClassVar[dict[str, str]] = {"tok_emb": "model.embed_tokens", "final_norm": "model.norm",
                                     "lm_head": "lm_head"}
    NORMS: ClassVar[dict[str, str]]  # our block's norms -> their names in a decoder layer
    gain_offset: ClassVar[float] = 0.0  # what HF adds to a stored gain (Gemma: 1)
    gains = ("vector", "zero_centred", "none")
    scales_embedding: ClassVar[bool] = False  # HF multiplies the embeddings by √d (Gemma)

    def config(self, c: GPTConfig, eot: int | None) -> dict[str, Any]:
        head_dim = c.d_model // c.n_heads
        return {**self.common(c, eot), "hidden_size": c.d_model, "intermediate_size": c.ff_width,
                "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_heads,
                "head_dim": head_dim, "max_position_embeddings": c.seq_len, "rms_norm_eps": c.norm.eps,
                "rope_theta": ROPE_BASE, "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_BASE},
                "attention_bias": c.bias, "attention_dropout": 0.0, **self.specific(c)}

    def specific(self, c: GPTConfig) -> dict[str, Any]:
        """The class's own config keys."""
        return {}

    def block(self) -> dict[str, str]:
        return {**ATTENTION_MLP, **self.NORMS}

    def to_hf(self, state, c):
        state = {**self.unit_gains(c), **state} if not c.norm.affine else state
        out = {}
        for name, t in state.items():
            if _is_gain(name):
                t = t + (_ours_offset(c) - self.gain_offset)
            elif name == "tok_emb.weight" and self.scales_embedding:
                t = t / _embed_scale(c)
            out[rename(name, self.TOP, self.block(), "model.layers")] = t.contiguous()
        return out

    def from_hf(self, state, c):
        out = {}
        for name, t in state.items():
            ours = rename(name, inverse(self.TOP), inverse(self.block()), "blocks", prefix="model.layers")
            if _is_gain(ours):
                if not c.norm.affine:
                    continue
                t = t + (self.gain_offset - _ours_offset(c))
            elif ours == "tok_emb.weight" and self.scales_embedding:
                t = t * _embed_scale(c)
            out[ours] = t
        return out

    def unit_gains(self, c: GPTConfig) -> dict[str, torch.Tensor]:
        """Unit gains for every norm, for a model that has none (``norm.affine=false``)."""
        width = {"attn.q_norm": c.d_model // c.n_heads if c.qk_norm == "per_head" else c.d_model}
        width["attn.k_norm"] = width["attn.q_norm"]
        gains = {"final_norm.weight": torch.ones(c.d_model)}
        for i in range(c.n_layers):
            gains.update({f"blocks.{i}.{n}.weight": torch.ones(width.get(n, c.d_model)) for n in self.NORMS})
        return gains


def _is_gain(name: str) -> bool:
    """Is our parameter ``name`` a norm's gain (final_norm, norm1, out_norm2, attn.q_norm, ...)?"""
    return "norm" in name.rsplit(".", 2)[-2]


def _ours_offset(c: GPTConfig) -> float:
    """What our norms add to a stored gain: 1 for zero-centred gains (γ = 1 + w), else 0."""
    return 1.0 if c.norm.gain == "zero_centred" else 0.0


def _embed_scale(c: GPTConfig) -> torch.Tensor:
    return torch.tensor(math.sqrt(c.d_model))  # Gemma's: hidden_size**0.5 as a float32 tensor


class Llama(LlamaFamily):
    name, hf_class, model_type = "llama", "LlamaForCausalLM", "llama"
    wants = {"placement": "pre", "norm": "rmsnorm", "model.mlp": "swiglu", "model.pos": "rope",
             "model.qk_norm": "none"}
    NORMS = PRE_NORMS

    def specific(self, c):
        return {"hidden_act": "silu", "mlp_bias": c.bias, "pretraining_tp": 1}


class Qwen3(LlamaFamily):
    name, hf_class, model_type = "qwen3", "Qwen3ForCausalLM", "qwen3"
    wants = {"placement": "pre", "norm": "rmsnorm", "model.mlp": "swiglu", "model.pos": "rope",
             "model.qk_norm": "per_head", **NO_BIAS}
    NORMS = {**PRE_NORMS, **QK_NORMS}

    def specific(self, c):
        return {"hidden_act": "silu", "use_sliding_window": False, "sliding_window": None,
                "max_window_layers": c.n_layers, "layer_types": ["full_attention"] * c.n_layers}


class Olmo2(LlamaFamily):
    name, hf_class, model_type = "olmo2", "Olmo2ForCausalLM", "olmo2"
    wants = {"placement": "reorder", "norm": "rmsnorm", "model.mlp": "swiglu", "model.pos": "rope",
             "model.qk_norm": "full", **NO_BIAS}
    NORMS = {"norm1": "post_attention_layernorm", "norm2": "post_feedforward_layernorm", **QK_NORMS}

    def config(self, c, eot):
        config = super().config(c, eot)
        del config["head_dim"]  # not a key of Olmo2Config: it takes hidden_size / num_attention_heads
        return config

    def specific(self, c):
        return {"hidden_act": "silu"}


class Gemma2(LlamaFamily):
    name, hf_class, model_type = "gemma2", "Gemma2ForCausalLM", "gemma2"
    wants = {"placement": "peri", "norm": "rmsnorm", "model.mlp": "geglu", "model.pos": "rope",
             "model.qk_norm": "none", **NO_BIAS}
    NORMS = PERI_NORMS
    gain_offset, scales_embedding = 1.0, True
    ties = False  # its tied head would be the stored table, ours / √d: a tied model's head is written apart
    options = ("attn_softcap", "logit_softcap")

    def specific(self, c):
        # No layer slides (every one is full_attention); transformers still builds a sliding mask, which needs a
        # window: the context length, so that it would change nothing even if a layer read it.
        return {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": c.d_model // c.n_heads,
                "sliding_window": c.seq_len, "layer_types": ["full_attention"] * c.n_layers,
                "final_logit_softcapping": c.logit_softcap or None, "attn_logit_softcapping": c.attn_softcap or None,
                "use_bidirectional_attention": False}


class Gemma3(Gemma2):
    name, hf_class, model_type = "gemma3", "Gemma3ForCausalLM", "gemma3_text"
    wants = {**Gemma2.wants, "model.qk_norm": "per_head"}
    NORMS = {**PERI_NORMS, **QK_NORMS}
    options = ("logit_softcap",)

    def specific(self, c):
        rope = {"rope_type": "default", "rope_theta": ROPE_BASE}  # one θ for both layer types: every layer is full
        return {**super().specific(c), "rope_local_base_freq": ROPE_BASE,
                "rope_parameters": {"full_attention": rope, "sliding_attention": dict(rope)}}
