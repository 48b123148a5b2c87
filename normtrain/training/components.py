"""Parts ``Trainer.build`` puts together, each from the config and the process group: the corpus (rank 0 first),
the optimizer with QK-Clip, the monitor, and the batch a data-dependent init profiles. Each function is the one
place its part is made; the loop uses them.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from normtrain.checkpoint import unwrap
from normtrain.data import BatchSampler, load_corpus
from normtrain.training.distributed import DistContext
from normtrain.training.evaluation import OutputProbe
from normtrain.training.monitor import SWITCHES, Monitor
from normtrain.training.optim import MuonSettings, build_optimizer
from normtrain.training.qk_clip import QKClip
from normtrain.util.progress import interactive


def corpus_for(cfg: DictConfig, ctx: DistContext):
    """The run's corpus: rank 0 tokenizes and caches it first; the others then read the cache."""
    corpus = None
    for turn in ("main", "others"):
        if ctx.is_main == (turn == "main"):
            corpus = load_corpus(cfg.data.name, cfg.data.path, cfg.data.val_fraction, cfg.data.cache_dir,
                                 progress=cfg.train.progress and ctx.is_main and interactive())
        ctx.barrier()
    return corpus


def stored_dtype(cfg: DictConfig) -> torch.dtype:
    """``train.param_dtype`` as a torch dtype: how the parameters are stored. The model is initialized in fp32 and
    then cast, buffers included, so ``bfloat16`` rounds the same init; the optimizer makes its states like the
    parameters (AdamW's moments, Muon's momentum), so they are bf16 too, with no fp32 master copy: the setting of
    NVIDIA's nGPT baseline, whose README says bf16 storage hurt that baseline. Not autocast (``train.autocast``),
    which computes in bf16 from fp32 parameters; on a CPU the bf16 model computes in bf16 throughout (the
    cross-entropy in fp32)."""
    return getattr(torch, cfg.train.param_dtype)


def first_micro_batch(corpus, cfg: DictConfig, ctx: DistContext, accumulation: int) -> torch.Tensor:
    """The inputs of the first micro-batch of the run's first training batch, drawn from a copy of the sampler
    (the data order is untouched), so every rank and world size sees the same one: what a data-dependent init
    profiles."""
    t = cfg.train
    first = BatchSampler(corpus.train, t.batch_size, cfg.model.seq_len, t.seed, device=ctx.device,
                         world_size=ctx.world_size, accumulation=accumulation).next_batch()[0]
    return first[:t.batch_size]


def optimizer_for(raw: torch.nn.Module, cfg: DictConfig, ctx: DistContext
                  ) -> tuple[torch.optim.Optimizer, QKClip | None]:
    """``optim``'s optimizer over the plain module ``raw``, and QK-Clip when ``optim.qk_clip`` is on (part of
    the update: ``TrainStep`` applies it after each optimizer step)."""
    o = cfg.optim
    optimizer = build_optimizer(raw, o.lr, o.betas, o.eps, o.weight_decay, o.independent_wd, o.name, o.momentum,
                                MuonSettings.of(o) if o.name == "muon" else None)
    qk_clip = (QKClip.of(raw, o.qk_clip, o.qk_clip_alpha, ctx.all_reduce if ctx.enabled else None)
               if o.qk_clip > 0 else None)
    return optimizer, qk_clip


def monitor_for(model: torch.nn.Module, params: list, cfg: DictConfig, ctx: DistContext, probe_x: torch.Tensor,
                autocast) -> Monitor:
    """The monitor of ``monitor.*`` over the blocks of ``model`` (wrapped: the probe's forward goes through the
    wrapper, the hooks sit on the plain module), with the output probe on ``probe_x`` when a metric needs it."""
    mon, raw = cfg.monitor, unwrap(model)
    probe = (OutputProbe(model, raw, probe_x, autocast, mon) if mon.output_change or mon.stream_change else None)
    return Monitor(raw.blocks, params, mon.every, mon.divergence_factor, probe=probe,
                   all_reduce=ctx.all_reduce if ctx.enabled else None,
                   spike_window=mon.spike_window if mon.spike_score else None,
                   output_softcap=cfg.model.logit_softcap, last_step=cfg.train.max_steps - 1,
                   **{k: mon[k] for k in SWITCHES})
