"""The model groups' checks (``model``, ``norm``, ``placement``): each key alone, then against each other and
against what the norm type and the placement can do (the model's registries say what each can).

They judge the model that will be built (``model_as_built``): ``model.qk_norm`` in today's spelling (true =
per_head) and what the placement implies (HybridNorm's QKV-norm), so no check reads ``model.qk_norm`` its own way.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from normtrain.config.rules import at_least, finite, one_of, scale
from normtrain.config.schema import POSITIONS, ModelSchema

QK_MIN_FEATURES = 8  # pRMSNorm as QK-norm: fewest features its rms may come from (fewer bounds nothing)
# Keys of one placement only, which sets them in its YAML; null elsewhere.
PLACEMENT_KEYS = {"post_fraction": "mix", "first_pre": "hybrid", "head_scale": "normformer",
                  "post_act_norm": "normformer", "resid_scale": "normformer", "streams": "mhc"}


def model_as_built(m: DictConfig, pl: DictConfig) -> DictConfig:
    """``model`` as the model will read it: first what the placement implies (HybridNorm's QKV-norm) where the
    config left the default, so that the QK-norm checks judge the model that will be built (a contradicting value
    is left for ``placement_key_problems`` to report); then ``model.qk_norm`` in today's spelling (true = per_head,
    false = none; an unknown value as it is, for ``qk_norm_problems`` to refuse)."""
    from normtrain.model.config import qk_norm_form
    from normtrain.model.placements.hybrid import IMPLIED

    defaults = ModelSchema()
    implied = {k: v for k, v in IMPLIED.items() if m[k] == getattr(defaults, k)} if pl.name == "hybrid" else {}
    form = qk_norm_form(m.qk_norm)
    if form != m.qk_norm and "qk_norm" not in implied:
        implied["qk_norm"] = form
    return OmegaConf.merge(m, implied) if implied else m


def model_problems(m: DictConfig, n: DictConfig, pl: DictConfig) -> list[str]:
    """Every problem of the model groups; ``m`` as ``model_as_built`` gives it."""
    from normtrain.model import NORMS, PLACEMENTS
    from normtrain.model.mlp import MLPS
    from normtrain.ops.rmsnorm import IMPLS

    p: list[str] = []
    at_least("model.n_layers", m.n_layers, 1, p)
    if m.d_model < 1 or m.n_heads < 1:
        p.append(f"model.d_model={m.d_model}, model.n_heads={m.n_heads}: both must be at least 1")
    elif m.d_model % m.n_heads:
        p.append(f"model.n_heads={m.n_heads} does not divide model.d_model={m.d_model}")
    elif m.pos == "rope" and (m.d_model // m.n_heads) % 2:
        p.append(f"model.pos=rope needs an even head size; d_model/n_heads = {m.d_model // m.n_heads}")
    at_least("model.seq_len", m.seq_len, 1, p)
    at_least("model.d_ff", m.d_ff, 1, p, " (or null for the default)")
    at_least("model.vocab_size", m.vocab_size, 1, p, " (or null for the corpus's)")
    finite("model.emb_std", m.emb_std, m.emb_std > 0, "the embedding init std must be a finite number > 0", p)
    one_of(m.mlp, "model.mlp", MLPS, p)
    one_of(m.pos, "model.pos", POSITIONS, p)
    one_of(n.name, "norm.name", NORMS, p)
    one_of(n.impl, "norm.impl", IMPLS, p)
    finite("norm.eps", n.eps, n.eps > 0, "must be a finite number > 0", p)
    finite("norm.p", n.p, 0 < n.p <= 1, "the prmsnorm fraction must lie in (0, 1]", p)
    if n.impl == "triton" and n.name in NORMS and not NORMS[n.name].supports_triton:
        triton_norms = sorted(k for k, c in NORMS.items() if c.supports_triton)
        p.append(f"norm.impl=triton is only available for {', '.join(triton_norms)}, not {n.name}")
    one_of(pl.name, "placement.name", PLACEMENTS, p)
    alpha = scale(pl.alpha, "placement.alpha", p)
    scale(pl.beta, "placement.beta", p)
    if pl.name in PLACEMENTS and alpha not in (None, 1.0) and not PLACEMENTS[pl.name].uses_alpha:
        users = sorted(k for k, c in PLACEMENTS.items() if c.uses_alpha)
        p.append(f"placement.alpha={pl.alpha}: α scales the shortcut before the norm, which only "
                 f"{', '.join(users)} have; use 'auto' with placement={pl.name}")
    return p + catalog_problems(m, n, pl)


def catalog_problems(m: DictConfig, n: DictConfig, pl: DictConfig) -> list[str]:
    """The keys of the newer norms, placements and stabilizers, alone and against each other."""
    from normtrain.model import PLACEMENTS

    p: list[str] = []
    finite("norm.alpha_init", n.alpha_init, n.alpha_init > 0, "DyT's and Derf's initial α must be a finite number > 0",
            p)
    if pl.post_fraction is not None:
        finite("placement.post_fraction", pl.post_fraction, 0 <= pl.post_fraction <= 1,
                "the share of Post-LN blocks must lie in [0, 1]", p)
    at_least("placement.streams", pl.streams, 1, p, " (the number n of residual streams mHC carries; the paper's "
             "is 4, and 1 is one stream with gated input and output)")
    from normtrain.model.ngpt_rules import ngpt_model_problems

    p += (placement_key_problems(m, pl) + qk_norm_problems(m, n) + gain_problems(n) + bias_problems(n)
          + attention_problems(m, n) + init_problems(m) + ngpt_model_problems(m, n, pl))
    if n.depth_scaled and pl.name in PLACEMENTS and not PLACEMENTS[pl.name].has_norms:
        normed = sorted(k for k, c in PLACEMENTS.items() if c.has_norms)
        p.append(f"norm.depth_scaled=true: placement={pl.name} holds no norm to scale; placements with norms: "
                 f"{', '.join(normed)}")
    return p


def placement_key_problems(m: DictConfig, pl: DictConfig) -> list[str]:
    """The keys of one placement set with another, GPAS where there is no residual add, and a QK-norm form that
    contradicts HybridNorm's."""
    from normtrain.model import PLACEMENTS

    p = [f"placement.{key}={str(pl[key]).lower()} applies to placement={owner} only, not placement={pl.name}"
         for key, owner in PLACEMENT_KEYS.items() if pl[key] is not None and pl.name != owner]
    if pl.gpas and pl.name in PLACEMENTS and not PLACEMENTS[pl.name].residual_add:
        adds = sorted(k for k, c in PLACEMENTS.items() if c.residual_add)
        p.append(f"placement.gpas=true scales the stream after a residual add, and placement={pl.name} has none; "
                 f"placements with one: {', '.join(adds)}")
    if pl.name == "hybrid" and m.qk_norm != "per_head":  # v_norm's only other value is the default
        p.append(f"placement=hybrid normalizes queries, keys and values per head (it implies model.qk_norm=per_head "
                 f"and model.v_norm=true), which model.qk_norm={m.qk_norm} contradicts: leave "
                 "model.qk_norm unset (or per_head)")
    return p


def qk_norm_problems(m: DictConfig, n: DictConfig) -> list[str]:
    """A QK-norm form the norm type can serve: QK-norm exists to bound the attention logits, which a norm whose
    statistics mix positions (BatchNorm) or that reads too few features (pRMSNorm) does not do."""
    from normtrain.model import NORMS
    from normtrain.model.config import QK_NORMS

    form = m.qk_norm
    if form not in QK_NORMS:
        return [f"model.qk_norm={m.qk_norm!r} is not known; allowed: {', '.join(QK_NORMS)} (true = per_head, "
                "false = none)"]
    if form == "none" or n.name not in NORMS:
        return []
    if not NORMS[n.name].per_token:
        per_token = sorted(k for k, c in NORMS.items() if c.per_token)
        return [f"model.qk_norm={form} normalizes each token's query and key, which norm={n.name} cannot (its "
                f"statistics mix positions); allowed: {', '.join(per_token)}"]
    width = (m.d_model // max(m.n_heads, 1)) if form == "per_head" else m.d_model
    if width >= 1 and (k := NORMS[n.name].stat_features(width, n.p)) < min(QK_MIN_FEATURES, width):
        where = "head" if form == "per_head" else "projection"
        full = NORMS[n.name].stat_features(m.d_model, n.p) >= QK_MIN_FEATURES and form == "per_head"
        return [f"model.qk_norm={form} with norm={n.name} estimates the rms of each {width}-feature {where} from "
                f"{k} feature{'s' * (k > 1)} (norm.p={n.p}): too few to bound the attention logits, which is what "
                f"QK-norm is for; it needs at least {QK_MIN_FEATURES} (norm.p ≥ {QK_MIN_FEATURES / width:.3g})"
                + (", or model.qk_norm=full" if full else "") + ", or another norm type"]
    return []


def gain_problems(n: DictConfig) -> list[str]:
    """``norm.gain``: a form the norm type has, and no clash with ``norm.affine=false`` (which means ``none``)."""
    from normtrain.model import NORMS
    from normtrain.norms import GAINS

    if n.gain not in GAINS:
        return [f"norm.gain={n.gain!r} is not known; allowed: {', '.join(GAINS)} (norm.affine=false = none)"]
    if not n.affine and n.gain not in ("vector", "none"):
        return [f"norm.affine=false means norm.gain=none (no γ, no β), which contradicts norm.gain={n.gain}; "
                "drop one of them"]
    if n.name in NORMS and n.gain not in NORMS[n.name].gains:
        return [f"norm.gain={n.gain}: norm={n.name} has only {' and '.join(NORMS[n.name].gains)} gains "
                "(nn.BatchNorm1d's own affine part, or none)"]
    return []


def bias_problems(n: DictConfig) -> list[str]:
    """``norm.bias``: null (the norm's convention), false (γ without β) for any norm but BatchNorm, whose affine
    part is γ and β together; true only for a norm that has β, and only with a gain (``norm.gain=none`` has
    neither)."""
    from normtrain.model import NORMS

    if n.bias is None or n.name not in NORMS:
        return []
    with_beta = sorted(k for k, c in NORMS.items() if True in c.biases)
    if n.bias and n.gain == "none":
        return ["norm.bias=true adds β next to γ, and norm.gain=none has neither (no γ, no β); drop one of them"]
    if n.bias not in NORMS[n.name].biases and n.gain != "none":
        if n.bias:
            return [f"norm.bias=true: norm={n.name} has no β to keep (its formula has no shift); norms with one: "
                    f"{', '.join(with_beta)}"]
        return [f"norm.bias=false: norm={n.name}'s affine part (nn.BatchNorm1d's) is γ and β together; use "
                "norm.gain=none for neither"]
    return []


def init_problems(m: DictConfig) -> list[str]:
    """``model.init`` names a scheme, ``model.init_std`` sets the σ of one that has a base std, and
    ``model.emb_std`` (the xavier scheme's embedding std) is set only where it draws a weight."""
    from normtrain.model.init import INIT_SCHEMES

    p: list[str] = []
    one_of(m.init, "model.init", INIT_SCHEMES, p)
    based = sorted(k for k, c in INIT_SCHEMES.items() if c.base_std is not None)
    if m.init_std is not None:
        finite("model.init_std", m.init_std, m.init_std > 0, "the scheme's σ must be a finite number > 0 (or null: "
               "its own, 0.02)", p)
        if m.init in INIT_SCHEMES and INIT_SCHEMES[m.init].base_std is None:
            p.append(f"model.init_std={m.init_std} sets the σ of model.init={' or '.join(based)}; "
                     f"model.init={m.init} has no base std (its stds come from the widths)")
    if m.emb_std != 1.0 and m.init in INIT_SCHEMES:
        if m.init != "xavier":
            p.append(f"model.emb_std={m.emb_std} is the xavier scheme's embedding std; model.init={m.init} draws the "
                     "embeddings itself" + (" (set model.init_std)" if m.init in based else ""))
        elif m.tie_embeddings and m.pos != "learned":
            p.append(f"model.emb_std={m.emb_std} draws no weight here: the tied matrix is drawn as the LM head "
                     "(Xavier-normal) and model.pos=rope has no position embedding; leave it at 1.0")
    return p


def attention_problems(m: DictConfig, n: DictConfig) -> list[str]:
    """The QK-norm's place and gain, V-norm, the soft-caps and the attention gate, alone and with the rest."""
    from normtrain.model import NORMS
    from normtrain.model.config import ATTN_GATES, QK_NORM_AT

    p: list[str] = []
    one_of(m.qk_norm_at, "model.qk_norm_at", QK_NORM_AT, p)
    one_of(m.attn_gate, "model.attn_gate", ATTN_GATES, p)
    qk = m.qk_norm != "none"
    if m.v_norm and n.name in NORMS and not NORMS[n.name].per_token:
        per_token = sorted(k for k, c in NORMS.items() if c.per_token)
        p.append(f"model.v_norm=true normalizes each token's values, which norm={n.name} cannot (its statistics mix "
                 f"positions); allowed: {', '.join(per_token)}")
    if m.qk_norm_at == "after_rope" and not qk:
        p.append("model.qk_norm_at=after_rope places QK-norm, and model.qk_norm=none has none: set model.qk_norm "
                 "(per_head or full) or leave model.qk_norm_at=before_rope")
    elif m.qk_norm_at == "after_rope" and m.pos != "rope":
        p.append(f"model.qk_norm_at=after_rope: model.pos={m.pos} has no RoPE, so before and after are the same "
                 "model; use model.pos=rope or model.qk_norm_at=before_rope")
    if not m.qk_norm_gain and not qk and not m.v_norm:
        p.append("model.qk_norm_gain=false removes the gain of QK-norm (and V-norm), and this model has neither: "
                 "set model.qk_norm or model.v_norm=true, or drop it")
    for key in ("attn_softcap", "logit_softcap"):
        finite(f"model.{key}", m[key], m[key] >= 0, "the soft-cap c of c·tanh(z/c) must be a finite number >= 0 "
                "(0 = off)", p)
    return p

