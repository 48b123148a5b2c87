"""The model's own plain config: every value the blocks, attention and MLP are built from (no Hydra).

It sits below the model's modules (``gpt``, ``placements``, ``attention``), which all read it; it imports none
of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from normtrain.norms import NormSpec

QK_NORMS = ("none", "per_head", "full")
QK_NORM_AT = ("before_rope", "after_rope")
ATTN_GATES = ("none", "head", "elementwise")
# Earlier configs (and checkpoints, exports) recorded ``qk_norm`` as a boolean: true was the per-head form.
QK_ALIASES = {"true": "per_head", "false": "none"}


def qk_norm_form(value: Any) -> Any:
    """The QK-norm form ``value`` names (``none``, ``per_head`` or ``full``), reading the booleans of earlier
    configs as aliases (true = per_head, false = none, in any spelling Hydra or JSON gives them); anything else
    comes back as it is, for the caller to refuse."""
    if isinstance(value, bool) or (isinstance(value, str) and value.lower() in QK_ALIASES):
        return QK_ALIASES[str(value).lower()]
    return value


@dataclass
class GPTConfig:
    n_layers: int = 6
    d_model: int = 128
    n_heads: int = 4
    seq_len: int = 128
    vocab_size: int = 256  # byte-level
    mlp: str = "swiglu"  # swiglu | gelu | geglu
    d_ff: int | None = None  # None: 4·d (gelu) or 8/3·d (swiglu, geglu)
    pos: str = "rope"  # rope | learned
    bias: bool = False
    emb_std: float = 1.0  # unit-variance embeddings, as the Post-LN/DeepNorm analyses assume
    norm: NormSpec = field(default_factory=NormSpec)
    placement: str = "pre"
    alpha: float | None = None  # None: the placement's own value for this depth
    beta: float | None = None
    post_fraction: float = 0.25  # mix: the first ⌊f·L⌋ blocks are Post-LN
    first_pre: bool = False  # hybrid: block 0 is Pre-LN (HybridNorm*)
    head_scale: bool = True  # normformer: a learned scale per head on the heads' output, before W_O
    post_act_norm: bool = True  # normformer: a norm after the MLP's activation
    resid_scale: bool = False  # normformer: a learned per-feature scale on the MLP's shortcut
    streams: int = 4  # mhc: the number n of parallel residual streams
    gpas: bool = False  # every placement with a residual add: x − SiLU(a)·sg(x) (GPAS)
    qk_norm: str = "none"  # none | per_head | full: a norm (of the ``norm`` type) on queries and keys
    qk_norm_at: str = "before_rope"  # before_rope | after_rope
    qk_norm_gain: bool = True  # false: the QK- (and V-) norms have no γ (nor β)
    v_norm: bool = False  # the same norm on the values, in QK-norm's form (per head without QK-norm)
    attn_softcap: float = 0.0  # c of c·tanh(s/c) on the attention logits after the 1/√d_head scale; 0 = off
    logit_softcap: float = 0.0  # c of c·tanh(z/c) on the output logits; 0 = off
    attn_gate: str = "none"  # none | head | elementwise: Y ⊙ σ(X·W_θ) before W_O (gated attention)
    emb_proj: bool = False  # OSP: orthogonally initialized d × d maps after the embedding and before the LM head
    tie_embeddings: bool = False  # one matrix for the token embedding and the LM head
    init: str = "xavier"  # xavier | gpt2 | olmo2 | mitchell | small (normtrain/model/init.py)
    init_std: float | None = None  # σ of the schemes with a base std (gpt2, olmo2); None: theirs, 0.02

    def __post_init__(self) -> None:
        self.qk_norm = qk_norm_form(self.qk_norm)

    @property
    def ff_width(self) -> int:
        """The MLP's hidden width: ``d_ff``, else 4·d for GELU and 2/3 of that for the gated MLPs (SwiGLU, GeGLU:
        the same parameter count), rounded up to a multiple of 8."""
        if self.d_ff:
            return self.d_ff
        return 4 * self.d_model if self.mlp == "gelu" else 8 * ((8 * self.d_model // 3 + 7) // 8)
