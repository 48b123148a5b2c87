"""``validate``: every problem of a composed config at once, each naming the key, its value and what is allowed
(litgpt's ``validate_args`` habit), raised as one ConfigError (exit 2).

The checks: keys that Hydra's ``+key=value`` forced in past the schema (``unknown_key_problems``), the model groups
(``model_checks``), then what only training reads: the optimizer, the run's lengths and intervals, the global batch
against the world size, checkpoints and rollback, the data and the loggers. A sweep checks each of its jobs with
``problems`` before the first starts (``sweep``), with the world size its launcher will give the job.
"""

from __future__ import annotations

import glob
import math
import os
from pathlib import Path

from omegaconf import DictConfig

from normtrain.config.model_checks import model_as_built, model_problems
from normtrain.config.names import unknown_key_problem
from normtrain.config.rules import at_least, finite, one_of
from normtrain.config.schema import (
    BACKENDS,
    CKPT_FORMATS,
    DEVICES,
    GROUP_SCHEMAS,
    LOGGERS,
    MAX_SEED,
    MODEL_GROUPS,
    ON_DIVERGENCE,
    OPTIMIZERS,
    PARAM_DTYPES,
    PARAM_ROUNDINGS,
    SCHEDULES,
    WANDB_MODES,
    ZERO_MEANS,
    checkpoint_format,
)
from normtrain.util.errors import ConfigError


def validate(cfg: DictConfig, training: bool = True) -> None:
    """Raise one ConfigError listing every problem (model keys only when ``training`` is False)."""
    found = problems(cfg, training)
    if found:
        raise ConfigError(found)


def problems(cfg: DictConfig, training: bool = True, world_size: int | None = None,
             on_this_machine: bool = True) -> list[str]:
    """Every problem of ``cfg``. ``world_size``: the processes that will train it (default: this one's, as
    torchrun set it); ``on_this_machine`` False (a job a launcher runs elsewhere) leaves out what only the
    machine that trains can tell (is there a CUDA device?)."""
    m = model_as_built(cfg.model, cfg.placement)
    found = unknown_key_problems(cfg, training) + model_problems(m, cfg.norm, cfg.placement)
    if not training:
        return found
    from normtrain.model.ngpt_rules import ngpt_training_problems
    from normtrain.util.ranks import env_world_size

    world_size = env_world_size() if world_size is None else world_size
    return (found + optim_problems(cfg.optim) + qk_clip_problems(cfg.optim, m)
            + run_problems(cfg.train, cfg.monitor, on_this_machine)
            + batch_problems(cfg.train, world_size) + checkpoint_problems(cfg.train, world_size)
            + debug_problems(cfg.debug, world_size) + data_problems(cfg.data, cfg.logger)
            + ngpt_training_problems(cfg))


def unknown_key_problems(cfg: DictConfig, training: bool) -> list[str]:
    """Keys no schema defines. Struct mode rejects ``model.n_layer=3``, but ``+model.n_layer=3`` (the form
    Hydra itself suggests for a misspelt key) force-adds it, and the run would train the default depth.
    Not ``training``: the model groups only."""
    keys = [str(k) for k in cfg] if training else []
    keys += [f"{g}.{k}" for g in (GROUP_SCHEMAS if training else MODEL_GROUPS) for k in cfg.get(g) or {}]
    return [problem for key in keys if (problem := unknown_key_problem(key))]


def optim_problems(o: DictConfig) -> list[str]:
    p: list[str] = []
    one_of(o.name, "optim.name", OPTIMIZERS, p)
    finite("optim.lr", o.lr, o.lr > 0, "the learning rate must be a finite number > 0", p)
    if len(o.betas) != 2 or not all(0 <= b < 1 for b in o.betas):
        p.append(f"optim.betas={list(o.betas)}: expected two numbers in [0, 1)")
    finite("optim.eps", o.eps, o.eps > 0, "Adam's epsilon must be a finite number > 0", p)
    finite("optim.weight_decay", o.weight_decay, o.weight_decay >= 0, "must be a finite number >= 0", p)
    at_least("optim.warmup_steps", o.warmup_steps, 0, p)
    one_of(o.schedule, "optim.schedule", SCHEDULES, p)
    finite("optim.min_lr_ratio", o.min_lr_ratio, 0 <= o.min_lr_ratio <= 1, "must lie in [0, 1]", p)
    finite("optim.decay_fraction", o.decay_fraction, 0 < o.decay_fraction <= 1, "must lie in (0, 1]", p)
    finite("optim.grad_clip", o.grad_clip, o.grad_clip >= 0, "must be a finite number >= 0 (0 = off)", p)
    finite("optim.z_loss", o.z_loss, o.z_loss >= 0, "the z-loss coefficient must be a finite number >= 0 (0 = off)",
            p)
    finite("optim.momentum", o.momentum, 0 <= o.momentum < 1, "must lie in [0, 1)", p)
    if o.momentum and math.isfinite(o.momentum) and o.name != "sgd":
        p.append(f"optim.momentum={o.momentum} applies to optim=sgd only, not optim={o.name}")
    if o.independent_wd and o.name == "sgd":
        p.append("optim.independent_wd=true decouples AdamW's decay; optim=sgd has the coupled L2 term only")
    return p + muon_problems(o)


def qk_clip_problems(o: DictConfig, m: DictConfig) -> list[str]:
    """QK-Clip's τ and α, and never under QK-norm, which divides out the scale it puts on W_q and W_k (``m`` as
    ``model_as_built`` gives it)."""
    p: list[str] = []
    finite("optim.qk_clip", o.qk_clip, o.qk_clip >= 0, "QK-Clip's threshold τ must be a finite number >= 0 "
            "(0 = off; Kimi K2 and Megatron-LM use 100)", p)
    finite("optim.qk_clip_alpha", o.qk_clip_alpha, 0 <= o.qk_clip_alpha <= 1, "QK-Clip's α (W_q's share of the "
            "scale) must lie in [0, 1]", p)
    if p:
        return p
    if o.qk_clip_alpha != 0.5 and not o.qk_clip:
        p.append(f"optim.qk_clip_alpha={o.qk_clip_alpha} shapes QK-Clip, which optim.qk_clip=0 leaves off; set "
                 "optim.qk_clip (τ, e.g. 100)")
    if o.qk_clip and m.qk_norm != "none":
        p.append(f"optim.qk_clip={o.qk_clip} rescales W_q and W_k, and model.qk_norm={m.qk_norm} "
                 "normalizes q and k, dividing that scale out again: the clip would change no logit. Use one of "
                 "them (QK-norm already bounds the logits): optim.qk_clip=0 or model.qk_norm=none")
    return p


def muon_problems(o: DictConfig) -> list[str]:
    """Muon's keys: valid values, and set only with optim=muon (elsewhere they would be silently ignored)."""
    from normtrain.util.optimizers import ADJUST_LR_FNS, MuonSettings

    p: list[str] = []
    finite("optim.muon_lr", o.muon_lr, o.muon_lr > 0, "Muon's learning rate must be a finite number > 0", p)
    finite("optim.muon_momentum", o.muon_momentum, 0 <= o.muon_momentum < 1, "must lie in [0, 1)", p)
    finite("optim.muon_weight_decay", o.muon_weight_decay, o.muon_weight_decay >= 0, "must be a finite number >= 0",
            p)
    if not 1 <= o.muon_ns_steps < 100:
        p.append(f"optim.muon_ns_steps={o.muon_ns_steps}: Newton–Schulz iterations must lie in [1, 99]")
    one_of(o.adjust_lr_fn, "optim.adjust_lr_fn", ADJUST_LR_FNS, p)
    if o.name != "muon" and not p:
        keys = {"muon_lr": "lr", "muon_momentum": "momentum", "muon_nesterov": "nesterov",
                "muon_ns_steps": "ns_steps", "muon_weight_decay": "weight_decay", "adjust_lr_fn": "adjust_lr_fn"}
        changed = [f"optim.{k}={o[k]}" for k, field_ in keys.items() if o[k] != getattr(MuonSettings(), field_)]
        if changed:
            p.append(f"{', '.join(changed)} set{'s' * (len(changed) == 1)} Muon, which optim={o.name} does not "
                     "use; pick optim=muon")
    return p


def run_problems(t: DictConfig, mon: DictConfig, on_this_machine: bool = True) -> list[str]:
    from normtrain.util.ranks import STRATEGIES

    p: list[str] = []
    for key in ("max_steps", "batch_size", "eval_batches"):
        at_least(f"train.{key}", t[key], 1, p)
    for key in ("eval_every", "ckpt_every", "eval_windows", "select_windows"):
        at_least(f"train.{key}", t[key], 0, p, f" (0 = {ZERO_MEANS[key]})")
    if not 0 <= t.seed <= MAX_SEED:
        p.append(f"train.seed={t.seed}: must lie in [0, 2**32 - 1]")
    one_of(t.device, "train.device", DEVICES, p)
    one_of(t.param_dtype, "train.param_dtype", PARAM_DTYPES, p)
    one_of(t.param_rounding, "train.param_rounding", PARAM_ROUNDINGS, p)
    if t.param_rounding is not None and t.param_dtype != "float32":
        p.append(f"train.param_rounding={t.param_rounding} rounds fp32 parameters; with train.param_dtype="
                 f"{t.param_dtype} they are stored that way already: set one of the two")
    one_of(t.strategy, "train.strategy", STRATEGIES, p)
    if t.device == "cuda" and on_this_machine:
        import torch

        if not torch.cuda.is_available():
            p.append("train.device=cuda but no CUDA device is available; use train.device=auto or cpu")
    at_least("monitor.every", mon.every, 1, p)
    at_least("monitor.probe_batch", mon.probe_batch, 1, p)
    at_least("monitor.spike_window", mon.spike_window, 2, p, " (a standard deviation needs two points)")
    finite("monitor.divergence_factor", mon.divergence_factor, mon.divergence_factor > 1,
            "must be a finite number > 1", p)
    finite("train.progress_every_s", t.progress_every_s, t.progress_every_s >= 0, "must be a finite number >= 0", p)
    return p

def batch_problems(t: DictConfig, world_size: int) -> list[str]:
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


def checkpoint_problems(t: DictConfig, world_size: int) -> list[str]:
    p: list[str] = []
    one_of(t.ckpt_format, "train.ckpt_format", CKPT_FORMATS, p)
    if t.async_ckpt and t.ckpt_format in CKPT_FORMATS and checkpoint_format(t, world_size) != "dcp":
        p.append(f"train.async_ckpt=true needs sharded checkpoints (train.ckpt_format=dcp); this run writes "
                 f"train.ckpt_format={checkpoint_format(t, world_size)}")
    one_of(t.on_divergence, "train.on_divergence", ON_DIVERGENCE, p)
    r = t.rollback
    at_least("train.rollback.skip_batches", r.skip_batches, 0, p, " (or null: through the diverged step)")
    at_least("train.rollback.max_retries", r.max_retries, 1, p, " (train.on_divergence=stop never rolls back)")
    finite("train.rollback.lr_factor", r.lr_factor, 0 < r.lr_factor <= 1, "must lie in (0, 1] (1 = unchanged)", p)
    at_least("train.rollback.lr_steps", r.lr_steps, 0, p)
    keep = list(t.keep_ckpt_at or [])
    if any(not isinstance(k, int) or isinstance(k, bool) or not 0 < k < t.max_steps for k in keep):
        p.append(f"train.keep_ckpt_at={keep}: steps inside the run, 0 < k < train.max_steps={t.max_steps}")
    if keep and checkpoint_format(t, world_size) != "full" and t.ckpt_format in CKPT_FORMATS:
        p.append("train.keep_ckpt_at keeps copies of ckpt.pt: it needs train.ckpt_format=full (one process)")
    if t.on_divergence == "rollback" and t.ckpt_every < 1:
        p.append("train.on_divergence=rollback needs train.ckpt_every > 0: a rollback returns to the last "
                 "checkpoint, and with checkpoints only at the end there is none but the start to return to")
    return p


def debug_problems(dbg: DictConfig, world_size: int) -> list[str]:
    p: list[str] = []
    for key in ("inject_nan_at_step", "kill_at_step"):
        at_least(f"debug.{key}", dbg[key], 0, p, " (or null: off)")
    for key in ("nan_rank", "kill_rank"):
        if dbg[key] is not None and not 0 <= dbg[key] < world_size:
            p.append(f"debug.{key}={dbg[key]}: this run has ranks 0 to {world_size - 1}")
    return p


def data_problems(d: DictConfig, lg: DictConfig) -> list[str]:
    p: list[str] = []
    one_of(lg.name, "logger.name", LOGGERS, p)
    for backend in lg.backends:
        one_of(backend, "logger.backends", BACKENDS, p)
    one_of(lg.mode, "logger.mode", WANDB_MODES, p)
    from normtrain.data.corpus import CORPORA  # numpy and the data modules: on validation, not on import

    one_of(d.name, "data.name", CORPORA, p)
    finite("data.val_fraction", d.val_fraction, 0 < d.val_fraction < 1, "must lie in (0, 1)", p)
    if d.name == "local_text":
        if not d.path:
            p.append("data=local_text needs data.path: a file, a folder or a glob (e.g. 'texts/**/*.txt')")
        elif not os.path.exists(os.path.expanduser(d.path)) and not glob.glob(os.path.expanduser(d.path),
                                                                                 recursive=True):
            p.append(f"data.path={d.path!r} does not exist and matches no file as a glob")
    if d.name == "tokens":
        p += shard_problems(d)
    return p


def shard_problems(d: DictConfig) -> list[str]:
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
