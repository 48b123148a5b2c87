"""How the weights start (``model.init``): one class per scheme, each the formula of its paper or reference code.

Every scheme draws each weight from a zero-mean normal whose std depends on the weight's role:

  embedding  the token embedding and the learned positions
  reader     a matrix that reads the residual stream: q, k, v, the MLP's up (and gate), the attention gate's W_θ
  writer     a matrix that writes into it (the "residual output projections"): the attention's out_proj, the MLP's
             down
  head       the LM head; with ``model.tie_embeddings`` the one matrix, drawn last, so it keeps the head's init
             (nanoGPT's order gives it the same)

  scheme    embedding  reader                 writer                   head       draw
  xavier    emb_std    √(2/(fan_in+fan_out))  as reader                as reader  normal
  gpt2      σ          σ                      σ/√(2L)                  σ          normal
  olmo2     σ          σ                      σ                        σ          normal, truncated at ±3 std
  mitchell  1/√d       1/√fan_in              1/√fan_in · 1/√(2(ℓ+1))  1/√d       normal, truncated at ±3 std
  small     √(2/(5d))  √(2/(5d))              √(2/(5d))                √(2/(5d))  normal

σ = ``model.init_std`` (default 0.02; only the schemes with a base std take it), L the number of blocks, ℓ the
block's index from 0, d = d_model, fan_in and fan_out the matrix's input and output widths. Biases start at 0 and
norm gains at 1 under every scheme. The parts a placement or option owns keep their own init: mHC's φ
(Xavier-uniform), OSP's projections (orthogonal); nGPT draws its own unit vectors, so ``model.init`` does not apply
to it (refused).

DeepNorm's and Sub-LN's β (``placement.beta``) multiply the std of v, out_proj and every MLP matrix under every
scheme, while q, k and W_θ keep the scheme's own: under ``xavier`` that is DeepNet's Xavier gain (§4.1); under the
others it is the same factor on the std (a truncation bound scales with it). DeepNorm with ``gpt2`` so draws the
MLP's down matrix from N(0, (β·σ/√(2L))²), both depth scalings at once, which is what asking for both means.
Admin's ω is profiled from data after the scheme has drawn the weights (``GPT.data_init``), so ω measures the
sublayer variances that scheme gives.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn

from normtrain.model.config import GPTConfig

EMBEDDING, READER, WRITER, HEAD = "embedding", "reader", "writer", "head"
INIT_SCHEMES: dict[str, type[InitScheme]] = {}


def register_init(name: str):
    def wrap(cls: type[InitScheme]) -> type[InitScheme]:
        cls.name = name
        INIT_SCHEMES[name] = cls
        return cls

    return wrap


def init_scheme(cfg: GPTConfig) -> InitScheme:
    """The scheme ``cfg.init`` names, for the model ``cfg`` describes."""
    if cfg.init not in INIT_SCHEMES:
        raise ValueError(f"unknown init scheme {cfg.init!r}; allowed: {', '.join(INIT_SCHEMES)}")
    cls = INIT_SCHEMES[cfg.init]
    if cfg.init_std is not None and cls.base_std is None:
        raise ValueError(f"init scheme {cfg.init!r} has no base std for init_std={cfg.init_std} to replace; "
                         f"schemes with one: {', '.join(k for k, c in INIT_SCHEMES.items() if c.base_std)}")
    return cls(cfg)


class InitScheme:
    """One ``model.init``: the std of each weight by its role (``std``), drawn by ``draw_``."""

    name: ClassVar[str] = "init"
    base_std: ClassVar[float | None] = None  # the σ that ``model.init_std`` replaces; None: the scheme has none
    truncated: ClassVar[bool] = False  # drawn from the normal truncated at ±3 std (OLMo's ``trunc_normal_``)

    def __init__(self, cfg: GPTConfig):
        self.cfg = cfg
        self.sigma = self.base_std if cfg.init_std is None else float(cfg.init_std)

    def std(self, role: str, weight: torch.Tensor, layer: int) -> float:
        """The std of the normal that ``weight`` (out × in, or V × d for an embedding) is drawn from, before β."""
        raise NotImplementedError

    @torch.no_grad()
    def draw_(self, weight: torch.Tensor, role: str, layer: int = 0, gain: float = 1.0) -> None:
        """Fill ``weight`` in place: N(0, (gain·std)²), truncated at ±3·gain·std for the schemes that truncate.
        ``layer`` is the block's index from 0 (0 outside the blocks), ``gain`` β where it applies."""
        std = gain * self.std(role, weight, layer)
        if self.truncated:
            nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-3 * std, b=3 * std)
        else:
            nn.init.normal_(weight, mean=0.0, std=std)


@register_init("xavier")
class XavierInit(InitScheme):
    """Xavier-normal (Glorot & Bengio 2010) on every matrix, std √(2/(fan_in + fan_out)); the embeddings
    N(0, ``model.emb_std``²), unit variance by default, as the Post-LN and DeepNorm analyses assume. normtrain's
    init since its first run (the original Transformer's, and Xiong et al.'s and DeepNet's setting); the default."""

    def std(self, role: str, weight: torch.Tensor, layer: int) -> float:
        if role == EMBEDDING:
            return self.cfg.emb_std
        fan_out, fan_in = weight.shape
        return math.sqrt(2.0 / float(fan_in + fan_out))  # nn.init.xavier_normal_'s, to the bit


@register_init("gpt2")
class GPT2Init(InitScheme):
    """GPT-2 (Radford et al. 2019, §2.3: "a modified initialization which accounts for the accumulation on the
    residual path with model depth") as nanoGPT's ``_init_weights`` writes it: every matrix and embedding
    N(0, σ²), σ = 0.02, and the two residual output projections of each block N(0, (σ/√(2L))²), one factor 1/√2
    for each of the L blocks' two adds. Megatron-LM's ``scaled_init_method_normal`` is the same."""

    base_std = 0.02

    def std(self, role: str, weight: torch.Tensor, layer: int) -> float:
        return self.sigma / math.sqrt(2 * self.cfg.n_layers) if role == WRITER else self.sigma


@register_init("olmo2")
class OLMo2Init(InitScheme):
    """OLMo 2 (Team OLMo 2024), OLMo-core's ``InitMethod.normal``: every matrix and embedding from N(0, σ²)
    truncated at ±3σ, σ = 0.02, with no depth scaling (the head included: OLMo-core's ``init_final_w_out``)."""

    base_std, truncated = 0.02, True

    def std(self, role: str, weight: torch.Tensor, layer: int) -> float:
        return self.sigma


@register_init("mitchell")
class MitchellInit(InitScheme):
    """OLMo 1's "mitchell" init (Groeneveld et al. 2024; allenai/OLMo ``init_weights``): every matrix and embedding
    from N(0, 1/fan_in) truncated at ±3 std (1/√d for the embeddings and the head), and each block's output
    projections scaled by 1/√(2(ℓ + 1)), ℓ the block's index from 0: deeper blocks write smaller updates."""

    truncated = True

    def std(self, role: str, weight: torch.Tensor, layer: int) -> float:
        std = 1.0 / math.sqrt(weight.shape[1])  # fan_in: d for q, k, v, up, the embeddings and the head
        return std / math.sqrt(2 * (layer + 1)) if role == WRITER else std


@register_init("small")
class SmallInit(InitScheme):
    """SmallInit (Nguyen & Salazar 2019, "Transformers without Tears"), as GPT-NeoX's ``small_init_init_method``:
    every matrix and embedding from N(0, 2/(5d)), Xavier's variance of a d × 4d matrix given to all of them (a d × d
    matrix gets 2/5 of its Xavier variance 1/d): the small start a stack without norms (``placement=none``,
    ``rezero``) is tried with."""

    def std(self, role: str, weight: torch.Tensor, layer: int) -> float:
        return math.sqrt(2.0 / (5 * self.cfg.d_model))
