"""The placement registry and the parts every block shares (attention, MLP, norms, init).

x is the residual stream, F the attention or MLP sublayer, N a norm, α the shortcut scale.
Every block initializes its own weights (``init_weights``), so no two layers share values.

GPAS (Chen et al. 2025, "Gradient-Preserving Activation Scaling", ``placement.gpas``) is a part of every block
with a residual add: ``scaled`` is g(x) = x − SiLU(a)·sg(x), one scalar a per block (init 0: the identity),
sg the stop-gradient, so the forward pass shrinks the stream and the backward pass sees g as the identity (the
gradient of x passes unscaled; a still learns from −SiLU′(a)·x). Blocks that norm the stream after the add
(Pre-LN's family) apply it to the sum, g(x + F); blocks that norm the sum (Post-LN's family) to the shortcut,
N(α·g(x) + F(x)), where a scale after the add would be undone by the norm (the reference code, dandingsky/GPAS,
does both: ``pre_gpas`` and ``deeppost_gpas``).
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.config import GPTConfig
from normtrain.model.init import READER, WRITER, InitScheme
from normtrain.norms import Norm, NormSpec, build_norm

PLACEMENTS: dict[str, type[Block]] = {}


def register_placement(name: str):
    def wrap(cls: type[Block]) -> type[Block]:
        cls.name = name
        PLACEMENTS[name] = cls
        return cls

    return wrap


class Block(nn.Module):
    """Parts shared by every placement: attention, MLP, the norms (``build_norms``) and the shortcut scale α.

    ``layer`` counts blocks from 0; the block's depth ℓ = layer + 1 reaches its norms (``make_norm``), which
    is what ``norm.depth_scaled`` reads.
    """

    name: ClassVar[str] = "block"
    final_norm: ClassVar[bool] = False  # does a model ending in this block need a norm before the LM head?
    uses_alpha: ClassVar[bool] = True  # does α (shortcut scale) appear in the formula?
    has_norms: ClassVar[bool] = True  # does the block hold any norm (``norm.depth_scaled`` needs one)?
    data_dependent: ClassVar[bool] = False  # does it need ``GPT.data_init`` before the first step?
    residual_add: ClassVar[bool] = True  # does it add a sublayer's output to the stream (where GPAS acts)?
    hypersphere: ClassVar[bool] = False  # nGPT: unit embeddings, scaled logits, unit matrices after each step

    def __init__(self, attn: CausalSelfAttention, mlp: nn.Module, d_model: int, norm: NormSpec,
                 alpha: float = 1.0, *, layer: int = 0, gpas: bool = False):
        super().__init__()
        self.attn, self.mlp = attn, mlp
        self.layer = layer
        self.build_norms(norm, d_model)
        self.alpha = float(alpha)
        self.gpas_gate = nn.Parameter(torch.zeros(1)) if gpas else None  # a of SiLU(a); (1,): FSDP shards dim 0

    @classmethod
    def from_config(cls, cfg: GPTConfig, layer: int, attn: CausalSelfAttention, mlp: nn.Module,
                    alpha: float) -> Block:
        """Block ``layer`` (from 0) of the model ``cfg`` describes, around its attention and MLP."""
        return cls(attn, mlp, cfg.d_model, cfg.norm, alpha=alpha, layer=layer, gpas=cfg.gpas)

    @classmethod
    def configured(cls, cfg: GPTConfig) -> GPTConfig:
        """The model config with what this placement implies filled in (HybridNorm: its QKV-norm)."""
        return cfg

    @staticmethod
    def stream_in(x: torch.Tensor, cfg: GPTConfig) -> torch.Tensor:
        """The stream the first block receives from the embedding ``x`` (ResiDual: two copies; mHC: n)."""
        return x

    @staticmethod
    def stream_out(x: torch.Tensor, final_norm: nn.Module | None, cfg: GPTConfig) -> torch.Tensor:
        """The hidden state the LM head reads from the last block's stream ``x``."""
        return x if final_norm is None else final_norm(x)

    def streams(self, x: torch.Tensor) -> list[torch.Tensor] | None:
        """The parallel residual streams that this block's stream ``x`` holds (mHC), for the monitor's statistics
        per stream; None for a single stream."""
        return None

    def scaled(self, x: torch.Tensor) -> torch.Tensor:
        """GPAS's g(x) = x − SiLU(a)·sg(x) (the module's docstring), or x itself without GPAS."""
        return x if self.gpas_gate is None else x - F.silu(self.gpas_gate) * x.detach()

    def added(self, shortcut: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        """The residual add of a stream that is not normed after it: g(shortcut + branch)."""
        return self.scaled(shortcut + branch)

    def added_normed(self, norm: Norm, branch: torch.Tensor, shortcut: torch.Tensor):
        """(N(s), s) with s = ``added(shortcut, branch)``: one fused add + norm pass when GPAS is off."""
        if self.gpas_gate is None:
            return norm.add_norm(branch, residual=shortcut)
        s = self.added(shortcut, branch)
        return norm(s), s

    def make_norm(self, spec: NormSpec, dim: int) -> Norm:
        """One of this block's norms: it knows the block's depth ℓ (for ``norm.depth_scaled``)."""
        return build_norm(spec, dim, layer=self.layer + 1)

    def build_norms(self, spec: NormSpec, d_model: int) -> None:
        """N1 and N2, one per sublayer; placements with more (or none) override this."""
        self.norm1, self.norm2 = self.make_norm(spec, d_model), self.make_norm(spec, d_model)

    @classmethod
    def scaling(cls, n_layers: int) -> tuple[float, float]:
        """(α, β) for a decoder of ``n_layers`` blocks when the config says ``auto``."""
        return 1.0, 1.0

    @torch.no_grad()
    def init_weights(self, scheme: InitScheme, beta: float = 1.0) -> None:
        """Each matrix drawn by ``scheme`` (``model.init``, ``normtrain.model.init``) in its role: the writers
        out_proj and the MLP's down, the rest readers; std times β on v_proj, out_proj and every MLP matrix, times 1
        on q_proj and k_proj (and on the attention gate's W_θ, which reads the input as q and k do and writes
        nothing to the stream).

        Under Xavier with β = 1 this is the plain Xavier init of the original Transformer (used by Xiong et al.
        2020); DeepNorm passes β = (8L)^-¼ (Wang et al. 2022, §4.1): q and k are never scaled.
        """
        for proj in (self.attn.q_proj, self.attn.k_proj, *([self.attn.gate_proj] if self.attn.gate_proj else [])):
            scheme.draw_(proj.weight, READER, self.layer)
        mlp_matrices = (m for m in self.mlp.children() if isinstance(m, nn.Linear))  # not a Sub-LN norm
        for proj in (self.attn.v_proj, self.attn.out_proj, *mlp_matrices):
            writes = proj is self.attn.out_proj or proj is getattr(self.mlp, "down", None)
            scheme.draw_(proj.weight, WRITER if writes else READER, self.layer, gain=beta)
        for lin in (m for m in self.modules() if isinstance(m, nn.Linear) and m.bias is not None):
            nn.init.zeros_(lin.bias)

    def unit_matrices(self) -> list[tuple[torch.Tensor, int]]:
        """(weight, dim) of each matrix kept at unit norm along ``dim`` after every optimizer step (nGPT)."""
        return []

    def layer_diagnostics(self) -> dict[str, torch.Tensor]:
        """Statistics of this block's own parameters that the monitor logs as ``<name>/layer_i`` (nGPT's α)."""
        return {}

    def begin_data_init(self, carry: dict) -> None:
        """Enter the profiling mode of a data-dependent init (``GPT.data_init``); ``carry`` is shared by every
        block in order. Only blocks with ``data_dependent`` do anything."""

    def end_data_init(self, complete: bool) -> None:
        """Leave the profiling mode, setting the profiled values if the pass was ``complete``."""
