"""Typed config schemas (registered with Hydra's ConfigStore), composition and validation.

The schemas make a typo in a key or a wrong type fail at start-up; ``validate`` then reports every key
that Hydra's ``+key=value`` forced in past the schema, checks the values (finite, in range) and against
each other, and reports every problem at once (litgpt's ``validate_args`` habit).
"""

from __future__ import annotations

import difflib
import glob
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

from omegaconf import MISSING, DictConfig, OmegaConf

from normtrain.loggers import BACKENDS
from normtrain.util.errors import ConfigError

if TYPE_CHECKING:  # the model (and torch) load on first validation, not on import: `normtrain --help` stays fast
    from normtrain.model import GPT, GPTConfig

SCHEDULES = ("cosine", "constant", "inverse_sqrt")
DEVICES = ("auto", "cpu", "cuda")
POSITIONS = ("rope", "learned")
LOGGERS = (*BACKENDS, "none")  # logger=NAME, or several: logger=[wandb,tensorboard]
WANDB_MODES = ("auto", "online", "offline", "disabled")
OPTIMIZERS = ("adamw", "sgd", "muon")
ON_DIVERGENCE = ("stop", "rollback")
CKPT_FORMATS = ("auto", "full", "dcp")  # auto: dcp under torchrun (world size > 1), full on one process
MAX_SEED = 2**32 - 1  # numpy's seed range
QK_MIN_FEATURES = 8  # pRMSNorm as QK-norm: fewest features its rms may come from (fewer bounds nothing)
ZERO_MEANS = {"eval_every": "only at the end", "ckpt_every": "only at the end",
              "eval_windows": "train.batch_size × train.eval_batches"}


@dataclass
class ModelSchema:
    n_layers: int = 6
    d_model: int = 128
    n_heads: int = 4
    seq_len: int = 128
    mlp: str = "swiglu"
    d_ff: int | None = None
    pos: str = "rope"
    bias: bool = False
    emb_std: float = 1.0
    qk_norm: str = "none"  # none | per_head | full (true = per_head, false = none): QK-norm of the norm type
    qk_norm_at: str = "before_rope"  # before_rope | after_rope
    qk_norm_gain: bool = True  # false: parameter-free QK- (and V-) norms
    v_norm: bool = False  # the norm on the values too, in QK-norm's form (per head without QK-norm)
    attn_softcap: float = 0.0  # c·tanh(s/c) on the attention logits after the 1/√d_head scale; 0 = off
    logit_softcap: float = 0.0  # c·tanh(z/c) on the output logits; 0 = off
    attn_gate: str = "none"  # none | head | elementwise: gated attention, Y ⊙ σ(X·W_θ) before W_O
    emb_proj: bool = False  # OSP: orthogonal d × d maps after the embedding and before the LM head (Muon's)
    vocab_size: int | None = None  # null: the corpus's (256 for bytes, meta.json's for token shards)


@dataclass
class NormSchema:
    name: str = MISSING
    eps: float = 1e-6
    affine: bool = True
    impl: str = "auto"
    p: float = 0.0625
    alpha_init: float = 0.5  # dyt, derf: initial α of γ·tanh(α·x) + β, γ·erf(α·x + s) + β
    depth_scaled: bool = False  # block ℓ's norms multiply their output by 1/√ℓ (LayerNorm Scaling)
    gain: str = "vector"  # vector | zero_centred (1 + w) | scalar | none (affine=false is none)


@dataclass
class PlacementSchema:
    name: str = MISSING
    alpha: Any = "auto"  # "auto" or a number
    beta: Any = "auto"
    post_fraction: float | None = None  # mix only (its YAML sets 0.25): Post-LN for the first ⌊f·L⌋ blocks
    first_pre: bool | None = None  # hybrid only (its YAML sets false): block 0 is Pre-LN (HybridNorm*)
    head_scale: bool | None = None  # normformer only (its YAML sets the paper's true): γ_h per head before W_O
    post_act_norm: bool | None = None  # normformer only (true): a norm after the MLP's activation
    resid_scale: bool | None = None  # normformer only (false): a learned λ ⊙ on the MLP's shortcut
    streams: int | None = None  # mhc only (its YAML sets 4): the number n of parallel residual streams
    gpas: bool = False  # GPAS after each residual add: x − SiLU(a)·sg(x), a per block, init 0


@dataclass
class PrepareSchema:
    """How a preset's shards are made: the normtrain-prepare command, as values (``shards.prepare_command``)."""

    source: str = MISSING  # a hub dataset id, or a local file / folder / glob
    tokenizer: str = "bytes"
    vocab_size: int | None = None
    config: str | None = None
    split: str = "train"
    revision: str | None = None
    text_field: str = "text"
    streaming: bool = False
    max_tokens: int | None = None
    note: str | None = None  # what to do before the command (e.g. a download)


@dataclass
class DataSchema:
    name: str = MISSING
    path: str | None = None
    val_fraction: float = 0.05
    cache_dir: str | None = None  # default: $NORMTRAIN_CACHE or ~/.cache/normtrain
    prepare: PrepareSchema | None = None  # data=tokens presets: how normtrain-prepare writes data.path


@dataclass
class OptimSchema:
    name: str = "adamw"
    lr: float = 1e-3
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1e-8
    weight_decay: float = 0.1
    warmup_steps: int = 50
    schedule: str = "cosine"
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio
    warmup_overlaps: bool = False  # the warm-up ramp multiplies a schedule counted from step 0 (training/optim.py)
    grad_clip: float = 1.0  # 0 = off
    z_loss: float = 0.0  # coefficient of mean(log² Z) added to the loss; 0 = off
    independent_wd: bool = False  # per-step decay weight_decay × lr_t/lr (not lr_t × weight_decay)
    momentum: float = 0.0  # sgd only
    # muon only: torch.optim.Muon on the hidden matrices; lr, betas, eps, weight_decay are AdamW's for the rest
    muon_lr: float = 0.02  # Muon's peak lr (the schedule scales it as it scales optim.lr)
    muon_momentum: float = 0.95
    muon_nesterov: bool = True
    muon_ns_steps: int = 5  # Newton–Schulz iterations
    muon_weight_decay: float = 0.0  # decoupled: w ← w·(1 − lr_t·wd) before the update
    adjust_lr_fn: str = "original"  # original: lr·√max(1, A/B) | match_rms_adamw: lr·0.2·√max(A, B)
    qk_clip: float = 0.0  # τ of QK-Clip (Kimi K2), after each step: heads with max logit > τ scaled back; 0 = off
    qk_clip_alpha: float = 0.5  # W_q ← γ^α·W_q, W_k ← γ^(1−α)·W_k, γ = min(1, τ/S_max)


@dataclass
class RollbackSchema:
    """``train.on_divergence=rollback``: what a rollback does (normtrain/training/rollback.py)."""

    skip_batches: int | None = None  # batches skipped after the checkpoint; null: through the diverged step
    max_retries: int = 3  # rollbacks per run; the next divergence stops the run as diverged
    lr_factor: float = 1.0  # lr × lr_factor for lr_steps steps after each rollback (1 = unchanged)
    lr_steps: int = 0


@dataclass
class TrainSchema:
    max_steps: int = 300
    batch_size: int = 16  # sequences per rank and forward pass (the micro-batch)
    global_batch_size: int | None = None  # sequences per optimizer step; null: batch_size × world size
    eval_every: int = 100  # 0 = only at the end
    eval_batches: int = 8
    eval_windows: int = 0  # fixed val windows (0: batch_size × eval_batches); the same set at any batch size
    seed: int = 0
    device: str = "auto"
    autocast: bool = True  # bf16 autocast on CUDA
    ckpt_every: int = 0  # 0 = only at the end
    ckpt_format: str = "auto"  # full (one file, ckpt.pt) | dcp (sharded, ckpt.dcp/) | auto: dcp under torchrun
    async_ckpt: bool = False  # dcp: write in the background while training goes on
    on_divergence: str = "stop"  # stop | rollback (to the last checkpoint, skipping the data that diverged)
    rollback: RollbackSchema = field(default_factory=RollbackSchema)
    resume: str = "auto"  # auto (the run folder's checkpoint, if any) | none | a path
    allow_changes: list[str] = field(default_factory=list)  # experiment keys a resume may change (training/resume.py)
    compile: bool = False  # torch.compile the model (log steps run eagerly for the diagnostics)
    strategy: str = "ddp"  # under torchrun: ddp | fsdp
    progress: bool = True
    progress_every_s: float = 30.0  # not a terminal (batch jobs): a progress line this often, not a bar


@dataclass
class MonitorSchema:
    every: int = 10
    divergence_factor: float = 3.0  # loss > factor × first loss (or non-finite) => diverged
    grad_norms: bool = True  # grad_norm/total, grad_norm/layer_i
    activations: bool = True  # act_mean/, act_std/, resid_norm/layer_i
    residual_stats: bool = True  # act_rms/, act_absmax/layer_i: the residual stream after each block
    block_cos: bool = True  # block_cos/layer_i: cosine of each block's input and output streams
    attn_entropy: bool = True  # attn_entropy/layer_i (one sequence, explicit softmax)
    update_ratio: bool = True  # update/layer_i = ‖Δθ‖/‖θ‖ per block
    output_change: bool = True  # update/output_change on a fixed probe batch
    output_kl: bool = False  # update/output_kl = KL(p_θ0 ‖ p_θt) of the output distributions on the probe batch
    stream_change: bool = False  # update/stream_change, update/logit_change: ‖F_t − F_0‖/‖F_0‖ before the final norm
    probe_batch: int = 4  # sequences in the probe batch
    attn_logit_max: bool = True  # attn_logit_max/layer_i (shares attn_entropy's explicit logits, or QK-Clip's)
    attn_logit_max_heads: bool = True  # and attn_logit_max/layer_i/head_j, each head's own (with attn_logit_max)
    cap_saturation: bool = True  # attn_softcap_saturation/layer_i, output/softcap_saturation (when a cap is on)
    output_log_z: bool = True  # output/log_z: mean log-partition of the output softmax
    output_logit_max: bool = True  # output/logit_max
    spike_score: bool = True  # OLMo-2 spike score of loss and grad norm in summary.json
    spike_window: int = 1000  # rolling window (steps) of the spike score


@dataclass
class LoggerSchema:
    name: str = "wandb"  # the option picked (the last one when several are)
    backends: dict[str, bool] = field(default_factory=dict)  # each picked option adds itself: {wandb: true, ...}
    project: str = "normtrain"
    entity: str | None = None
    group: str | None = None  # default: the multirun's sweep folder name
    run_name: str | None = None  # default: "<placement>-<norm>-L<n_layers>"
    tags: list[str] = field(default_factory=list)
    mode: str = "auto"  # auto = online with an API key, offline without


@dataclass
class DebugSchema:
    """Test-only fault injection (tests/faults): never set these in a real run."""

    inject_nan_at_step: int | None = None  # the loss of the batch step N draws (in a run without rollbacks) is NaN
    nan_rank: int | None = None  # only this rank's loss (null: every rank's)
    kill_at_step: int | None = None  # kill_rank SIGKILLs itself before step N, in a torchrun group's first attempt
    kill_rank: int = 0


@dataclass
class NormtrainConfig:
    model: ModelSchema = field(default_factory=ModelSchema)
    norm: NormSchema = field(default_factory=NormSchema)
    placement: PlacementSchema = field(default_factory=PlacementSchema)
    data: DataSchema = field(default_factory=DataSchema)
    optim: OptimSchema = field(default_factory=OptimSchema)
    train: TrainSchema = field(default_factory=TrainSchema)
    monitor: MonitorSchema = field(default_factory=MonitorSchema)
    logger: LoggerSchema = field(default_factory=LoggerSchema)
    debug: DebugSchema = field(default_factory=DebugSchema)


GROUP_SCHEMAS: dict[str, type] = get_type_hints(NormtrainConfig)  # group name -> its schema
MODEL_GROUPS = ("model", "norm", "placement")  # what ``build_model`` reads


def config_dir() -> str:
    """The shipped configs: inside the package in a wheel, at the repo's top level in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "configs", here.parent / "configs"):
        if (candidate / "config.yaml").is_file():
            return str(candidate)
    raise FileNotFoundError(f"normtrain's configs/ folder was not found next to {here}")


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="normtrain_schema", node=NormtrainConfig)


def compose(overrides: list[str], return_hydra_config: bool = False) -> DictConfig:
    """The config the CLI builds for ``overrides`` (no validation: inspect it freely).

    ``return_hydra_config`` keeps the ``hydra`` node (e.g. an experiment's ``hydra.sweeper.params``).
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides),
                             return_hydra_config=return_hydra_config)


def _scale(value: Any, key: str, problems: list[str]) -> float | None:
    """``auto`` -> None; a positive number -> float; anything else is a problem."""
    if value is None or value == "auto":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not math.isfinite(number) or number <= 0:
        problems.append(f"{key}={value!r}: expected 'auto' or a positive number")
        return None
    return number


def _number(key: str, value: float, ok: bool, rule: str, problems: list[str]) -> None:
    """A float key must be finite and satisfy ``ok``: inf or nan would pass most range checks (or fail none
    of them) and end in a traceback, or in a silently useless run, far from the command line."""
    if not (math.isfinite(value) and ok):
        problems.append(f"{key}={value}: {rule}")


def _at_least(key: str, value: int | None, low: int, problems: list[str], means: str = "") -> None:
    """An integer key must be at least ``low``; null (where the schema allows it) passes. ``means``: what the
    lowest value or null does, said after the rule."""
    if value is not None and value < low:
        problems.append(f"{key}={value}: must be at least {low}{means}")


def _choice(value: Any, key: str, allowed, problems: list[str]) -> None:
    if value not in allowed:
        problems.append(f"{key}={value!r} is not known; allowed: {', '.join(sorted(allowed))}")


def _schema_keys(schema: type) -> list[str]:
    return [f.name for f in fields(schema)]


def _unknown_key_problems(cfg: DictConfig, training: bool) -> list[str]:
    """Keys no schema defines. Struct mode rejects ``model.n_layer=3``, but ``+model.n_layer=3`` (the form
    Hydra itself suggests for a misspelt key) force-adds it, and the run would train the default depth.
    Not ``training``: the model groups only."""
    keys = [str(k) for k in cfg] if training else []
    keys += [f"{g}.{k}" for g in (GROUP_SCHEMAS if training else MODEL_GROUPS) for k in cfg.get(g) or {}]
    return [problem for key in keys if (problem := unknown_key_problem(key))]


def unknown_key_problem(dotted: str) -> str | None:
    """``model.n_layer is not a key of model; did you mean model.n_layers? allowed: ...`` for a key no schema
    defines (a misplaced one, ``model.lr``, is pointed to ``optim.lr``); None for a known key or one outside
    the typed groups (``hydra.*``)."""
    group, _, key = dotted.rpartition(".")
    if group and group not in GROUP_SCHEMAS:
        return None
    allowed = _schema_keys(GROUP_SCHEMAS[group]) if group else list(GROUP_SCHEMAS)
    if key in allowed or dotted == "hydra":
        return None
    prefix = f"{group}." if group else ""
    close = [f"{g}.{key}" for g, schema in GROUP_SCHEMAS.items() if key in _schema_keys(schema)]  # misplaced
    close = close or [f"{prefix}{k}" for k in difflib.get_close_matches(key, allowed, n=1)]  # misspelt
    close = close or [f"{g}.{k}" for g, schema in GROUP_SCHEMAS.items()  # both
                      for k in difflib.get_close_matches(key, _schema_keys(schema), n=1)][:3]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return f"{dotted} is not a key of {group or 'the config'}; {hint}allowed: {', '.join(allowed)}"


def _model_problems(cfg: DictConfig) -> list[str]:
    from normtrain.model import NORMS, PLACEMENTS
    from normtrain.model.mlp import MLPS
    from normtrain.ops.rmsnorm import IMPLS

    p: list[str] = []
    m, n, pl = cfg.model, cfg.norm, cfg.placement
    _at_least("model.n_layers", m.n_layers, 1, p)
    if m.d_model < 1 or m.n_heads < 1:
        p.append(f"model.d_model={m.d_model}, model.n_heads={m.n_heads}: both must be at least 1")
    elif m.d_model % m.n_heads:
        p.append(f"model.n_heads={m.n_heads} does not divide model.d_model={m.d_model}")
    elif m.pos == "rope" and (m.d_model // m.n_heads) % 2:
        p.append(f"model.pos=rope needs an even head size; d_model/n_heads = {m.d_model // m.n_heads}")
    _at_least("model.seq_len", m.seq_len, 1, p)
    _at_least("model.d_ff", m.d_ff, 1, p, " (or null for the default)")
    _at_least("model.vocab_size", m.vocab_size, 1, p, " (or null for the corpus's)")
    _number("model.emb_std", m.emb_std, m.emb_std > 0, "the embedding init std must be a finite number > 0", p)
    _choice(m.mlp, "model.mlp", MLPS, p)
    _choice(m.pos, "model.pos", POSITIONS, p)
    _choice(n.name, "norm.name", NORMS, p)
    _choice(n.impl, "norm.impl", IMPLS, p)
    _number("norm.eps", n.eps, n.eps > 0, "must be a finite number > 0", p)
    _number("norm.p", n.p, 0 < n.p <= 1, "the prmsnorm fraction must lie in (0, 1]", p)
    if n.impl == "triton" and n.name in NORMS and not NORMS[n.name].supports_triton:
        triton_norms = sorted(k for k, c in NORMS.items() if c.supports_triton)
        p.append(f"norm.impl=triton is only available for {', '.join(triton_norms)}, not {n.name}")
    _choice(pl.name, "placement.name", PLACEMENTS, p)
    alpha = _scale(pl.alpha, "placement.alpha", p)
    _scale(pl.beta, "placement.beta", p)
    if pl.name in PLACEMENTS and alpha not in (None, 1.0) and not PLACEMENTS[pl.name].uses_alpha:
        users = sorted(k for k, c in PLACEMENTS.items() if c.uses_alpha)
        p.append(f"placement.alpha={pl.alpha}: α scales the shortcut before the norm, which only "
                 f"{', '.join(users)} have; use 'auto' with placement={pl.name}")
    return p + _catalog_problems(m, n, pl)


def _catalog_problems(m: DictConfig, n: DictConfig, pl: DictConfig) -> list[str]:
    """The keys of the newer norms, placements and stabilizers, alone and against each other."""
    from normtrain.model import PLACEMENTS

    p: list[str] = []
    _number("norm.alpha_init", n.alpha_init, n.alpha_init > 0, "DyT's and Derf's initial α must be a finite number > 0",
            p)
    if pl.post_fraction is not None:
        _number("placement.post_fraction", pl.post_fraction, 0 <= pl.post_fraction <= 1,
                "the share of Post-LN blocks must lie in [0, 1]", p)
    _at_least("placement.streams", pl.streams, 1, p, " (the number n of residual streams mHC carries; the paper's "
              "is 4, and 1 is one stream with gated input and output)")
    from normtrain.model.ngpt_rules import ngpt_model_problems

    m = _implied_model(m, pl)
    p += (_placement_key_problems(m, pl) + _qk_norm_problems(m, n) + _gain_problems(n) + _attention_problems(m, n)
          + ngpt_model_problems(m, n, pl))
    if n.depth_scaled and pl.name in PLACEMENTS and not PLACEMENTS[pl.name].has_norms:
        normed = sorted(k for k, c in PLACEMENTS.items() if c.has_norms)
        p.append(f"norm.depth_scaled=true: placement={pl.name} holds no norm to scale; placements with norms: "
                 f"{', '.join(normed)}")
    return p


# Keys of one placement only, which sets them in its YAML; null elsewhere.
PLACEMENT_KEYS = {"post_fraction": "mix", "first_pre": "hybrid", "head_scale": "normformer",
                  "post_act_norm": "normformer", "resid_scale": "normformer", "streams": "mhc"}


def _implied_model(m: DictConfig, pl: DictConfig) -> DictConfig:
    """``model`` with what the placement implies (HybridNorm's QKV-norm) where the config left the default, so
    that the QK-norm checks judge the model that will be built; a contradicting value is left for
    ``_placement_key_problems`` to report."""
    from normtrain.model.placements.hybrid import IMPLIED

    if pl.name != "hybrid":
        return m
    defaults = ModelSchema()
    implied = {k: v for k, v in IMPLIED.items() if m[k] == getattr(defaults, k)}
    return OmegaConf.merge(m, implied) if implied else m


def _placement_key_problems(m: DictConfig, pl: DictConfig) -> list[str]:
    """The keys of one placement set with another, GPAS where there is no residual add, and a QK-norm form that
    contradicts HybridNorm's."""
    from normtrain.model import PLACEMENTS
    from normtrain.model.config import qk_norm_form

    p = [f"placement.{key}={str(pl[key]).lower()} applies to placement={owner} only, not placement={pl.name}"
         for key, owner in PLACEMENT_KEYS.items() if pl[key] is not None and pl.name != owner]
    if pl.gpas and pl.name in PLACEMENTS and not PLACEMENTS[pl.name].residual_add:
        adds = sorted(k for k, c in PLACEMENTS.items() if c.residual_add)
        p.append(f"placement.gpas=true scales the stream after a residual add, and placement={pl.name} has none; "
                 f"placements with one: {', '.join(adds)}")
    if pl.name == "hybrid" and qk_norm_form(m.qk_norm) != "per_head":  # v_norm's only other value is the default
        p.append(f"placement=hybrid normalizes queries, keys and values per head (it implies model.qk_norm=per_head "
                 f"and model.v_norm=true), which model.qk_norm={qk_norm_form(m.qk_norm)} contradicts: leave "
                 "model.qk_norm unset (or per_head)")
    return p


def _qk_norm_problems(m: DictConfig, n: DictConfig) -> list[str]:
    """A QK-norm form the norm type can serve: QK-norm exists to bound the attention logits, which a norm whose
    statistics mix positions (BatchNorm) or that reads too few features (pRMSNorm) does not do."""
    from normtrain.model import NORMS
    from normtrain.model.config import QK_NORMS, qk_norm_form

    form = qk_norm_form(m.qk_norm)
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


def _gain_problems(n: DictConfig) -> list[str]:
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


def _attention_problems(m: DictConfig, n: DictConfig) -> list[str]:
    """The QK-norm's place and gain, V-norm, the soft-caps and the attention gate, alone and with the rest."""
    from normtrain.model import NORMS
    from normtrain.model.config import ATTN_GATES, QK_NORM_AT, qk_norm_form

    p: list[str] = []
    _choice(m.qk_norm_at, "model.qk_norm_at", QK_NORM_AT, p)
    _choice(m.attn_gate, "model.attn_gate", ATTN_GATES, p)
    qk = qk_norm_form(m.qk_norm) != "none"
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
        _number(f"model.{key}", m[key], m[key] >= 0, "the soft-cap c of c·tanh(z/c) must be a finite number >= 0 "
                "(0 = off)", p)
    return p


def _optim_problems(o: DictConfig) -> list[str]:
    p: list[str] = []
    _choice(o.name, "optim.name", OPTIMIZERS, p)
    _number("optim.lr", o.lr, o.lr > 0, "the learning rate must be a finite number > 0", p)
    if len(o.betas) != 2 or not all(0 <= b < 1 for b in o.betas):
        p.append(f"optim.betas={list(o.betas)}: expected two numbers in [0, 1)")
    _number("optim.eps", o.eps, o.eps > 0, "Adam's epsilon must be a finite number > 0", p)
    _number("optim.weight_decay", o.weight_decay, o.weight_decay >= 0, "must be a finite number >= 0", p)
    _at_least("optim.warmup_steps", o.warmup_steps, 0, p)
    _choice(o.schedule, "optim.schedule", SCHEDULES, p)
    _number("optim.min_lr_ratio", o.min_lr_ratio, 0 <= o.min_lr_ratio <= 1, "must lie in [0, 1]", p)
    _number("optim.grad_clip", o.grad_clip, o.grad_clip >= 0, "must be a finite number >= 0 (0 = off)", p)
    _number("optim.z_loss", o.z_loss, o.z_loss >= 0, "the z-loss coefficient must be a finite number >= 0 (0 = off)",
            p)
    _number("optim.momentum", o.momentum, 0 <= o.momentum < 1, "must lie in [0, 1)", p)
    if o.momentum and math.isfinite(o.momentum) and o.name != "sgd":
        p.append(f"optim.momentum={o.momentum} applies to optim=sgd only, not optim={o.name}")
    if o.independent_wd and o.name == "sgd":
        p.append("optim.independent_wd=true decouples AdamW's decay; optim=sgd has the coupled L2 term only")
    return p + _muon_problems(o)


def _qk_clip_problems(o: DictConfig, m: DictConfig) -> list[str]:
    """QK-Clip's τ and α, and never under QK-norm, which divides out the scale it puts on W_q and W_k."""
    from normtrain.model.config import qk_norm_form

    p: list[str] = []
    _number("optim.qk_clip", o.qk_clip, o.qk_clip >= 0, "QK-Clip's threshold τ must be a finite number >= 0 "
            "(0 = off; Kimi K2 and Megatron-LM use 100)", p)
    _number("optim.qk_clip_alpha", o.qk_clip_alpha, 0 <= o.qk_clip_alpha <= 1, "QK-Clip's α (W_q's share of the "
            "scale) must lie in [0, 1]", p)
    if p:
        return p
    if o.qk_clip_alpha != 0.5 and not o.qk_clip:
        p.append(f"optim.qk_clip_alpha={o.qk_clip_alpha} shapes QK-Clip, which optim.qk_clip=0 leaves off; set "
                 "optim.qk_clip (τ, e.g. 100)")
    if o.qk_clip and qk_norm_form(m.qk_norm) != "none":
        p.append(f"optim.qk_clip={o.qk_clip} rescales W_q and W_k, and model.qk_norm={qk_norm_form(m.qk_norm)} "
                 "normalizes q and k, dividing that scale out again: the clip would change no logit. Use one of "
                 "them (QK-norm already bounds the logits): optim.qk_clip=0 or model.qk_norm=none")
    return p


def _muon_problems(o: DictConfig) -> list[str]:
    """Muon's keys: valid values, and set only with optim=muon (elsewhere they would be silently ignored)."""
    from normtrain.util.optimizers import ADJUST_LR_FNS, MuonSettings

    p: list[str] = []
    _number("optim.muon_lr", o.muon_lr, o.muon_lr > 0, "Muon's learning rate must be a finite number > 0", p)
    _number("optim.muon_momentum", o.muon_momentum, 0 <= o.muon_momentum < 1, "must lie in [0, 1)", p)
    _number("optim.muon_weight_decay", o.muon_weight_decay, o.muon_weight_decay >= 0, "must be a finite number >= 0",
            p)
    if not 1 <= o.muon_ns_steps < 100:
        p.append(f"optim.muon_ns_steps={o.muon_ns_steps}: Newton–Schulz iterations must lie in [1, 99]")
    _choice(o.adjust_lr_fn, "optim.adjust_lr_fn", ADJUST_LR_FNS, p)
    if o.name != "muon" and not p:
        keys = {"muon_lr": "lr", "muon_momentum": "momentum", "muon_nesterov": "nesterov",
                "muon_ns_steps": "ns_steps", "muon_weight_decay": "weight_decay", "adjust_lr_fn": "adjust_lr_fn"}
        changed = [f"optim.{k}={o[k]}" for k, field_ in keys.items() if o[k] != getattr(MuonSettings(), field_)]
        if changed:
            p.append(f"{', '.join(changed)} set{'s' * (len(changed) == 1)} Muon, which optim={o.name} does not "
                     "use; pick optim=muon")
    return p


def _run_problems(t: DictConfig, mon: DictConfig) -> list[str]:
    from normtrain.util.ranks import STRATEGIES

    p: list[str] = []
    for key in ("max_steps", "batch_size", "eval_batches"):
        _at_least(f"train.{key}", t[key], 1, p)
    for key in ("eval_every", "ckpt_every", "eval_windows"):
        _at_least(f"train.{key}", t[key], 0, p, f" (0 = {ZERO_MEANS[key]})")
    if not 0 <= t.seed <= MAX_SEED:
        p.append(f"train.seed={t.seed}: must lie in [0, 2**32 - 1]")
    _choice(t.device, "train.device", DEVICES, p)
    _choice(t.strategy, "train.strategy", STRATEGIES, p)
    if t.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            p.append("train.device=cuda but no CUDA device is available; use train.device=auto or cpu")
    _at_least("monitor.every", mon.every, 1, p)
    _at_least("monitor.probe_batch", mon.probe_batch, 1, p)
    _at_least("monitor.spike_window", mon.spike_window, 2, p, " (a standard deviation needs two points)")
    _number("monitor.divergence_factor", mon.divergence_factor, mon.divergence_factor > 1,
            "must be a finite number > 1", p)
    _number("train.progress_every_s", t.progress_every_s, t.progress_every_s >= 0, "must be a finite number >= 0", p)
    return p


def global_batch(train: Any, world_size: int) -> int:
    """Sequences per optimizer step: ``train.global_batch_size``, or (null) ``train.batch_size`` × world size."""
    return train.get("global_batch_size") or train["batch_size"] * world_size


def checkpoint_format(train: Any, world_size: int) -> str:
    """``train.ckpt_format`` resolved: ``auto`` is ``dcp`` under torchrun (world size > 1), ``full`` on one process."""
    fmt = train.get("ckpt_format") or "auto"
    return ("dcp" if world_size > 1 else "full") if fmt == "auto" else fmt


def _batch_problems(t: DictConfig, world_size: int) -> list[str]:
    """The global batch must split evenly into micro-batches of train.batch_size on every rank."""
    g = t.global_batch_size
    if g is None or t.batch_size < 1:
        return []
    if g < 1:
        return [f"train.global_batch_size={g}: must be at least 1 (or null: train.batch_size × world size)"]
    per_step = t.batch_size * world_size
    if g >= per_step and g % per_step == 0:
        return []
    ranks = f"{world_size} processes" if world_size > 1 else "1 process"
    sizes = [b for b in range(1, g // world_size + 1) if g % (b * world_size) == 0] if g % world_size == 0 else []
    fit = (f", or a train.batch_size that divides it on {ranks}: {', '.join(map(str, sizes))}" if sizes else
           f"; no train.batch_size fits {g} on {ranks}")
    return [f"train.global_batch_size={g} is not a multiple of train.batch_size × world size = "
            f"{t.batch_size} × {world_size} = {per_step} (gradient accumulation makes up whole micro-batches); "
            f"allowed: {per_step}, {2 * per_step}, {3 * per_step}, ...{fit}"]


def _checkpoint_problems(t: DictConfig, world_size: int) -> list[str]:
    p: list[str] = []
    _choice(t.ckpt_format, "train.ckpt_format", CKPT_FORMATS, p)
    if t.async_ckpt and t.ckpt_format in CKPT_FORMATS and checkpoint_format(t, world_size) != "dcp":
        p.append(f"train.async_ckpt=true needs sharded checkpoints (train.ckpt_format=dcp); this run writes "
                 f"train.ckpt_format={checkpoint_format(t, world_size)}")
    _choice(t.on_divergence, "train.on_divergence", ON_DIVERGENCE, p)
    r = t.rollback
    _at_least("train.rollback.skip_batches", r.skip_batches, 0, p, " (or null: through the diverged step)")
    _at_least("train.rollback.max_retries", r.max_retries, 1, p, " (train.on_divergence=stop never rolls back)")
    _number("train.rollback.lr_factor", r.lr_factor, 0 < r.lr_factor <= 1, "must lie in (0, 1] (1 = unchanged)", p)
    _at_least("train.rollback.lr_steps", r.lr_steps, 0, p)
    if t.on_divergence == "rollback" and t.ckpt_every < 1:
        p.append("train.on_divergence=rollback needs train.ckpt_every > 0: a rollback returns to the last "
                 "checkpoint, and with checkpoints only at the end there is none but the start to return to")
    return p


def _debug_problems(dbg: DictConfig, world_size: int) -> list[str]:
    p: list[str] = []
    for key in ("inject_nan_at_step", "kill_at_step"):
        _at_least(f"debug.{key}", dbg[key], 0, p, " (or null: off)")
    for key in ("nan_rank", "kill_rank"):
        if dbg[key] is not None and not 0 <= dbg[key] < world_size:
            p.append(f"debug.{key}={dbg[key]}: this run has ranks 0 to {world_size - 1}")
    return p


def _data_problems(d: DictConfig, lg: DictConfig) -> list[str]:
    p: list[str] = []
    _choice(lg.name, "logger.name", LOGGERS, p)
    for backend in lg.backends:
        _choice(backend, "logger.backends", BACKENDS, p)
    _choice(lg.mode, "logger.mode", WANDB_MODES, p)
    from normtrain.data.corpus import CORPORA  # numpy and the data modules: on validation, not on import

    _choice(d.name, "data.name", CORPORA, p)
    _number("data.val_fraction", d.val_fraction, 0 < d.val_fraction < 1, "must lie in (0, 1)", p)
    if d.name == "local_text":
        if not d.path:
            p.append("data=local_text needs data.path: a file, a folder or a glob (e.g. 'texts/**/*.txt')")
        elif not os.path.exists(os.path.expanduser(d.path)) and not glob.glob(os.path.expanduser(d.path),
                                                                                 recursive=True):
            p.append(f"data.path={d.path!r} does not exist and matches no file as a glob")
    if d.name == "tokens":
        p += _shard_problems(d)
    return p


def _shard_problems(d: DictConfig) -> list[str]:
    """data=tokens: a folder with meta.json; if it has none, the command that writes it (a preset knows it)."""
    from normtrain.data.shards import META, prepare_command

    if not d.path:
        return ["data=tokens needs data.path: a folder written by normtrain-prepare SOURCE OUT_DIR"]
    if (Path(d.path).expanduser() / META).is_file():
        return []
    if d.get("prepare") is None:
        return [f"data.path={d.path!r} holds no prepared token shards (no {META}); write them with: "
                f"normtrain-prepare SOURCE {d.path}"]
    before = f"{d.prepare.note}; then " if d.prepare.note else ""
    where = " on a machine with network" if "/" in d.prepare.source else ""  # an owner/name hub id
    return [f"data.path={d.path!r} holds no prepared token shards (no {META}); {before}prepare them{where} with: "
            f"{prepare_command(d.prepare, d.path, d.val_fraction)}"]


def validate(cfg: DictConfig, training: bool = True) -> None:
    """Raise one ConfigError listing every problem (model keys only when ``training`` is False)."""
    problems = _unknown_key_problems(cfg, training) + _model_problems(cfg)
    if training:
        from normtrain.model.ngpt_rules import ngpt_training_problems
        from normtrain.util.ranks import env_world_size

        world_size = env_world_size()
        problems += (_optim_problems(cfg.optim) + _qk_clip_problems(cfg.optim, cfg.model)
                     + _run_problems(cfg.train, cfg.monitor)
                     + _batch_problems(cfg.train, world_size) + _checkpoint_problems(cfg.train, world_size)
                     + _debug_problems(cfg.debug, world_size) + _data_problems(cfg.data, cfg.logger)
                     + ngpt_training_problems(cfg))
    if problems:
        raise ConfigError(problems)


def vocab_size(cfg: DictConfig, corpus_vocab: int) -> int:
    """``model.vocab_size`` if set (it may pad the corpus's vocabulary, never cut it), else the corpus's."""
    asked = cfg.model.get("vocab_size")
    if asked is None:
        return corpus_vocab
    if asked < corpus_vocab:
        raise ConfigError(f"model.vocab_size={asked} is smaller than the corpus's vocabulary ({corpus_vocab} tokens): "
                          "use null (the corpus's) or a larger number")
    return asked


def model_config(cfg: DictConfig, vocab: int | None = None) -> GPTConfig:
    """Translate the composed config into the model's own plain config: the keys of ``model`` and ``placement``
    are GPTConfig's, those of ``norm`` NormSpec's, by name (a placement key left null, one that another
    placement's YAML sets, keeps the model's default). The vocabulary: ``vocab``, else ``model.vocab_size``,
    else the corpus's (for token shards, read from their meta.json)."""
    from normtrain.data.shards import vocab_size_of
    from normtrain.model import GPTConfig, NormSpec

    m, n, pl = (OmegaConf.to_container(cfg[group], resolve=True) for group in MODEL_GROUPS)
    name, alpha, beta = pl.pop("name"), pl.pop("alpha"), pl.pop("beta")
    scale = lambda v: None if v in (None, "auto") else float(v)  # noqa: E731
    m["vocab_size"] = vocab or m.get("vocab_size") or vocab_size_of(cfg.data.name, cfg.data.path)
    placed = {key: value for key, value in pl.items() if value is not None}
    return GPTConfig(**m, **placed, norm=NormSpec(**n), placement=name, alpha=scale(alpha), beta=scale(beta))


def build_model(cfg: DictConfig) -> GPT:
    from normtrain.model import GPT

    validate(cfg, training=False)
    return GPT(model_config(cfg))


def with_defaults(config: dict) -> dict:
    """A resolved config recorded by an earlier normtrain, with the keys the schema has gained since at their
    defaults and renamed values in today's spelling (``_canonical``): a key that did not exist then, or a value
    spelt differently, is not a change of the experiment (``normtrain.training.resume``)."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(NormtrainConfig), config)
    except Exception:  # a key since removed or retyped: compared as it is (and reported as a change)
        return _canonical(config)
    return _canonical(OmegaConf.to_container(merged, resolve=True))  # type: ignore[arg-type]


def _canonical(config: dict) -> dict:
    """Values an earlier normtrain spelt another way, in today's spelling: ``model.qk_norm`` was a boolean
    (true = per_head, false = none), so a run recorded with ``qk_norm: true`` is the same experiment as one
    with ``per_head``."""
    from normtrain.model.config import qk_norm_form

    model = config.get("model")
    if isinstance(model, dict) and "qk_norm" in model:
        config = {**config, "model": {**model, "qk_norm": qk_norm_form(model["qk_norm"])}}
    return config


def to_container(cfg: DictConfig) -> dict:
    """The resolved config as plain values, in today's spelling (``model.qk_norm=true`` is recorded as
    ``per_head``), so that a summary, a checkpoint and ``with_defaults`` of an older record compare alike."""
    return _canonical(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
