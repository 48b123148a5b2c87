"""The two transformers classes a normtrain model can be written as, weight by weight.

    Pre-LN + RMSNorm + SwiGLU + RoPE  ->  LlamaForCausalLM
    Pre-LN + LayerNorm + GELU + learned positions  ->  GPT2LMHeadModel

Conventions that must agree (each is checked numerically by the round-trip test):
  * RoPE: ours rotates the pairs (x[i], x[i + d/2]) of each head with base 10000, exactly HF Llama's
    ``rotate_half`` layout, so q and k are copied as they are (no interleaving permutation).
  * GELU: ours is the exact erf form, which GPT-2's ``activation_function="gelu"`` is (``gelu_new`` would be tanh).
  * Embeddings: our LM head is its own matrix, so ``tie_word_embeddings`` is false for both.
  * GPT-2 stores ``Conv1D`` weights as (in, out), the transpose of ``nn.Linear``'s, and fuses q, k, v in
    ``c_attn``; it always has biases, written as zeros when ours has none (``model.bias=false``).
  * Norms without affine parameters (``norm.affine=false``) are written with unit weights (and zero biases).
  * eps: ``rms_norm_eps`` / ``layer_norm_epsilon`` = ``norm.eps``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

import torch

from normtrain.model import GPTConfig
from normtrain.model.mlp import default_d_ff

ROPE_BASE = 10000.0  # normtrain.model.attention.Rotary's base
# GPTConfig fields whose value every mapping here honours; any other field (a newer option) must be off.
HANDLED = {"n_layers", "d_model", "n_heads", "seq_len", "vocab_size", "mlp", "d_ff", "pos", "bias", "emb_std",
           "norm", "placement", "alpha", "beta",
           "post_fraction"}  # read by placement=mix only, which no mapping here accepts
# NormSpec fields that change the model when set; every mapping needs them off (DyT is not a norm name here).
NORM_OPTIONS = ("depth_scaled",)


class Architecture:
    """A transformers class: which normtrain models it can express, its config.json, its weight names."""

    name: ClassVar[str]
    hf_class: ClassVar[str]
    wants: ClassVar[dict[str, str]]  # what the model must be (GPTConfig field -> value; norm.name for the norm)

    def mismatches(self, c: GPTConfig) -> list[str]:
        """Why ``c`` is not expressible as this class (empty when it is)."""
        have = {"placement": c.placement, "norm": c.norm.name, "mlp": c.mlp, "pos": c.pos}
        why = [f"{key}={have[key]} (needs {value})" for key, value in self.wants.items() if have[key] != value]
        extra = [f.name for f in fields(c) if f.name not in HANDLED and getattr(c, f.name) not in (None, False, 0, "")]
        extra += [f"norm.{name}" for name in NORM_OPTIONS if getattr(c.norm, name, False)]
        return why + [f"{name}={_value(c, name)!r} (not in {self.hf_class})" for name in extra]

    def config(self, c: GPTConfig, eot: int | None) -> dict[str, Any]:
        raise NotImplementedError

    def to_hf(self, state: dict[str, torch.Tensor], c: GPTConfig) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def from_hf(self, state: dict[str, torch.Tensor], c: GPTConfig) -> dict[str, torch.Tensor]:
        raise NotImplementedError


def _value(c: GPTConfig, dotted: str) -> Any:
    obj = c
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _d_ff(c: GPTConfig) -> int:
    return c.d_ff or default_d_ff(c.mlp, c.d_model)


def _common(c: GPTConfig, eot: int | None, hf_class: str, model_type: str) -> dict[str, Any]:
    return {"architectures": [hf_class], "model_type": model_type, "vocab_size": c.vocab_size,
            "tie_word_embeddings": False, "bos_token_id": eot, "eos_token_id": eot, "dtype": "float32",
            "use_cache": True}


class Llama(Architecture):
    name, hf_class = "llama", "LlamaForCausalLM"
    wants = {"placement": "pre", "norm": "rmsnorm", "mlp": "swiglu", "pos": "rope"}
    TOP = {"tok_emb": "model.embed_tokens", "final_norm": "model.norm", "lm_head": "lm_head"}
    BLOCK = {"norm1": "input_layernorm", "norm2": "post_attention_layernorm", "attn.q_proj": "self_attn.q_proj",
             "attn.k_proj": "self_attn.k_proj", "attn.v_proj": "self_attn.v_proj", "attn.out_proj": "self_attn.o_proj",
             "mlp.gate": "mlp.gate_proj", "mlp.up": "mlp.up_proj", "mlp.down": "mlp.down_proj"}

    def config(self, c: GPTConfig, eot: int | None) -> dict[str, Any]:
        rope = {"rope_type": "default", "rope_theta": ROPE_BASE}
        return {**_common(c, eot, self.hf_class, "llama"), "hidden_size": c.d_model,
                "intermediate_size": _d_ff(c), "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
                "num_key_value_heads": c.n_heads, "head_dim": c.d_model // c.n_heads, "hidden_act": "silu",
                "max_position_embeddings": c.seq_len, "rms_norm_eps": c.norm.eps, "rope_theta": ROPE_BASE,
                "rope_parameters": rope, "attention_bias": c.bias, "mlp_bias": c.bias, "attention_dropout": 0.0}

    def to_hf(self, state, c):
        out = {_rename(name, self.TOP, self.BLOCK, "model.layers"): t for name, t in state.items()}
        if not c.norm.affine:  # unit gains where ours has none
            ones = torch.ones(c.d_model)
            out["model.norm.weight"] = ones
            for i in range(c.n_layers):
                for norm in ("input_layernorm", "post_attention_layernorm"):
                    out[f"model.layers.{i}.{norm}.weight"] = ones
        return out

    def from_hf(self, state, c):
        top, block = _inverse(self.TOP), _inverse(self.BLOCK)
        out = {_rename(name, top, block, "blocks", prefix="model.layers"): t for name, t in state.items()}
        return {k: v for k, v in out.items() if c.norm.affine or "norm" not in k}


class GPT2(Architecture):
    name, hf_class = "gpt2", "GPT2LMHeadModel"
    wants = {"placement": "pre", "norm": "layernorm", "mlp": "gelu", "pos": "learned"}
    TOP = {"tok_emb": "transformer.wte", "pos_emb": "transformer.wpe", "final_norm": "transformer.ln_f",
           "lm_head": "lm_head"}
    NORMS = {"norm1": "ln_1", "norm2": "ln_2"}
    LINEAR = {"attn.out_proj": "attn.c_proj", "mlp.up": "mlp.c_fc", "mlp.down": "mlp.c_proj"}  # Conv1D: transposed

    def config(self, c: GPTConfig, eot: int | None) -> dict[str, Any]:
        return {**_common(c, eot, self.hf_class, "gpt2"), "n_embd": c.d_model, "n_layer": c.n_layers,
                "n_head": c.n_heads, "n_positions": c.seq_len, "n_ctx": c.seq_len, "n_inner": _d_ff(c),
                "activation_function": "gelu", "layer_norm_epsilon": c.norm.eps, "resid_pdrop": 0.0,
                "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True}

    def to_hf(self, state, c):
        state = {**_unit_norms(c), **state} if not c.norm.affine else state
        out = {f"{self.TOP[n.rsplit('.', 1)[0]]}.{n.rsplit('.', 1)[1]}": t for n, t in state.items()
               if n.split(".", 1)[0] in self.TOP}
        for i in range(c.n_layers):
            out.update(self._block_to_hf({k[len(f"blocks.{i}."):]: v for k, v in state.items()
                                          if k.startswith(f"blocks.{i}.")}, f"transformer.h.{i}.", c.d_model))
        return {k: v.contiguous() for k, v in out.items()}

    def _block_to_hf(self, block: dict[str, torch.Tensor], hf: str, d: int) -> dict[str, torch.Tensor]:
        out = {f"{hf}{ln}.{p}": block[f"{norm}.{p}"] for norm, ln in self.NORMS.items() for p in ("weight", "bias")}
        qkv = [f"attn.{p}_proj" for p in "qkv"]
        out[f"{hf}attn.c_attn.weight"] = torch.cat([block[f"{p}.weight"] for p in qkv]).t()
        out[f"{hf}attn.c_attn.bias"] = torch.cat([block.get(f"{p}.bias", torch.zeros(d)) for p in qkv])
        for name, conv in self.LINEAR.items():
            weight = block[f"{name}.weight"]
            out[f"{hf}{conv}.weight"] = weight.t()
            out[f"{hf}{conv}.bias"] = block.get(f"{name}.bias", torch.zeros(weight.shape[0]))
        return out

    def from_hf(self, state, c):
        top = _inverse(self.TOP)
        out = {f"{top[n.rsplit('.', 1)[0]]}.{n.rsplit('.', 1)[1]}": t for n, t in state.items()
               if n.rsplit(".", 1)[0] in top}
        for i in range(c.n_layers):
            hf = f"transformer.h.{i}."
            block = {k[len(hf):]: v for k, v in state.items() if k.startswith(hf)}
            out.update({f"blocks.{i}.{k}": v for k, v in self._block_from_hf(block).items()})
        keep = lambda k: ((c.bias or not k.endswith(".bias") or "norm" in k)  # noqa: E731
                          and (c.norm.affine or "norm" not in k))
        return {k: v.contiguous() for k, v in out.items() if keep(k)}

    def _block_from_hf(self, block: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = {f"{norm}.{p}": block[f"{ln}.{p}"] for norm, ln in self.NORMS.items() for p in ("weight", "bias")}
        weights, biases = block["attn.c_attn.weight"].t().chunk(3), block["attn.c_attn.bias"].chunk(3)
        for p, weight, bias in zip("qkv", weights, biases, strict=True):
            out[f"attn.{p}_proj.weight"], out[f"attn.{p}_proj.bias"] = weight, bias
        for name, conv in self.LINEAR.items():
            out[f"{name}.weight"], out[f"{name}.bias"] = block[f"{conv}.weight"].t(), block[f"{conv}.bias"]
        return out


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (Llama(), GPT2())}


def choose(c: GPTConfig) -> tuple[Architecture | None, dict[str, list[str]]]:
    """The architecture ``c`` maps onto, if any, and why each one does not."""
    reasons = {a.hf_class: a.mismatches(c) for a in ARCHITECTURES.values()}
    match = next((a for a in ARCHITECTURES.values() if not reasons[a.hf_class]), None)
    return match, reasons


def _rename(name: str, top: dict[str, str], block: dict[str, str], blocks_to: str, prefix: str = "blocks") -> str:
    """``<top module>.<param>`` through ``top``; ``<prefix>.<i>.<module>.<param>`` through ``block``."""
    module, param = name.rsplit(".", 1)
    if module in top:
        return f"{top[module]}.{param}"
    index, _, rest = module[len(prefix) + 1:].partition(".")
    return f"{blocks_to}.{index}.{block[rest]}.{param}"


def _inverse(table: dict[str, str]) -> dict[str, str]:
    return {v: k for k, v in table.items()}


def _unit_norms(c: GPTConfig) -> dict[str, torch.Tensor]:
    names = ["final_norm"] + [f"blocks.{i}.norm{j}" for i in range(c.n_layers) for j in (1, 2)]
    return {f"{n}.{p}": (torch.ones if p == "weight" else torch.zeros)(c.d_model) for n in names
            for p in ("weight", "bias")}
