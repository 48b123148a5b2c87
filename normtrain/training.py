"""The training loop: build, loop (step, log, evaluate, checkpoint), finish.

Row ``step = k`` of ``metrics.jsonl`` describes the model after k optimizer updates: its training
loss and gradients on the k-th batch and, on evaluation steps, its validation loss. A checkpoint
saved after k updates resumes at k with the same batches, so a resumed run repeats the losses of
an uninterrupted one exactly (on CPU).
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from tqdm.auto import tqdm

from normtrain.atomic import write_json
from normtrain.checkpoint import (
    load_checkpoint,
    model_and_optimizer_state,
    resolve_resume,
    restore,
    save_checkpoint,
    unwrap,
)
from normtrain.config import model_config, to_container, validate
from normtrain.data import BatchSampler, eval_batches, load_corpus
from normtrain.distributed import DistContext, init_distributed, wrap_model
from normtrain.flops import mfu, model_flops_per_token, peak_flops
from normtrain.loggers import JsonlLogger, Loggers, WandbLogger
from normtrain.model import GPT
from normtrain.monitor import Monitor
from normtrain.optim import build_optimizer, lr_at
from normtrain.preemption import StopRequested

LN2 = math.log(2)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_label(cfg: DictConfig) -> str:
    """Short name of a run: ``<placement>-<norm>-L<n_layers>``."""
    return f"{cfg.placement.name}-{cfg.norm.name}-L{cfg.model.n_layers}"


def hydra_dirs() -> tuple[Path | None, str | None]:
    """(this job's output folder, the sweep's name when in a multirun) if Hydra is running us."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
    except ImportError:
        return None, None
    if not HydraConfig.initialized():
        return None, None
    hc = HydraConfig.get()
    sweep = Path(hc.sweep.dir).name if hc.mode == RunMode.MULTIRUN else None
    return Path(hc.runtime.output_dir), sweep


def build_loggers(cfg: DictConfig, run_dir: Path, sweep: str | None, start_step: int) -> Loggers:
    sinks: list = [JsonlLogger(run_dir / "metrics.jsonl", start_step=start_step)]
    lg = cfg.logger
    if lg.name == "wandb" and lg.mode != "disabled":
        sinks.append(WandbLogger(
            run_dir=run_dir, project=lg.project, entity=lg.entity, group=lg.group or sweep,
            name=lg.run_name or run_label(cfg),
            tags=[cfg.norm.name, cfg.placement.name, f"L{cfg.model.n_layers}", *lg.tags],
            job_type=f"{cfg.placement.name}-{cfg.norm.name}", mode=lg.mode, config=to_container(cfg)))
    return Loggers(sinks)


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches, autocast, ctx: DistContext) -> float:
    """Mean validation loss (nats per byte) over fixed batches (and over ranks)."""
    model.eval()
    total = torch.zeros(1, device=batches[0][0].device)
    for x, y in batches:
        with autocast():
            total += model(x, y)[1].float()
    model.train()
    return ctx.all_reduce(total / len(batches), "mean").item()


def train(cfg: DictConfig, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Train one run and return its summary (also written to ``<run_dir>/summary.json``)."""
    validate(cfg)
    ctx = init_distributed(cfg.train.device)
    try:
        return _train(cfg, ctx, run_dir)
    finally:
        ctx.close()


def _train(cfg: DictConfig, ctx: DistContext, run_dir: str | Path | None) -> dict[str, Any]:
    started = time.time()
    hydra_dir, sweep = hydra_dirs()
    default_dir = Path("outputs") / time.strftime("%Y-%m-%d") / f"{time.strftime('%H-%M-%S')}_{run_label(cfg)}"
    run_dir = Path(ctx.broadcast(str(run_dir or hydra_dir or default_dir)))  # every rank: rank 0's folder
    if ctx.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
    t, o, mon = cfg.train, cfg.optim, cfg.monitor
    device = ctx.device
    seed_everything(t.seed)

    # --- build
    corpus = None
    for turn in ("main", "others"):  # rank 0 tokenizes and caches first; the others then read the cache
        if ctx.is_main == (turn == "main"):
            corpus = load_corpus(cfg.data.name, cfg.data.path, cfg.data.val_fraction, cfg.data.cache_dir,
                                 progress=t.progress and ctx.is_main)
        ctx.barrier()
    plain = GPT(model_config(cfg)).to(device)
    n_params, alpha, beta, flops_per_token = plain.num_params(), plain.alpha, plain.beta, model_flops_per_token(plain)
    model = wrap_model(plain, ctx, t.strategy)
    raw = unwrap(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(model, o.lr, o.betas, o.eps, o.weight_decay)
    compiled = torch.compile(model) if t.compile else model
    sampler = BatchSampler(corpus.train, t.batch_size, cfg.model.seq_len, t.seed, device=device,
                           rank=ctx.rank, world_size=ctx.world_size)
    # the val windows of the global batch, each rank keeping its slice (losses are averaged over ranks)
    global_val = eval_batches(corpus.val, t.batch_size * ctx.world_size, cfg.model.seq_len, t.eval_batches,
                              device=device)
    mine = slice(ctx.rank * t.batch_size, (ctx.rank + 1) * t.batch_size)
    val_batches = [(x[mine], y[mine]) for x, y in global_val]
    use_autocast = device.type == "cuda" and t.autocast

    def autocast():
        return torch.autocast("cuda", dtype=torch.bfloat16) if use_autocast else contextlib.nullcontext()

    probe_x = global_val[0][0][:mon.probe_batch]  # the same on every rank

    @torch.no_grad()
    def probe() -> torch.Tensor:
        model.eval()
        with autocast():
            out = raw(probe_x, hidden_only=True).float()
        model.train()
        return out

    monitor = Monitor(raw.blocks, params, mon.every, mon.divergence_factor, grad_norms=mon.grad_norms,
                      activations=mon.activations, attn_entropy=mon.attn_entropy, update_ratio=mon.update_ratio,
                      probe=probe if mon.output_change else None,
                      all_reduce=ctx.all_reduce if ctx.enabled else None)

    # --- resume
    start_step, val_losses = 0, []
    ckpt_path = ctx.broadcast(resolve_resume(t.resume, run_dir) if ctx.is_main else None)
    if ckpt_path is not None:
        state = load_checkpoint(ckpt_path)
        restore(model, optimizer, state)
        sampler.load_state_dict(state["sampler"])
        monitor.load_state_dict(state["monitor"])
        start_step, val_losses = state["step"], list(state["val_losses"])

    def checkpoint(steps_done: int) -> None:
        model_state, optim_state = model_and_optimizer_state(model, optimizer)  # a collective under FSDP
        if ctx.is_main:
            save_checkpoint(run_dir, {
                "model": model_state, "optimizer": optim_state, "step": steps_done, "sampler": sampler.state_dict(),
                "monitor": monitor.state_dict(), "val_losses": val_losses, "config": summary["config"]})

    summary: dict[str, Any] = {
        "status": "running", "steps": start_step, "diverged_at_step": None, "final_val_loss": None,
        "best_val_loss": None, "final_val_bpb": None, "n_params": n_params, "alpha": alpha, "beta": beta,
        "wall_time_s": None, "device": str(device), "world_size": ctx.world_size,
        "global_batch_size": t.batch_size * ctx.world_size, "resumed_from_step": start_step or None,
        "run_dir": str(run_dir), "name": run_label(cfg), "corpus": corpus.describe(), "config": to_container(cfg),
    }
    loggers = build_loggers(cfg, run_dir, sweep, start_step) if ctx.is_main else Loggers([])
    bar = tqdm(total=t.max_steps, initial=start_step, desc=run_label(cfg), disable=not (t.progress and ctx.is_main),
               dynamic_ncols=True)
    tokens_per_step = t.batch_size * cfg.model.seq_len * ctx.world_size
    peak = peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    last_log_time, last_log_step, eval_time = time.perf_counter(), start_step, 0.0
    steps_done, at_boundary = start_step, True

    def validate_now(row: dict[str, Any]) -> None:
        nonlocal eval_time
        t0 = time.perf_counter()
        loss = evaluate(model, val_batches, autocast, ctx)
        eval_time += time.perf_counter() - t0
        val_losses.append(loss)
        row.update({"val/loss": loss, "val/bpb": loss / LN2})
        bar.set_postfix_str(f"val {loss:.3f}", refresh=False)

    # --- loop
    stop = StopRequested()
    try:
        with stop:
            for step in range(start_step, t.max_steps + 1):
                row: dict[str, Any] = {}
                if step == t.max_steps or (t.eval_every > 0 and step % t.eval_every == 0):
                    validate_now(row)
                if step == t.max_steps:
                    loggers.log(row, step)
                    break
                at_boundary = False
                lr = lr_at(step, lr=o.lr, warmup_steps=o.warmup_steps, max_steps=t.max_steps,
                           schedule=o.schedule, min_lr_ratio=o.min_lr_ratio)
                for group in optimizer.param_groups:
                    group["lr"] = lr

                x, y = sampler.next_batch()
                log_step = monitor.is_log_step(step)
                forward = model if log_step else compiled  # diagnostics hook the eager model: no recompiles
                with monitor.capture(step), autocast():
                    _, loss = forward(x, y)
                loss.backward()
                monitor.after_backward(step, loss)
                if o.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(params, o.grad_clip)
                optimizer.step()
                monitor.after_update(step)
                optimizer.zero_grad(set_to_none=True)
                steps_done, at_boundary = step + 1, True
                bar.update(1)

                stopping = stop.requested is not None
                if log_step or row:
                    metrics, diverged_at = monitor.read()
                    now = time.perf_counter()
                    elapsed = max(now - last_log_time - eval_time, 1e-9)
                    tokens_per_s = (step - last_log_step) * tokens_per_step / elapsed if step > last_log_step else None
                    last_log_time, last_log_step, eval_time = now, step, 0.0
                    row.update(metrics, lr=lr, tokens_per_s=tokens_per_s)
                    if peak and tokens_per_s:
                        row["mfu"] = mfu(tokens_per_s, flops_per_token, peak, ctx.world_size)
                    loggers.log(row, step)
                    if "train/loss" in metrics:
                        bar.set_postfix(loss=f"{metrics['train/loss']:.3f}", lr=f"{lr:.2e}",
                                        tok_s=f"{tokens_per_s or 0:.0f}", refresh=False)
                    if diverged_at is not None or not all(math.isfinite(v) for v in val_losses):
                        summary["diverged_at_step"] = diverged_at if diverged_at is not None else step
                        summary["status"] = "diverged"
                        break
                    if ctx.enabled:  # every rank stops at the same step, or none does
                        stopping = bool(ctx.all_reduce(torch.tensor([float(stopping)], device=device), "max"))
                elif ctx.enabled:
                    stopping = False  # ranks agree on a stop only at log steps (no extra sync per step)
                if stopping:
                    summary["status"] = "interrupted"
                    break
                if t.ckpt_every and steps_done % t.ckpt_every == 0:
                    checkpoint(steps_done)
        if summary["status"] == "running":
            summary["status"] = "completed"
    except KeyboardInterrupt:  # a second signal, or Ctrl-C outside our handler
        summary["status"] = "interrupted"
    except BaseException as err:
        summary["status"], summary["error"] = "failed", f"{type(err).__name__}: {err}"
        raise
    finally:
        bar.close()
        finite = [v for v in val_losses if math.isfinite(v)]
        summary.update(steps=steps_done, final_val_loss=val_losses[-1] if val_losses else None,
                       best_val_loss=min(finite) if finite else None, wall_time_s=round(time.time() - started, 3))
        if summary["final_val_loss"] is not None:
            summary["final_val_bpb"] = summary["final_val_loss"] / LN2
        if summary["status"] != "failed" and at_boundary:
            checkpoint(steps_done)
        if ctx.is_main:
            write_json(run_dir / "summary.json", summary)
            loggers.finish(summary)
    stop.hand_over()
    return summary
