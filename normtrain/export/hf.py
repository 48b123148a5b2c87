"""The transformers classes a normtrain model can be written as (one ``Architecture`` each), and which one a
model is: exactly one of them, or none, with the nearest named.

    Pre-LN, RMSNorm, SwiGLU, RoPE                               ->  LlamaForCausalLM
    Pre-LN, LayerNorm, GELU, learned positions                   ->  GPT2LMHeadModel
    Pre-LN, RMSNorm, SwiGLU, RoPE, per-head QK-norm              ->  Qwen3ForCausalLM
    reordered norm, RMSNorm, SwiGLU, RoPE, full QK-norm          ->  Olmo2ForCausalLM
    Peri-LN, RMSNorm, GeGLU, RoPE                                ->  Gemma2ForCausalLM
    Peri-LN, RMSNorm, GeGLU, RoPE, per-head QK-norm              ->  Gemma3ForCausalLM

The weight conventions of each are in ``llama_family`` and ``gpt2``.
"""

from __future__ import annotations

from normtrain.export.architecture import Architecture
from normtrain.export.gpt2 import GPT2
from normtrain.export.llama_family import Gemma2, Gemma3, Llama, Olmo2, Qwen3
from normtrain.model.config import GPTConfig

ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (Llama(), GPT2(), Qwen3(), Olmo2(), Gemma2(), Gemma3())}


def choose(c: GPTConfig) -> tuple[Architecture | None, dict[str, list[str]]]:
    """The architecture ``c`` maps onto, if any, and why each one does not."""
    reasons = {a.hf_class: a.mismatches(c) for a in ARCHITECTURES.values()}
    match = next((a for a in ARCHITECTURES.values() if not reasons[a.hf_class]), None)
    return match, reasons


# How far a difference takes a model from a class, on a tie in their number: the placement is the choice the
# experiment is about, then the norms (type, QK form); the MLP, positions and biases are details.
WEIGHT = {"placement": 2, "norm": 1, "model.qk_norm": 1}


def nearest(reasons: dict[str, list[str]]) -> tuple[str, list[str]]:
    """The class with the fewest differences and those differences (on a tie, the lightest by ``WEIGHT``, then
    the first listed)."""
    def distance(cls: str) -> tuple[int, int]:
        return len(reasons[cls]), sum(WEIGHT.get(r.split("=", 1)[0], 0) for r in reasons[cls])

    name = min(reasons, key=distance)
    return name, reasons[name]
