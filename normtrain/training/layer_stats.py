"""What the monitor records of each block on a log step, on the device: the forward hooks (``LayerRecorder``)
and the statistics they take of the residual stream (``stream_rms``, ``stream_absmax``, ``block_cosine``;
``normtrain-probe`` measures a trained model with the same functions). See ``monitor`` for the metrics' names.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def stream_rms(x: torch.Tensor) -> torch.Tensor:
    """Root mean square over every element of ``x`` (fp32), in one pass."""
    x = x.detach().float()
    return torch.linalg.vector_norm(x) / x.numel() ** 0.5


def stream_absmax(x: torch.Tensor) -> torch.Tensor:
    """The largest |value| of ``x``: massive activations (Sun et al. 2024) show here long before in the rms. One
    pass (``aminmax``; the inf-norm is several times slower on CPU)."""
    lo, hi = torch.aminmax(x.detach().float())
    return torch.maximum(hi, -lo)


def block_cosine(x_in: torch.Tensor, x_out: torch.Tensor) -> torch.Tensor:
    """cos(x_in, x_out) of each token's input and output vectors (B, T, d), averaged over batch and positions:
    near 1 the block is close to the identity on the stream (the curse of depth, Sun et al. 2025). A zero
    vector counts as cosine 0. (Twice as fast on CPU as ``F.cosine_similarity``.)"""
    x_in, x_out = x_in.detach().float(), x_out.detach().float()
    norms = torch.linalg.vector_norm(x_in, dim=-1) * torch.linalg.vector_norm(x_out, dim=-1)
    return (torch.linalg.vecdot(x_in, x_out) / norms.clamp_min(1e-30)).mean()


def _tracks(attn: nn.Module) -> bool:
    """Does the attention keep its per-head max logit itself (for QK-Clip)?"""
    return bool(getattr(attn, "track_logit_max", False))


class LayerRecorder:
    """The forward hooks of a log step: each switched-on statistic of each block appended on the device, then
    stacked into one vector per statistic (``stacked``). Hooks fire in block order."""

    def __init__(self, *, activations: bool, residual_stats: bool, block_cos: bool, attn_entropy: bool,
                 attn_logit_max: bool, cap_saturation: bool = False):
        self.activations, self.residual_stats, self.block_cos = activations, residual_stats, block_cos
        self.attn_entropy, self.attn_logit_max, self.cap_saturation = attn_entropy, attn_logit_max, cap_saturation
        self.values: dict[str, list[torch.Tensor]] = {}  # one log step's, from ``attach`` on

    @property
    def wanted(self) -> bool:
        return (self.activations or self.residual_stats or self.block_cos or self.attn_entropy or self.attn_logit_max
                or self.cap_saturation)

    def recomputes(self, attn: nn.Module) -> bool:
        """Does ``attn`` need the explicit one-sequence logits (``attn_input``)? Not for a max logit the
        attention already tracks (QK-Clip), nor for a saturation without a cap."""
        return (self.attn_entropy or (self.attn_logit_max and not _tracks(attn))
                or (self.cap_saturation and bool(getattr(attn, "softcap", 0.0))))

    def attach(self, blocks: Sequence[nn.Module]) -> list:
        """Start recording a forward pass of ``blocks``: the hooks (for the caller to remove)."""
        self.values, handles = {}, []
        for b in blocks:
            if self.activations:
                handles.append(b.register_forward_pre_hook(self.block_input))
            if self.activations or self.residual_stats or self.block_cos:
                handles.append(b.register_forward_hook(self.block_output))
            if hasattr(b, "attn") and self.recomputes(b.attn):
                handles.append(b.attn.register_forward_pre_hook(self.attn_input))
            if hasattr(b, "attn") and self.attn_logit_max and _tracks(b.attn):
                handles.append(b.attn.register_forward_hook(self.attn_tracked))
        return handles

    def add(self, name: str, value: torch.Tensor) -> None:
        self.values.setdefault(name, []).append(value)

    def block_input(self, _module, args) -> None:
        self.add("resid_norm", args[0].detach().float().norm(dim=-1).mean())

    def block_output(self, module, args, out) -> None:
        out = out.detach().float()
        if self.activations:
            self.add("act_mean", out.mean())
            self.add("act_std", out.std())
        if self.residual_stats:
            self.add("act_rms", stream_rms(out))
            self.add("act_absmax", stream_absmax(out))
        if self.block_cos:
            self.add("block_cos", block_cosine(args[0], out))
        if self.residual_stats and hasattr(module, "streams") and (streams := module.streams(out)) is not None:
            self.add("act_rms_stream", torch.stack([stream_rms(s) for s in streams]))  # mHC's n streams, each alone
            self.add("act_absmax_stream", torch.stack([stream_absmax(s) for s in streams]))

    def attn_input(self, module, args) -> None:
        stats = module.logit_stats(args[0][:1].detach())  # one explicit T×T pass for all
        if self.attn_entropy:
            self.add("attn_entropy", stats.entropy)
        if self.attn_logit_max and not _tracks(module):
            self.add("attn_logit_max", stats.head_max)
        if self.cap_saturation and stats.cap_saturation is not None:
            self.add("attn_cap_sat", stats.cap_saturation)

    def attn_tracked(self, module, _args, _out) -> None:
        """The per-head max logit the attention tracked in this forward pass (QK-Clip's S_max)."""
        self.add("attn_logit_max", module.logit_max)

    def stacked(self, n_blocks: int, heads: bool = True) -> dict[str, torch.Tensor]:
        """One vector per statistic; a statistic some block did not give (no ``attn``) is left out. The max
        logit comes per head (blocks × heads): its max over the heads, and with ``heads`` the matrix itself."""
        out = {name: torch.stack(v) for name, v in self.values.items() if len(v) == n_blocks}
        if (per_head := out.pop("attn_logit_max", None)) is not None:
            out["attn_logit_max"] = per_head.amax(-1)
            if heads:
                out["attn_head_logit_max"] = per_head
        return out
