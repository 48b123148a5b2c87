"""The decoder-only transformer; importable with torch alone (no Hydra, W&B or datasets). How its weights start
is ``normtrain.model.init`` (``model.init``)."""

from normtrain.model.config import GPTConfig
from normtrain.model.gpt import GPT
from normtrain.model.init import INIT_SCHEMES, InitScheme
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

__all__ = ["GPT", "GPTConfig", "PLACEMENTS", "NORMS", "INIT_SCHEMES", "InitScheme", "NormSpec", "Block",
           "PreNormBlock", "PostNormBlock", "DeepNormBlock", "SubLNBlock", "AdminBlock", "PeriNormBlock",
           "ReorderedNormBlock", "MixNormBlock", "ReZeroBlock", "NoNormBlock", "NGPTBlock", "MHCBlock"]
