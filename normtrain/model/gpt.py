"""A decoder-only GPT whose norm type and placement are parameters (read top to bottom).

``emb_proj`` (OSP, Park et al. 2025, "Outlier-Safe Pre-Training"): two learnable d × d matrices, orthogonally
initialized and not tied, one applied to the embedding (token plus learned position, when there is one) before the
first block, one to the final hidden state before the LM head:

    x_0 = P_in · E[idx],    logits = W_head · P_out · h_L

The embedding and the head stay with AdamW under ``optim=muon``, whose per-coordinate steps build outlier
channels; the projections are hidden matrices that Muon trains (``io_parameters`` leaves them out), so they spread
those magnitudes over every direction. At init they are rotations: the model computes the same distribution of
functions as without them. (After training each can be folded into its neighbour: E·P_inᵀ, W_head·P_out.)

``tie_embeddings`` (Press & Wolf 2017; GPT-2, nanoGPT, Gemma, OLMo 1B): the LM head *is* the token embedding,
logits = E · h_L, one Parameter under two names (``tok_emb.weight``, ``lm_head.weight``), so ``parameters()``,
the optimizer, the parameter count and the FLOPs see it once, while the state dict keeps both names (a checkpoint
of a tied model loads as it was saved; ``unique_state_dict`` writes it once). The matrix is drawn last, as the
head (``normtrain.model.init``). nGPT keeps its two matrices apart (refused).

How each weight starts is ``model.init``'s scheme (``normtrain.model.init``): Xavier by default.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from normtrain.model.attention import CausalSelfAttention
from normtrain.model.config import GPTConfig
from normtrain.model.hypersphere import ScaledVector, unit_norm_
from normtrain.model.init import EMBEDDING, HEAD, init_scheme
from normtrain.model.mlp import MLPS
from normtrain.model.placements import PLACEMENTS, Block
from normtrain.model.softcap import soft_cap
from normtrain.norms import build_norm


def resolved_scaling(cfg: GPTConfig) -> tuple[float, float]:
    """(α, β) of the model ``cfg`` describes: ``None`` filled with the placement's default for ``n_layers``."""
    alpha, beta = PLACEMENTS[cfg.placement].scaling(cfg.n_layers)
    return (alpha if cfg.alpha is None else float(cfg.alpha), beta if cfg.beta is None else float(cfg.beta))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if cfg.placement not in PLACEMENTS:
            raise ValueError(f"unknown placement {cfg.placement!r}; allowed: {', '.join(sorted(PLACEMENTS))}")
        block_cls = PLACEMENTS[cfg.placement]
        if block_cls.hypersphere and (cfg.tie_embeddings or cfg.init != "xavier" or cfg.init_std is not None):
            raise ValueError("placement ngpt keeps its own embedding and LM head (both unit rows) and draws its own "
                             "unit weights: tie_embeddings, init and init_std do not apply to it")
        self.cfg = cfg = block_cls.configured(cfg)
        self.init = init_scheme(cfg)
        self.placement = block_cls  # the stream's way in and out of the blocks (``stream_in``, ``stream_out``)
        self.alpha, self.beta = resolved_scaling(cfg)

        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model) if cfg.pos == "learned" else None
        self.blocks = nn.ModuleList(
            block_cls.from_config(
                cfg, layer,
                CausalSelfAttention.from_config(cfg),
                MLPS[cfg.mlp](cfg.d_model, cfg.ff_width, bias=cfg.bias),
                self.alpha,
            )
            for layer in range(cfg.n_layers)
        )
        self.final_norm = build_norm(cfg.norm, cfg.d_model) if self.blocks[-1].final_norm else None
        self.emb_in = nn.Linear(cfg.d_model, cfg.d_model, bias=False) if cfg.emb_proj else None
        self.emb_out = nn.Linear(cfg.d_model, cfg.d_model, bias=False) if cfg.emb_proj else None
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        # nGPT: unit embedding and head rows; logits z ⊙ s_z, s_z,init 1, s_z,scale 1/√d (model/hypersphere.py)
        self.hypersphere = block_cls.hypersphere
        self.logit_scale = ScaledVector(cfg.vocab_size, init=1.0, scale=cfg.d_model**-0.5) if self.hypersphere \
            else None
        self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """Every weight drawn by the ``model.init`` scheme, in one fixed order (the embeddings, each block, the
        head): the same seed gives the same blocks whatever the tie, and a tied matrix ends with the head's draw."""
        for emb in (self.tok_emb, self.pos_emb):
            if emb is not None:
                self.init.draw_(emb.weight, EMBEDDING)
        block: Block
        for block in self.blocks:
            block.init_weights(self.init, self.beta)
        self.init.draw_(self.lm_head.weight, HEAD)
        for proj in (self.emb_in, self.emb_out):
            if proj is not None:
                nn.init.orthogonal_(proj.weight)
        self.after_optimizer_step()  # nGPT starts on the sphere

    @torch.no_grad()
    def after_optimizer_step(self) -> None:
        """What the placement keeps true of the weights between updates; the training loop calls it after each
        optimizer step, a resume and a rollback. nGPT (§2.6): every matrix back to unit vectors along d_model —
        the embedding and LM-head rows here, each block's matrices as it names them (``Block.unit_matrices``).
        Nothing for the other placements."""
        if not self.hypersphere:
            return
        for weight, dim in [(self.tok_emb.weight, 1), (self.lm_head.weight, 1)] + [
                pair for block in self.blocks for pair in block.unit_matrices()]:
            unit_norm_(weight, dim)

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The final hidden state (B, T, d) that the LM head reads."""
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        if self.emb_in is not None:
            x = self.emb_in(x)
        x = self.placement.stream_in(x, self.cfg)
        for block in self.blocks:
            x = block(x)
        x = self.placement.stream_out(x, self.final_norm, self.cfg)
        return x if self.emb_out is None else self.emb_out(x)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *, hidden_only: bool = False):
        """Logits (B, T, V) (nGPT: times s_z), soft-capped by ``logit_softcap`` (c·tanh(z/c), Gemma 2) when it is
        set, and the mean cross-entropy of those logits when ``targets`` are given.

        ``hidden_only`` returns the final hidden state instead, through ``forward`` so that wrappers
        hooked on it (FSDP) see the call.
        """
        if hidden_only:
            return self.hidden(idx)
        logits = self.lm_head(self.hidden(idx))
        if self.logit_scale is not None:
            logits = logits * self.logit_scale().to(logits.dtype)
        logits = soft_cap(logits, self.cfg.logit_softcap)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        return logits, loss

    def io_parameters(self) -> list[nn.Parameter]:
        """The parameters that map tokens in and out: the embeddings and the LM head (one tensor when tied).
        Optimizers that treat the hidden matrices apart (Muon) leave these to AdamW."""
        modules = (self.tok_emb, self.pos_emb, self.lm_head)
        return list({id(p): p for m in modules if m is not None for p in m.parameters()}.values())

    def num_params(self) -> int:
        """Every parameter once (a tied embedding and head are one matrix)."""
        return sum(p.numel() for p in self.parameters())

    def unique_state_dict(self) -> dict[str, torch.Tensor]:
        """The state dict with each tensor under one name: a tied head is ``tok_emb.weight`` alone (safetensors
        refuses two names for one tensor, and tied Hugging Face checkpoints leave the head out too)."""
        state = self.state_dict()
        if self.cfg.tie_embeddings:
            state.pop("lm_head.weight", None)
        return state

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``, which also takes ``unique_state_dict``'s dict: a tied model without
        ``lm_head.weight`` reads its head from ``tok_emb.weight``."""
        if self.cfg.tie_embeddings and "lm_head.weight" not in state_dict and "tok_emb.weight" in state_dict:
            state_dict = {**state_dict, "lm_head.weight": state_dict["tok_emb.weight"]}
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    @property
    def needs_data_init(self) -> bool:
        """Does a block of this model set values from data at init (``data_init``)?"""
        return any(b.data_dependent for b in self.blocks)

    @torch.no_grad()
    def data_init(self, idx: torch.Tensor) -> bool:
        """Data-dependent initialization (Admin's ω): one forward pass on the tokens ``idx`` (B, T) with every
        block that needs it in its profiling mode, a ``carry`` dict handed from block to block in order; each
        sets its values after the pass. Returns False (nothing run) when no block needs it.

        Call it once on a fresh model before the first step, never on a resumed one: the values are in the
        state dict. It runs through ``forward``, so FSDP's hooks gather the parameters as in training.
        """
        if not self.needs_data_init:
            return False
        blocks = [b for b in self.blocks if b.data_dependent]
        carry: dict = {}
        for block in blocks:
            block.begin_data_init(carry)
        complete = False
        try:
            self(idx, hidden_only=True)
            complete = True
        finally:
            for block in blocks:
                block.end_data_init(complete)
        return True
