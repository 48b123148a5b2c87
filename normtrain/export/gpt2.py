"""GPT2LMHeadModel, weight by weight: Pre-LN, LayerNorm, GELU, learned positions.

Conventions that must agree (checked numerically by the round-trip tests in tests/export):
  * GELU: ours is the exact erf form, which GPT-2's ``activation_function="gelu"`` is (``gelu_new`` would be tanh).
  * GPT-2 stores ``Conv1D`` weights as (in, out), the transpose of ``nn.Linear``'s, and fuses q, k, v in
    ``c_attn``; it always has biases, written as zeros when ours has none (``model.bias=false``).
  * Norms without affine parameters (``norm.affine=false``) are written with unit weights and zero biases, norms
    without β (``norm.bias=false``, nanoGPT's ``bias=False``) with zero biases; ``layer_norm_epsilon`` =
    ``norm.eps``; a tied model (``model.tie_embeddings``) is ``tie_word_embeddings: true`` with no ``lm_head``
    weight written (GPT2LMHeadModel ties it to ``wte``), an untied one has its own LM head.
"""

from __future__ import annotations

from typing import Any

import torch

from normtrain.export.architecture import Architecture, inverse
from normtrain.model.config import GPTConfig


class GPT2(Architecture):
    name, hf_class, model_type = "gpt2", "GPT2LMHeadModel", "gpt2"
    wants = {"placement": "pre", "norm": "layernorm", "model.mlp": "gelu", "model.pos": "learned",
             "model.qk_norm": "none"}
    TOP = {"tok_emb": "transformer.wte", "pos_emb": "transformer.wpe", "final_norm": "transformer.ln_f",
           "lm_head": "lm_head"}
    NORMS = {"norm1": "ln_1", "norm2": "ln_2"}
    LINEAR = {"attn.out_proj": "attn.c_proj", "mlp.up": "mlp.c_fc", "mlp.down": "mlp.c_proj"}  # Conv1D: transposed

    def config(self, c: GPTConfig, eot: int | None) -> dict[str, Any]:
        return {**self.common(c, eot), "n_embd": c.d_model, "n_layer": c.n_layers,
                "n_head": c.n_heads, "n_positions": c.seq_len, "n_ctx": c.seq_len, "n_inner": c.ff_width,
                "activation_function": "gelu", "layer_norm_epsilon": c.norm.eps, "resid_pdrop": 0.0,
                "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True,
                "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
                "add_cross_attention": False,
                # GPT2DoubleHeadsModel's summary head, which a causal LM never builds: transformers' defaults
                "summary_type": "cls_index", "summary_use_proj": True, "summary_activation": None,
                "summary_proj_to_labels": True, "summary_first_dropout": 0.1}

    def to_hf(self, state, c):
        state = {**_unit_norms(c), **state} if not c.norm.keeps_bias else state  # the norms' missing γ, β
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
        top = inverse(self.TOP)
        out = {f"{top[n.rsplit('.', 1)[0]]}.{n.rsplit('.', 1)[1]}": t for n, t in state.items()
               if n.rsplit(".", 1)[0] in top}
        for i in range(c.n_layers):
            hf = f"transformer.h.{i}."
            block = {k[len(hf):]: v for k, v in state.items() if k.startswith(hf)}
            out.update({f"blocks.{i}.{k}": v for k, v in self._block_from_hf(block).items()})
        return {k: v.contiguous() for k, v in out.items() if _ours(k, c)}

    def _block_from_hf(self, block: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = {f"{norm}.{p}": block[f"{ln}.{p}"] for norm, ln in self.NORMS.items() for p in ("weight", "bias")}
        weights, biases = block["attn.c_attn.weight"].t().chunk(3), block["attn.c_attn.bias"].chunk(3)
        for p, weight, bias in zip("qkv", weights, biases, strict=True):
            out[f"attn.{p}_proj.weight"], out[f"attn.{p}_proj.bias"] = weight, bias
        for name, conv in self.LINEAR.items():
            out[f"{name}.weight"], out[f"{name}.bias"] = block[f"{conv}.weight"].t(), block[f"{conv}.bias"]
        return out


def _ours(name: str, c: GPTConfig) -> bool:
    """Is the parameter ``name`` (GPT-2 has them all) one that our model ``c`` has?"""
    if "norm" not in name:
        return c.bias or not name.endswith(".bias")
    return c.norm.keeps_bias if name.endswith(".bias") else c.norm.affine


def _unit_norms(c: GPTConfig) -> dict[str, torch.Tensor]:
    names = ["final_norm"] + [f"blocks.{i}.norm{j}" for i in range(c.n_layers) for j in (1, 2)]
    return {f"{n}.{p}": (torch.ones if p == "weight" else torch.zeros)(c.d_model) for n in names
            for p in ("weight", "bias")}
