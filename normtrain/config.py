"""Typed config schemas (registered with Hydra's ConfigStore), composition and validation.

The schemas make a typo in a key or a wrong type fail at start-up; ``validate`` then checks the
values against each other and reports every problem at once (litgpt's ``validate_args`` habit).
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from normtrain.distributed import STRATEGIES
from normtrain.errors import ConfigError
from normtrain.model import GPT, NORMS, PLACEMENTS, GPTConfig, NormSpec
from normtrain.model.mlp import MLPS
from normtrain.ops.rmsnorm import IMPLS

SCHEDULES = ("cosine", "constant", "inverse_sqrt")
DEVICES = ("auto", "cpu", "cuda")
POSITIONS = ("rope", "learned")
CORPORA = ("python_stdlib", "local_text")
LOGGERS = ("wandb", "none")
WANDB_MODES = ("auto", "online", "offline", "disabled")


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


@dataclass
class NormSchema:
    name: str = MISSING
    eps: float = 1e-6
    affine: bool = True
    impl: str = "auto"
    p: float = 0.0625


@dataclass
class PlacementSchema:
    name: str = MISSING
    alpha: Any = "auto"  # "auto" or a number
    beta: Any = "auto"


@dataclass
class DataSchema:
    name: str = MISSING
    path: str | None = None
    val_fraction: float = 0.05
    cache_dir: str | None = None  # default: $NORMTRAIN_CACHE or ~/.cache/normtrain


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
    grad_clip: float = 1.0  # 0 = off


@dataclass
class TrainSchema:
    max_steps: int = 300
    batch_size: int = 16
    eval_every: int = 100  # 0 = only at the end
    eval_batches: int = 8
    seed: int = 0
    device: str = "auto"
    autocast: bool = True  # bf16 autocast on CUDA
    ckpt_every: int = 0  # 0 = only at the end
    resume: str = "auto"  # auto (the run folder's checkpoint, if any) | none | a path
    compile: bool = False  # torch.compile the model (log steps run eagerly for the diagnostics)
    strategy: str = "ddp"  # under torchrun: ddp | fsdp
    progress: bool = True


@dataclass
class MonitorSchema:
    every: int = 10
    divergence_factor: float = 3.0  # loss > factor × first loss (or non-finite) => diverged
    grad_norms: bool = True  # grad_norm/total, grad_norm/layer_i
    activations: bool = True  # act_mean/, act_std/, resid_norm/layer_i
    attn_entropy: bool = True  # attn_entropy/layer_i (one sequence, explicit softmax)
    update_ratio: bool = True  # update/layer_i = ‖Δθ‖/‖θ‖ per block
    output_change: bool = True  # update/output_change on a fixed probe batch
    probe_batch: int = 4  # sequences in the probe batch


@dataclass
class LoggerSchema:
    name: str = "wandb"
    project: str = "normtrain"
    entity: str | None = None
    group: str | None = None  # default: the multirun's sweep folder name
    run_name: str | None = None  # default: "<placement>-<norm>-L<n_layers>"
    tags: list[str] = field(default_factory=list)
    mode: str = "auto"  # auto = online with an API key, offline without


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


def _choice(value: Any, key: str, allowed, problems: list[str]) -> None:
    if value not in allowed:
        problems.append(f"{key}={value!r} is not known; allowed: {', '.join(sorted(allowed))}")


def _model_problems(cfg: DictConfig) -> list[str]:
    p: list[str] = []
    m, n, pl = cfg.model, cfg.norm, cfg.placement
    if m.n_layers < 1:
        p.append(f"model.n_layers={m.n_layers}: a model needs at least 1 layer")
    if m.d_model < 1 or m.n_heads < 1:
        p.append(f"model.d_model={m.d_model}, model.n_heads={m.n_heads}: both must be at least 1")
    elif m.d_model % m.n_heads:
        p.append(f"model.n_heads={m.n_heads} does not divide model.d_model={m.d_model}")
    elif m.pos == "rope" and (m.d_model // m.n_heads) % 2:
        p.append(f"model.pos=rope needs an even head size; d_model/n_heads = {m.d_model // m.n_heads}")
    if m.seq_len < 1:
        p.append(f"model.seq_len={m.seq_len}: must be at least 1")
    if m.d_ff is not None and m.d_ff < 1:
        p.append(f"model.d_ff={m.d_ff}: must be at least 1 (or null for the default)")
    _choice(m.mlp, "model.mlp", MLPS, p)
    _choice(m.pos, "model.pos", POSITIONS, p)
    _choice(n.name, "norm.name", NORMS, p)
    _choice(n.impl, "norm.impl", IMPLS, p)
    if not n.eps > 0:
        p.append(f"norm.eps={n.eps}: must be > 0")
    if not 0 < n.p <= 1:
        p.append(f"norm.p={n.p}: the prmsnorm fraction must lie in (0, 1]")
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
    return p


def _training_problems(cfg: DictConfig) -> list[str]:
    p: list[str] = []
    o, t, mon, lg, d = cfg.optim, cfg.train, cfg.monitor, cfg.logger, cfg.data
    if not o.lr > 0:
        p.append(f"optim.lr={o.lr}: the learning rate must be > 0")
    if o.warmup_steps < 0:
        p.append(f"optim.warmup_steps={o.warmup_steps}: must be >= 0")
    _choice(o.schedule, "optim.schedule", SCHEDULES, p)
    if o.grad_clip < 0:
        p.append(f"optim.grad_clip={o.grad_clip}: must be >= 0 (0 = off)")
    if o.weight_decay < 0:
        p.append(f"optim.weight_decay={o.weight_decay}: must be >= 0")
    if len(o.betas) != 2 or not all(0 <= b < 1 for b in o.betas):
        p.append(f"optim.betas={list(o.betas)}: expected two numbers in [0, 1)")
    if not 0 <= o.min_lr_ratio <= 1:
        p.append(f"optim.min_lr_ratio={o.min_lr_ratio}: must lie in [0, 1]")
    for key in ("max_steps", "batch_size", "eval_batches"):
        if t[key] < 1:
            p.append(f"train.{key}={t[key]}: must be at least 1")
    for key in ("eval_every", "ckpt_every"):
        if t[key] < 0:
            p.append(f"train.{key}={t[key]}: must be >= 0 (0 = only at the end)")
    _choice(t.device, "train.device", DEVICES, p)
    _choice(t.strategy, "train.strategy", STRATEGIES, p)
    if t.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            p.append("train.device=cuda but no CUDA device is available; use train.device=auto or cpu")
    if mon.every < 1:
        p.append(f"monitor.every={mon.every}: must be at least 1")
    if mon.probe_batch < 1:
        p.append(f"monitor.probe_batch={mon.probe_batch}: must be at least 1")
    if not mon.divergence_factor > 1:
        p.append(f"monitor.divergence_factor={mon.divergence_factor}: must be > 1")
    _choice(lg.name, "logger.name", LOGGERS, p)
    _choice(lg.mode, "logger.mode", WANDB_MODES, p)
    _choice(d.name, "data.name", CORPORA, p)
    if not 0 < d.val_fraction < 1:
        p.append(f"data.val_fraction={d.val_fraction}: must lie in (0, 1)")
    if d.name == "local_text":
        if not d.path:
            p.append("data=local_text needs data.path: a file, a folder or a glob (e.g. 'texts/**/*.txt')")
        elif not os.path.exists(os.path.expanduser(d.path)) and not glob.glob(os.path.expanduser(d.path),
                                                                                 recursive=True):
            p.append(f"data.path={d.path!r} does not exist and matches no file as a glob")
    return p


def validate(cfg: DictConfig, training: bool = True) -> None:
    """Raise one ConfigError listing every problem (model keys only when ``training`` is False)."""
    problems = _model_problems(cfg) + (_training_problems(cfg) if training else [])
    if problems:
        raise ConfigError(problems)


def model_config(cfg: DictConfig) -> GPTConfig:
    """Translate the composed config into the model's own plain config."""
    m, n, pl = cfg.model, cfg.norm, cfg.placement
    scale = lambda v: None if v in (None, "auto") else float(v)  # noqa: E731
    return GPTConfig(
        n_layers=m.n_layers, d_model=m.d_model, n_heads=m.n_heads, seq_len=m.seq_len, mlp=m.mlp,
        d_ff=m.d_ff, pos=m.pos, bias=m.bias, emb_std=m.emb_std,
        norm=NormSpec(name=n.name, eps=n.eps, affine=n.affine, impl=n.impl, p=n.p),
        placement=pl.name, alpha=scale(pl.alpha), beta=scale(pl.beta),
    )


def build_model(cfg: DictConfig) -> GPT:
    validate(cfg, training=False)
    return GPT(model_config(cfg))


def to_container(cfg: DictConfig) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
