"""Norm layers, swappable behind one name (``norm=layernorm|rmsnorm|prmsnorm|dyt|derf|l2``).

Every norm can also fuse the residual add that precedes it (``add_norm``): the blocks in
``normtrain.model.placements`` call it so that RMSNorm on CUDA runs add + norm in one Triton pass.
Adding a norm means one class here (registered with ``@register_norm``) and one YAML in ``configs/norm/``.
``build_norm`` is the one factory: given a block's depth ℓ it also applies the depth scaling of any norm
(``norm.depth_scaled``, ``DepthScaled``).

Every norm's gain γ comes in the form ``norm.gain`` names (``Norm.init_affine``, ``Norm.gain``):

  vector        γ ∈ R^d, init 1 (the papers' LayerNorm and RMSNorm)
  zero_centred  γ = 1 + w, w ∈ R^d init 0 (Gemma, Qwen3-Next, Megatron's ``layernorm-1p``): the same function at
                init, but weight decay pulls γ toward 1, not 0
  scalar        one γ ∈ R for the whole vector (OSP's SSNorm)
  none          no γ, and no β either (nanochat's parameter-free RMSNorm; ``norm.affine=false``)

β (LayerNorm, DyT, Derf) is per feature whenever there is a gain, unless ``norm.bias=false`` drops it: γ without β,
as nanoGPT's ``bias=False``, PaLM and T5-style stacks do (``Norm.biases``: which norms have one to drop).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from normtrain.ops import rms_norm


@dataclass(frozen=True)
class NormSpec:
    """What the config says about the norm; each class reads the fields it needs."""

    name: str = "rmsnorm"
    eps: float = 1e-6
    affine: bool = True  # false: no γ and no β, the same as gain="none"
    impl: str = "auto"  # auto | torch | triton (RMS norms only)
    p: float = 0.0625  # prmsnorm: fraction of features the RMS is estimated from
    alpha_init: float = 0.5  # dyt, derf: initial α of tanh(α·x), erf(α·x + s)
    depth_scaled: bool = False  # the norms of block ℓ (from 1) multiply their output by 1/√ℓ
    gain: str = "vector"  # vector | zero_centred | scalar | none (see the module's docstring)
    bias: bool | None = None  # β where the norm has one: None = the norm's convention, False = γ without β

    def __post_init__(self) -> None:
        # One meaning, two spellings: affine=false is gain=none, and gain=none has no affine part.
        if not self.affine:
            object.__setattr__(self, "gain", "none")
        if self.gain == "none":
            object.__setattr__(self, "affine", False)

    def without_gain(self) -> NormSpec:
        """The same norm with no γ and no β (``model.qk_norm_gain=false``)."""
        return replace(self, affine=False, gain="none", bias=None)

    @property
    def keeps_bias(self) -> bool:
        """Does a norm whose convention has β (LayerNorm, DyT, Derf) keep it: a gain, and ``bias`` not False?"""
        return self.gain != "none" and self.bias is not False


GAINS = ("vector", "zero_centred", "scalar", "none")


NORMS: dict[str, type[Norm]] = {}


def register_norm(name: str):
    def wrap(cls: type[Norm]) -> type[Norm]:
        cls.name = name
        NORMS[name] = cls
        return cls

    return wrap


def build_norm(spec: NormSpec, dim: int, layer: int | None = None) -> Norm:
    """The norm ``spec`` names, over ``dim`` features. ``layer`` is the depth ℓ (from 1) of the block that owns
    it, None for norms outside the blocks (the final norm, QK-norm): with ``spec.depth_scaled`` a block's norm
    is wrapped in ``DepthScaled``."""
    if spec.name not in NORMS:
        raise ValueError(f"unknown norm {spec.name!r}; allowed: {', '.join(sorted(NORMS))}")
    if spec.gain not in NORMS[spec.name].gains:
        raise ValueError(f"norm {spec.name!r} has no gain form {spec.gain!r}; allowed: "
                         f"{', '.join(NORMS[spec.name].gains)}")
    if spec.bias is not None and spec.gain != "none" and spec.bias not in NORMS[spec.name].biases:
        raise ValueError(f"norm {spec.name!r} takes bias={' or '.join(map(str, NORMS[spec.name].biases))} (or None: "
                         f"its convention), not {spec.bias}")
    norm = NORMS[spec.name](dim, spec)
    return DepthScaled(norm, layer) if spec.depth_scaled and layer is not None else norm


class Norm(nn.Module):
    """A norm over the last dimension that can also absorb the residual add in front of it."""

    name = "norm"
    supports_triton = False
    per_token = True  # statistics from each token alone (not across the batch): usable as QK-norm
    gains: tuple[str, ...] = GAINS  # the ``norm.gain`` forms it has
    biases: tuple[bool, ...] = (False,)  # the values ``norm.bias`` may take with a gain: (False,) = it has no β

    @staticmethod
    def stat_features(dim: int, p: float) -> int:
        """How many of the ``dim`` features the statistics come from (all of them, but in pRMSNorm)."""
        return dim

    def add_norm(self, x: torch.Tensor, residual: torch.Tensor, alpha: float = 1.0):
        """Return ``(N(alpha * residual + x), alpha * residual + x)``."""
        s = x + residual if alpha == 1.0 else x + alpha * residual
        return self(s), s

    def init_affine(self, dim: int, spec: NormSpec) -> None:
        """``weight`` (γ, or w of γ = 1 + w) in the form ``spec.gain`` names, and ``bias`` (β, per feature, where
        the norm has one, there is a gain and ``spec.bias`` does not drop it)."""
        self.dim, self.gain_form = dim, spec.gain
        shape = {"vector": (dim,), "zero_centred": (dim,), "scalar": (1,)}.get(spec.gain)  # (1,): FSDP shards dim 0
        init = 0.0 if spec.gain == "zero_centred" else 1.0
        self.weight = nn.Parameter(torch.full(shape, init)) if shape else None
        self.bias = nn.Parameter(torch.zeros(dim)) if shape and True in self.biases and spec.keeps_bias else None

    def gain(self) -> torch.Tensor | None:
        """γ as the formula multiplies by it, of shape (dim,): 1 + w for zero-centred gains, a scalar broadcast
        (the fused kernels take a vector); None without a gain."""
        w = self.weight
        if w is None or self.gain_form == "vector":
            return w
        return 1 + w if self.gain_form == "zero_centred" else w.expand(self.dim).contiguous()


@register_norm("layernorm")
class LayerNorm(Norm):
    """y = γ ⊙ (x − μ)/√(σ² + ε) + β (Ba et al. 2016); ``norm.bias=false``: y = γ ⊙ (x − μ)/√(σ² + ε)."""

    biases = (True, False)  # β by convention, dropped by norm.bias=false

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__()
        self.eps = spec.eps
        self.init_affine(dim, spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.dim,), self.gain(), self.bias, self.eps)


@register_norm("rmsnorm")
class RMSNorm(Norm):
    """y = γ ⊙ x / √(mean(x²) + ε) (Zhang & Sennrich 2019), fp32 statistics, LLaMA style."""

    supports_triton = True

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__()
        self.eps, self.impl = spec.eps, spec.impl
        self.init_affine(dim, spec)
        self.n_stat: int | None = None  # all features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.gain(), self.eps, impl=self.impl, n_stat=self.n_stat)

    def add_norm(self, x: torch.Tensor, residual: torch.Tensor, alpha: float = 1.0):
        return rms_norm(x, self.gain(), self.eps, impl=self.impl, residual=residual, alpha=alpha,
                        n_stat=self.n_stat)


@register_norm("prmsnorm")
class PRMSNorm(RMSNorm):
    """Partial RMSNorm: the RMS is estimated from the first k = ⌈p·d⌉ features (at least 1)."""

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__(dim, spec)
        self.n_stat = self.stat_features(dim, spec.p)

    @staticmethod
    def stat_features(dim: int, p: float) -> int:
        return max(1, math.ceil(p * dim))


@register_norm("l2")
class L2Norm(Norm):
    """y = γ ⊙ x / √(Σx² + ε): projection onto the unit sphere (γ = 1), nGPT's Norm (Loshchilov et al. 2025).

    It is RMSNorm divided by √d (‖x‖ = √d·rms(x)), so its output has norm 1, not √d. ``placement=ngpt`` builds
    every norm of its blocks from it, parameter-free (``norm.gain=none``, its YAML's default); under the other
    placements it is a norm like the rest, in any gain form. Statistics in fp32 at least, as RMSNorm's.
    """

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__()
        self.eps = spec.eps
        self.init_affine(dim, spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x if x.dtype == torch.float64 else x.float()
        y = (xf * torch.rsqrt(xf.square().sum(-1, keepdim=True) + self.eps)).to(x.dtype)
        g = self.gain()
        return y if g is None else y * g


@register_norm("batchnorm")
class BatchNorm(Norm):
    """BatchNorm over batch × positions, per feature — for the ``batchnorm_leak`` experiment only.

    Do not train real models with it. In a causal LM the training-mode statistics of position t
    include every later token of the batch, so the model can read the future through them, and it
    meets different (running) statistics at evaluation; padding and small batches skew them further.
    """

    per_token = False
    gains = ("vector", "none")  # nn.BatchNorm1d's affine part, or none
    biases = (True,)  # its affine part is γ and β together

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__()
        self.bn = nn.BatchNorm1d(dim, eps=spec.eps, affine=spec.affine)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x.reshape(-1, x.shape[-1])).reshape(x.shape)


@register_norm("batchnorm_causal")
class CausalBatchNorm(BatchNorm):
    """BatchNorm whose training statistics at position t use only positions ≤ t, over every sequence of the batch:
    the control of the ``batchnorm_leak`` experiment. It keeps what batch statistics are (shared across the batch,
    noisy for small batches) and removes the one thing that makes BatchNorm non-causal, the future tokens. Its
    evaluation mode uses the running statistics, updated from the whole batch as ``nn.BatchNorm1d`` does.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bn = self.bn
        if not self.training or x.dim() != 3:
            return super().forward(x)
        xf = x if x.dtype == torch.float64 else x.float()  # fp32 statistics at least (as the running ones)
        count = x.shape[0] * torch.arange(1, x.shape[1] + 1, device=x.device, dtype=xf.dtype).view(1, -1, 1)
        mean = xf.sum(0, keepdim=True).cumsum(1) / count  # (1, T, D): batch × positions ≤ t
        var = (xf.square().sum(0, keepdim=True).cumsum(1) / count - mean.square()).clamp_min(0)
        y = (xf - mean) * torch.rsqrt(var + bn.eps)
        if bn.affine:
            y = y * bn.weight + bn.bias
        self._track(xf.detach())
        return y.to(x.dtype)

    @torch.no_grad()
    def _track(self, xf: torch.Tensor) -> None:
        """The running statistics, from the whole batch (evaluation never sees a batch's own statistics)."""
        bn, flat = self.bn, xf.reshape(-1, xf.shape[-1])
        bn.running_mean.lerp_(flat.mean(0), bn.momentum)
        bn.running_var.lerp_(flat.var(0, unbiased=True) if len(flat) > 1 else torch.ones_like(bn.running_var),
                             bn.momentum)
        bn.num_batches_tracked += 1


@register_norm("dyt")
class DyT(Norm):
    """Dynamic Tanh (Zhu et al. 2025, "Transformers without Normalization"): y = γ ⊙ tanh(α·x) + β.

    No statistics at all: a learned scalar α (init ``norm.alpha_init``, the paper's default 0.5) squashes
    each feature, γ and β are per-feature as in LayerNorm (both dropped by ``norm.affine=false``, β alone by
    ``norm.bias=false``); ``norm.eps`` is
    unused. For LLaMA-style LLMs the paper found that α's init must shrink with width and differ by place: a
    larger α in the norm before attention than before the MLP and at the end (0.8 / 0.2 at 7B, down to
    0.2 / 0.05 at 70B), plus a learned scalar on the embeddings (init √d). Here one α init serves every DyT
    and no embedding scale is added: set ``norm.alpha_init`` for your width.
    """

    biases = (True, False)  # β by convention, dropped by norm.bias=false

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), float(spec.alpha_init)))  # (1,), not 0-d: FSDP shards dim 0
        self.init_affine(dim, spec)

    def squash(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.alpha * x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.squash(x)
        if self.weight is None:
            return y
        return y * self.gain() if self.bias is None else torch.addcmul(self.bias, y, self.gain())


@register_norm("derf")
class Derf(DyT):
    """Dynamic erf (arXiv 2512.10938, "Stronger Normalization-Free Transformers"; zlab-princeton/Derf), DyT's
    successor: y = γ ⊙ erf(α·x + s) + β.

    α and the shift s are learned scalars (α init ``norm.alpha_init``, 0.5 as the paper; s init 0); γ and β per
    feature as DyT's. Like DyT it has no statistics (``norm.eps`` unused) and only the torch path.
    """

    def __init__(self, dim: int, spec: NormSpec):
        super().__init__(dim, spec)
        self.shift = nn.Parameter(torch.zeros(1))

    def squash(self, x: torch.Tensor) -> torch.Tensor:
        return torch.erf(self.alpha * x + self.shift)


class DepthScaled(Norm):
    """A norm whose output is multiplied by 1/√ℓ, ℓ the depth (from 1) of the block that owns it: LayerNorm
    Scaling (Sun et al. 2025, "The Curse of Depth in Large Language Models"), for any norm.

    The paper scales the two sublayer-input norms of each Pre-LN block and leaves the final norm alone, which
    is what ``norm.depth_scaled=true`` does with ``placement=pre``. In every other placement all norms a block
    builds are scaled (Peri-LN's output norms, Sub-LN's inner norms; in Post-LN this scales the residual
    stream itself), an extension the paper did not test; QK-norm and the final norm never are.
    """

    def __init__(self, norm: Norm, layer: int):
        super().__init__()
        self.inner, self.layer, self.scale = norm, layer, layer**-0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * self.scale

    def add_norm(self, x: torch.Tensor, residual: torch.Tensor, alpha: float = 1.0):
        y, s = self.inner.add_norm(x, residual, alpha)
        return y * self.scale, s
