"""Where the norm sits: one block class per placement, each the formula from its paper, one module per family.

  pre.py       pre (Pre-LN), subln (Sub-LN / Magneto)
  post.py      post (Post-LN), deepnorm (DeepNorm), admin (Admin), b2t (B2T connection)
  peri.py      peri (Peri-LN / Sandwich-LN), reorder (OLMo-2 reordered norm)
  mix.py       mix (Mix-LN: Post-LN blocks, then Pre-LN blocks)
  normfree.py  rezero (ReZero), none (no norm)
  hybrid.py    hybrid (HybridNorm, HybridNorm*: QKV-norm, Post-LN FFN)
  normformer.py  normformer (NormFormer: Pre-LN, head scale, post-attention and post-activation norms)
  resi_dual.py   resi_dual (ResiDual: a Post-LN stream and a summed dual stream)
  ngpt.py        ngpt (nGPT: the normalized Transformer on the hypersphere)
  mhc.py         mhc (mHC: n residual streams mixed by a doubly stochastic matrix)

GPAS (``placement.gpas``) is in every block (``Block.scaled``, ``base.py``).

Adding a placement means one class (``@register_placement``) and one YAML in ``configs/placement/``.
"""

from normtrain.model.placements.base import PLACEMENTS, Block, register_placement
from normtrain.model.placements.hybrid import HybridNormBlock
from normtrain.model.placements.mhc import MHCBlock
from normtrain.model.placements.mix import MixNormBlock
from normtrain.model.placements.ngpt import NGPTBlock
from normtrain.model.placements.normformer import NormFormerBlock
from normtrain.model.placements.normfree import NoNormBlock, NormFreeBlock, ReZeroBlock
from normtrain.model.placements.peri import PeriNormBlock, ReorderedNormBlock
from normtrain.model.placements.post import AdminBlock, B2TBlock, DeepNormBlock, PostNormBlock
from normtrain.model.placements.pre import PreNormBlock, SubLNBlock
from normtrain.model.placements.resi_dual import ResiDualBlock

__all__ = ["PLACEMENTS", "Block", "register_placement", "PreNormBlock", "SubLNBlock", "PostNormBlock",
           "DeepNormBlock", "AdminBlock", "PeriNormBlock", "ReorderedNormBlock", "MixNormBlock", "ReZeroBlock",
           "NoNormBlock", "NormFreeBlock", "HybridNormBlock", "NormFormerBlock", "B2TBlock", "ResiDualBlock",
           "NGPTBlock", "MHCBlock"]
