"""The typed config schemas, one dataclass per group, registered with Hydra's ConfigStore (``compose``).

Struct mode makes a key that no schema names, or a value of the wrong type, fail while Hydra composes; the values
themselves are checked in ``validation`` (every problem at once). The tuples below are the allowed values of the
keys whose options are fixed here; those of norms, placements and MLPs live with their registries in the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, get_type_hints

from omegaconf import MISSING

from normtrain.loggers import BACKENDS

SCHEDULES = ("cosine", "constant", "inverse_sqrt", "wsd")
DEVICES = ("auto", "cpu", "cuda")
POSITIONS = ("rope", "learned")
LOGGERS = (*BACKENDS, "none")  # logger=NAME, or several: logger=[wandb,tensorboard]
WANDB_MODES = ("auto", "online", "offline", "disabled")
OPTIMIZERS = ("adamw", "sgd", "muon")
ON_DIVERGENCE = ("stop", "rollback")
CKPT_FORMATS = ("auto", "full", "dcp")  # auto: dcp under torchrun (world size > 1), full on one process
PARAM_DTYPES = ("float32", "bfloat16")  # train.param_dtype: the parameters' and optimizer states' storage
PARAM_ROUNDINGS = (None, "bfloat16")  # train.param_rounding: fp32 tensors rounded to this precision after each step
MAX_SEED = 2**32 - 1  # numpy's seed range
ZERO_MEANS = {"eval_every": "only at the end", "ckpt_every": "only at the end",
              "eval_windows": "train.batch_size × train.eval_batches", "select_windows": "no selection windows"}


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
    tie_embeddings: bool = False  # one matrix for the token embedding and the LM head (GPT-2, nanoGPT, Gemma, OLMo 1B)
    init: str = "xavier"  # xavier | gpt2 | olmo2 | mitchell | small: the init scheme (normtrain/model/init.py)
    init_std: float | None = None  # σ of gpt2 and olmo2 (null: theirs, 0.02)
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
    bias: bool | None = None  # β of layernorm, dyt, derf: null = the norm's convention (β), false = γ without β


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
    min_lr_ratio: float = 0.1  # cosine and wsd decay to lr * min_lr_ratio
    decay_fraction: float = 0.2  # wsd: the last fraction of the run that decays (training/optim.py)
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
    select_windows: int = 0  # held-out val windows between the judged ones, scored at the end (select/loss); 0 = off
    seed: int = 0
    device: str = "auto"
    autocast: bool = True  # bf16 autocast on CUDA
    param_dtype: str = "float32"  # float32 | bfloat16: the stored parameters and optimizer states (not autocast)
    param_rounding: str | None = None  # bfloat16: bf16 storage with fp32 compute (normtrain/training/rounding.py)
    ckpt_every: int = 0  # 0 = only at the end
    keep_ckpt_at: list[int] = field(default_factory=list)  # steps whose checkpoint stays as ckpt_step{k}.pt (branches)
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


def schema_keys(schema: type) -> list[str]:
    """The keys of a group's schema, in the order the dataclass declares them."""
    return [f.name for f in fields(schema)]


def global_batch(train: Any, world_size: int) -> int:
    """Sequences per optimizer step: ``train.global_batch_size``, or (null) ``train.batch_size`` × world size."""
    return train.get("global_batch_size") or train["batch_size"] * world_size


def checkpoint_format(train: Any, world_size: int) -> str:
    """``train.ckpt_format`` resolved: ``auto`` is ``dcp`` under torchrun (world size > 1), ``full`` on one process."""
    fmt = train.get("ckpt_format") or "auto"
    return ("dcp" if world_size > 1 else "full") if fmt == "auto" else fmt
