"""``normtrain-export``: a trained run as a Hugging Face checkpoint (Llama, GPT-2, Qwen3, OLMo-2, Gemma 2 or
Gemma 3) where the architecture is exactly one of them, normtrain's own safetensors format otherwise; ``load``
reads either back."""

from normtrain.export.load import load
from normtrain.export.writer import export_run

__all__ = ["export_run", "load"]
