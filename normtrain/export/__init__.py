"""``normtrain-export``: a trained run as a Hugging Face checkpoint (LlamaForCausalLM, GPT2LMHeadModel) where the
architecture maps onto one, normtrain's own safetensors format otherwise; ``load`` reads either back."""

from normtrain.export.load import load
from normtrain.export.writer import export_run

__all__ = ["export_run", "load"]
