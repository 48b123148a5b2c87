"""mHC: n parallel residual streams, mixed by a learned doubly stochastic matrix at every sublayer."""

from __future__ import annotations

import torch
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.config import GPTConfig
from normtrain.model.hyper_connections import StreamMappings, read, write
from normtrain.model.init import InitScheme
from normtrain.model.placements.base import Block, register_placement
from normtrain.norms import Norm, NormSpec


@register_placement("mhc")
class MHCBlock(Block):
    """Manifold-constrained hyper-connections (Xie et al. 2025, DeepSeek-AI, "mHC: Manifold-Constrained
    Hyper-Connections", arXiv:2512.24880; reference code: NVIDIA/Megatron-LM's hyper_connection.py and
    transformers' DeepseekV4HyperConnection). The residual stream is n streams x_l ∈ R^{n×d} per token, and each
    sublayer F (attention, then the MLP: two layers l per block, as the paper counts them) reads a weighted sum of
    them and writes its output back into each, while a doubly stochastic H_res mixes them (eq. 3):

        x_{l+1} = H_res_l · x_l + H_post_lᵀ · F(N(H_pre_l · x_l))

                   ┌──────────────── H_res (n×n, doubly stochastic) ───────────────┐
        x_l (n×d) ─┼── H_pre (1×n) ── N ── F ── H_postᵀ (n×1) ────────────────────(+)──▶ x_{l+1} (n×d)
                   └── RMSNorm(vec x_l)·φ, ·α, + b ──▶ H̃_pre, H̃_post, H̃_res (each token its own)

        model: embedding ── copied into n streams ──▶ blocks ──▶ mean of the n streams ── N_final ── head

    H_pre = σ(H̃_pre), H_post = 2σ(H̃_post), H_res = Sinkhorn-Knopp(H̃_res) with t_max = 20 (eq. 7–9;
    ``normtrain.model.hyper_connections``). Rows and columns of H_res sum to 1, so H_res·x_l is a convex
    combination of the streams and a product of them over depth stays one: the identity mapping's conservation,
    which plain hyper-connections (an unconstrained H_res) lose. n = ``placement.streams`` (default 4, the
    paper's); n = 1 is a plain residual with gates σ and 2σ on the sublayer's input and output.

    Where each choice comes from (the paper, arXiv v1, and the reference code where the paper is silent):
      - eq. 3, 7, 8, 9; t_max = 20 and α initialized to 0.01 (Table 5): the paper; both reference codes agree
        (transformers' class as of 5.24, which the tests compare with; an earlier version of it had σ + ε for
        H_post and σ instead of exp before the Sinkhorn iterations, not the paper's).
      - F is Pre-LN inside: N (the configured norm, ``norm=…``) on the collapsed input H_pre·x_l, as the pre-norm
        Transformer the paper analyses (§3.2; Table 3 stores RMSNorm(H_pre x_l)) and both reference codes do.
      - φ Xavier-uniform, b = 0: Megatron-LM (the paper does not say). So every token starts at H_pre ≈ ½,
        H_post ≈ 1 and H_res ≈ 1/n everywhere; transformers' normal(0.02) init is a placeholder for loading
        DeepSeek-V4's checkpoints.
      - ε = 1e-6 on H_pre and in the Sinkhorn iterations: both reference codes; the paper writes none.
      - the RMSNorm of vec(x_l) as √(mean(x²) + ε), ε = 1e-6 inside the root: transformers (and Megatron-LM's
        single-pass path); Megatron-LM's default divides by rms + ε instead and the paper's eq. 15 writes no ε. We
        keep the RMSNorm the paper names in eq. 7.
      - the way in, every stream a copy of the embedding: both reference codes. The way out, the mean of the
        streams before the final norm: Megatron-LM's ``output_contract`` (the paper does not say). DeepSeek-V4 in
        transformers collapses with learned sigmoid weights instead (its ``HyperHead``, a model's own design).
        The final norm makes the mean and the original HC paper's sum the same function (up to ε).
    GPAS (``placement.gpas``) acts on each sublayer's result, g(H_res x + H_postᵀ F), as on Pre-LN's sum.

    ``layer_diagnostics``: per stream j, the mean H_pre and H_post weights (``mhc_pre/stream_j``,
    ``mhc_post/stream_j``, over the tokens of the last forward and the block's two sublayers); per block, H_res's
    mean diagonal (``mhc_res_diag``: 1 keeps each stream apart, 1/n mixes them evenly) and its backward gain, the
    paper's Amax gain magnitude (``mhc_res_gain``: the largest |column sum| per token, averaged over tokens, the
    larger of the two sublayers; the rows sum to 1 by construction).
    """

    final_norm = True
    uses_alpha = False

    def __init__(self, attn: CausalSelfAttention, mlp: nn.Module, d_model: int, norm: NormSpec,
                 alpha: float = 1.0, *, layer: int = 0, streams: int = 4, **options):
        super().__init__(attn, mlp, d_model, norm, alpha, layer=layer, **options)
        self.n = streams
        self.attn_hc, self.mlp_hc = StreamMappings(streams, d_model), StreamMappings(streams, d_model)

    @classmethod
    def from_config(cls, cfg: GPTConfig, layer: int, attn: CausalSelfAttention, mlp: nn.Module,
                    alpha: float) -> Block:
        return cls(attn, mlp, cfg.d_model, cfg.norm, alpha=alpha, layer=layer, gpas=cfg.gpas, streams=cfg.streams)

    @staticmethod
    def stream_in(x: torch.Tensor, cfg: GPTConfig) -> torch.Tensor:
        """Every stream starts as the embedding: (B, T, d) → (B, T, n·d)."""
        return x.repeat(*([1] * (x.dim() - 1)), cfg.streams)

    @staticmethod
    def stream_out(x: torch.Tensor, final_norm: nn.Module | None, cfg: GPTConfig) -> torch.Tensor:
        """N_final of the mean of the n streams."""
        return final_norm(x.unflatten(-1, (cfg.streams, -1)).mean(dim=-2))

    def streams(self, x: torch.Tensor) -> list[torch.Tensor]:
        return list(x.unflatten(-1, (self.n, -1)).unbind(dim=-2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.sublayer(x, self.attn_hc, self.norm1, self.attn)
        return self.sublayer(x, self.mlp_hc, self.norm2, self.mlp)

    def sublayer(self, x: torch.Tensor, hc: StreamMappings, norm: Norm, f: nn.Module) -> torch.Tensor:
        """x_{l+1} = H_res·x_l + H_postᵀ·F(N(H_pre·x_l)) on the streams ``x`` (B, T, n·d)."""
        streams = x.unflatten(-1, (self.n, -1))
        pre, post, res = hc(x)
        out = f(norm(read(pre, streams)))
        return self.scaled(write(res, streams, post, out).flatten(-2))

    @torch.no_grad()
    def init_weights(self, scheme: InitScheme, beta: float = 1.0) -> None:
        super().init_weights(scheme, beta)
        self.attn_hc.reset_parameters()
        self.mlp_hc.reset_parameters()

    @torch.no_grad()
    def layer_diagnostics(self) -> dict[str, torch.Tensor]:
        """The last forward's mappings (the class docstring): two vectors of n, two numbers."""
        seen = [hc.seen for hc in (self.attn_hc, self.mlp_hc) if hc.seen is not None]
        if not seen:
            return {}
        per_stream = lambda t: t.reshape(-1, self.n).mean(0)  # noqa: E731 - over tokens
        return {"mhc_pre": torch.stack([per_stream(pre) for pre, _, _ in seen]).mean(0),
                "mhc_post": torch.stack([per_stream(post) for _, post, _ in seen]).mean(0),
                "mhc_res_diag": torch.stack([res.diagonal(dim1=-2, dim2=-1).mean() for _, _, res in seen]).mean(),
                "mhc_res_gain": torch.stack([res.sum(-2).abs().amax(-1).mean() for _, _, res in seen]).amax()}
