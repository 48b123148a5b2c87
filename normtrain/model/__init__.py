"""The decoder-only transformer; importable with torch alone (no Hydra, W&B or datasets)."""

from normtrain.model.config import GPTConfig
from normtrain.model.gpt import GPT
from normtrain.model.placements import (
    PLACEMENTS,
    AdminBlock,
    Block,
    DeepNormBlock,
    MHCBlock,
    MixNormBlock,
    NGPTBlock,
    NoNormBlock,
    PeriNormBlock,
    PostNormBlock,
    PreNormBlock,
    ReorderedNormBlock,
    ReZeroBlock,
    SubLNBlock,
)
from normtrain.norms import NORMS, NormSpec

__all__ = ["GPT", "GPTConfig", "PLACEMENTS", "NORMS", "NormSpec", "Block", "PreNormBlock", "PostNormBlock",
           "DeepNormBlock", "SubLNBlock", "AdminBlock", "PeriNormBlock", "ReorderedNormBlock", "MixNormBlock",
           "ReZeroBlock", "NoNormBlock", "NGPTBlock", "MHCBlock"]
