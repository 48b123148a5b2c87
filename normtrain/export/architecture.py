"""What a transformers class must know about a normtrain model: which models it expresses, its config.json, and
its weight names (``Architecture``), with the helpers the classes share."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

import torch

from normtrain.model.config import GPTConfig
from normtrain.norms import NormSpec

ROPE_BASE = 10000.0  # normtrain.model.attention.Rotary's base
# GPTConfig fields whose value the mappings honour (through ``wants`` or their weights); any other field (a
# newer option) must be at its default (off) for a model to map onto a class, unless the class lists it in
# ``options`` (Gemma's soft-caps).
HANDLED = {"n_layers", "d_model", "n_heads", "seq_len", "vocab_size", "mlp", "d_ff", "pos", "bias", "emb_std",
           "norm", "placement", "alpha", "beta", "qk_norm",
           "init", "init_std",  # how the weights started: the trained weights are what is written
           "tie_embeddings",  # every class here has a head of its own or a tied one (``Architecture.ties``)
           "post_fraction",  # read by placement=mix only, which no mapping here accepts
           "first_pre", "head_scale", "post_act_norm", "resid_scale",  # hybrid's and normformer's (idem)
           "streams"}  # mhc's (idem)
# NormSpec fields that change the model when set; every mapping needs them off.
NORM_OPTIONS = ("depth_scaled",)
DEFAULTS, NORM_DEFAULTS = GPTConfig(), NormSpec()


def described(c: GPTConfig) -> dict[str, Any]:
    """The model's choices by the config keys that make them, which ``Architecture.wants`` names."""
    return {"placement": c.placement, "norm": c.norm.name, "model.mlp": c.mlp, "model.pos": c.pos,
            "model.qk_norm": c.qk_norm, "model.bias": c.bias}


def shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class Architecture:
    """A transformers class: which normtrain models it can express, its config.json, its weight names."""

    name: ClassVar[str]
    hf_class: ClassVar[str]
    model_type: ClassVar[str]
    wants: ClassVar[dict[str, Any]]  # what the model must be: config key (as in ``described``) -> value
    options: ClassVar[tuple[str, ...]] = ()  # newer GPTConfig fields the class expresses at any value
    gains: ClassVar[tuple[str, ...]] = ("vector", "none")  # the ``norm.gain`` forms its weights can carry
    ties: ClassVar[bool] = True  # does the class tie its head to its embedding table as ours is (tie_word_embeddings)?

    def mismatches(self, c: GPTConfig) -> list[str]:
        """Why ``c`` is not expressible as this class (empty when it is), one reason per config key."""
        have = described(c)
        why = [f"{key}={shown(have[key])} (needs {shown(value)})" for key, value in self.wants.items()
               if have[key] != value]
        extra = [f.name for f in fields(c) if f.name not in HANDLED and f.name not in self.options
                 and getattr(c, f.name) != getattr(DEFAULTS, f.name)]
        extra += [f"norm.{name}" for name in NORM_OPTIONS if getattr(c.norm, name) != getattr(NORM_DEFAULTS, name)]
        extra += ["norm.gain"] if c.norm.gain not in self.gains else []
        return why + [f"{_key(name)}={shown(value_of(c, name))} (not in {self.hf_class})" for name in extra]

    def tied(self, c: GPTConfig) -> bool:
        """Is the export of ``c`` tied: ``tie_word_embeddings`` true, and no ``lm_head.weight`` written?"""
        return c.tie_embeddings and self.ties

    def config(self, c: GPTConfig, eot: int | None) -> dict[str, Any]:
        raise NotImplementedError

    def to_hf(self, state: dict[str, torch.Tensor], c: GPTConfig) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def from_hf(self, state: dict[str, torch.Tensor], c: GPTConfig) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def common(self, c: GPTConfig, eot: int | None) -> dict[str, Any]:
        """Keys every class has. ``tie_word_embeddings`` is ``model.tie_embeddings`` where the class ties its head
        to the stored table (``ties``), false otherwise (the head written as a matrix of its own)."""
        return {"architectures": [self.hf_class], "model_type": self.model_type, "vocab_size": c.vocab_size,
                "tie_word_embeddings": self.tied(c), "bos_token_id": eot, "eos_token_id": eot, "pad_token_id": None,
                "dtype": "float32", "use_cache": True, "initializer_range": 0.02}


def value_of(c: GPTConfig, dotted: str) -> Any:
    obj: Any = c
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def rename(name: str, top: dict[str, str], block: dict[str, str], blocks_to: str, prefix: str = "blocks") -> str:
    """``<top module>.<param>`` through ``top``; ``<prefix>.<i>.<module>.<param>`` through ``block``."""
    module, param = name.rsplit(".", 1)
    if module in top:
        return f"{top[module]}.{param}"
    index, _, rest = module[len(prefix) + 1:].partition(".")
    return f"{blocks_to}.{index}.{block[rest]}.{param}"


def inverse(table: dict[str, str]) -> dict[str, str]:
    return {v: k for k, v in table.items()}


def _key(name: str) -> str:
    """The config key of a GPTConfig field (``attn_gate`` -> ``model.attn_gate``, ``gpas`` ->
    ``placement.gpas``); ``norm.*`` as it is."""
    if name.startswith("norm."):
        return name
    return f"placement.{name}" if name == "gpas" else f"model.{name}"
