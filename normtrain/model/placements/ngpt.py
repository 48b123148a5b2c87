"""nGPT: the normalized Transformer, every hidden state and every weight vector on the unit hypersphere."""

from __future__ import annotations

import torch
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.hypersphere import ScaledUV, ScaledVector, SphereQK, unit_norm_
from normtrain.model.init import InitScheme
from normtrain.model.placements.base import Block, register_placement
from normtrain.norms import NormSpec, build_norm

ALPHA_INIT = 0.05  # α_A,init = α_M,init (§2.6: "of order 1/n_layers"; NVIDIA/ngpt uses 0.05 at every depth)


@register_placement("ngpt")
class NGPTBlock(Block):
    """nGPT (Loshchilov et al., ICLR 2025, §2.2.2): h stays on the unit sphere; each sublayer moves it a learned
    fraction |α| of the way toward its own normalized output, per feature, and the result is normalized again:

        h ← Norm(h + |α_A| ⊙ (Norm(Attn(h)) − h))
        h ← Norm(h + |α_M| ⊙ (Norm(MLP(h)) − h))

        h ──┬── Attn ── Norm ──(−h)── ·|α_A| ──(+)── Norm ──┬── MLP ── Norm ──(−h)── ·|α_M| ──(+)── Norm ──▶
            └─────────────────────────────────────┘          └────────────────────────────────────┘

    Norm(x) = x/‖x‖ (``norm=l2``, no gain). No norm layer of the usual kind and no final norm. The parts, with the
    paper's initial values (§2.6) and its stored scales (§2.5: s = s_stored·s_init/s_scale, s_stored init s_scale):

      α_A, α_M ∈ R^d   init 0.05, scale 1/√d_model (the "eigen learning rates"; |α| enters the update)
      s_qk ∈ R^d       init 1,    scale 1/√d_model: q ← Norm(q) ⊙ s_qk, k ← Norm(k) ⊙ s_qk per head after RoPE,
                                  softmax(q·kᵀ·√d_k) (§2.3.2; ``SphereQK``)
      s_u, s_ν ∈ R^F   init 1,    scale 1: u ← u ⊙ s_u, ν ← ν ⊙ s_ν·√d_model in u ⊙ SiLU(ν) (§2.4.2; ``ScaledUV``)
      s_z ∈ R^V        init 1,    scale 1/√d_model: logits z ⊙ s_z (§2.1; on the model, ``GPT.logit_scale``)

    Every matrix is a set of unit vectors along d_model, restored after each optimizer step
    (``GPT.after_optimizer_step``): the rows of the embeddings, the LM head, W_q, W_k, W_v, W_u and W_ν (the
    matrices that read the stream), the columns of W_o and of the MLP's W_down (the ones that write it). With
    unit h, q and k each logit is a cosine, which is why the softmax scale is √d_k and s_qk restores the range.
    The h of each interpolation is normalized again, as NVIDIA/ngpt does (a no-op on the sphere).
    """

    uses_alpha = False
    has_norms = False  # no norm layers: its normalizations are parameter-free L2 projections
    residual_add = False  # an interpolation on the sphere, not x + F(x): nothing for GPAS to scale
    hypersphere = True

    def __init__(self, attn: CausalSelfAttention, mlp: nn.Module, d_model: int, norm: NormSpec,
                 alpha: float = 1.0, *, layer: int = 0, **options):
        if norm.name != "l2" or norm.gain != "none" or norm.depth_scaled:
            raise ValueError(f"placement ngpt normalizes with x/‖x‖ (norm l2, no gain, not depth-scaled), not {norm}")
        if not hasattr(mlp, "uv_scale"):
            raise ValueError(f"placement ngpt scales the u and ν of a gated MLP (swiglu, geglu), not "
                             f"{type(mlp).__name__}")
        super().__init__(attn, mlp, d_model, norm, alpha, layer=layer, **options)
        self.d_model = d_model
        self.alpha_attn = ScaledVector(d_model, init=ALPHA_INIT, scale=d_model**-0.5)
        self.alpha_mlp = ScaledVector(d_model, init=ALPHA_INIT, scale=d_model**-0.5)
        attn.qk_sphere = SphereQK(build_norm(norm, attn.head_dim), attn.n_heads, attn.head_dim, d_model)
        attn.softmax_scale = attn.head_dim**0.5
        mlp.uv_scale = ScaledUV(mlp.up.out_features, d_model)

    def build_norms(self, spec: NormSpec, d_model: int) -> None:
        self.norm = build_norm(spec, d_model)  # parameter-free: one module serves every Norm of the block

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.update(h, self.attn(h), self.alpha_attn())
        return self.update(h, self.mlp(h), self.alpha_mlp())

    def update(self, h: torch.Tensor, out: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        """Norm(h + |α| ⊙ (Norm(out) − h)), with Norm(h) for h (``out`` = F(h) of the h as it came)."""
        h, out = self.norm(h), out.to(h.dtype)  # under autocast F(h) comes back bf16 and the stream is fp32
        return self.norm(torch.lerp(h, self.norm(out), alpha.abs().to(h.dtype)))

    def unit_matrices(self) -> list[tuple[torch.Tensor, int]]:
        """(weight, dim) of every matrix whose vectors along ``dim`` stay unit: an ``nn.Linear`` weight is
        (out, in), so d_model is dim 1 of a matrix that reads the stream and dim 0 of one that writes it."""
        a, m = self.attn, self.mlp
        return [(a.q_proj.weight, 1), (a.k_proj.weight, 1), (a.v_proj.weight, 1), (a.out_proj.weight, 0),
                (m.gate.weight, 1), (m.up.weight, 1), (m.down.weight, 0)]

    @torch.no_grad()
    def init_weights(self, scheme: InitScheme, beta: float = 1.0) -> None:
        """Gaussian matrices (NVIDIA/ngpt: std 1/√d_model), then unit vectors: uniform directions on the sphere.
        Neither the scheme (``model.init``) nor β applies: a scale is what the normalization removes."""
        for weight, dim in self.unit_matrices():
            nn.init.normal_(weight, std=self.d_model**-0.5)
            unit_norm_(weight, dim)

    def layer_diagnostics(self) -> dict[str, torch.Tensor]:
        """Mean |α_A| and |α_M| of this block, the step sizes of its two updates (``ngpt_alpha_attn/layer_i``,
        ``ngpt_alpha_mlp/layer_i``)."""
        return {"ngpt_alpha_attn": self.alpha_attn().abs().mean(), "ngpt_alpha_mlp": self.alpha_mlp().abs().mean()}
