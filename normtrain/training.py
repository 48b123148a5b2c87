"""The training loop: build, loop (step, log, evaluate, checkpoint), finish.

Row ``step = k`` of ``metrics.jsonl`` describes the model after k optimizer updates: its training
loss and gradients on the k-th batch and, on evaluation steps, its validation loss.
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
from normtrain.checkpoint import save_checkpoint
from normtrain.config import model_config, to_container, validate
from normtrain.data import BatchSampler, eval_batches, load_corpus
from normtrain.loggers import JsonlLogger, Loggers, WandbLogger
from normtrain.model import GPT
from normtrain.monitor import Monitor
from normtrain.optim import build_optimizer, lr_at

LN2 = math.log(2)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


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


def build_loggers(cfg: DictConfig, run_dir: Path, sweep: str | None) -> Loggers:
    sinks: list = [JsonlLogger(run_dir / "metrics.jsonl")]
    lg = cfg.logger
    if lg.name == "wandb" and lg.mode != "disabled":
        sinks.append(WandbLogger(
            run_dir=run_dir, project=lg.project, entity=lg.entity, group=lg.group or sweep,
            name=lg.run_name or run_label(cfg),
            tags=[cfg.norm.name, cfg.placement.name, f"L{cfg.model.n_layers}", *lg.tags],
            job_type=f"{cfg.placement.name}-{cfg.norm.name}", mode=lg.mode, config=to_container(cfg)))
    return Loggers(sinks)


@torch.no_grad()
def evaluate(model: GPT, batches, autocast) -> float:
    """Mean validation loss (nats per byte) over fixed batches."""
    model.eval()
    total = torch.zeros((), device=batches[0][0].device)
    for x, y in batches:
        with autocast():
            total += model(x, y)[1].float()
    model.train()
    return (total / len(batches)).item()


def train(cfg: DictConfig, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Train one run and return its summary (also written to ``<run_dir>/summary.json``)."""
    validate(cfg)
    started = time.time()
    hydra_dir, sweep = hydra_dirs()
    run_dir = Path(run_dir or hydra_dir or Path("outputs") / time.strftime("%Y-%m-%d/%H-%M-%S_") / run_label(cfg))
    run_dir.mkdir(parents=True, exist_ok=True)
    t, o = cfg.train, cfg.optim
    device = pick_device(t.device)
    seed_everything(t.seed)

    # --- build
    corpus = load_corpus(cfg.data.name, cfg.data.path, cfg.data.val_fraction, cfg.data.cache_dir,
                         progress=t.progress)
    model = GPT(model_config(cfg)).to(device)
    optimizer = build_optimizer(model, o.lr, o.betas, o.eps, o.weight_decay)
    sampler = BatchSampler(corpus.train, t.batch_size, cfg.model.seq_len, t.seed, device=device)
    val_batches = eval_batches(corpus.val, t.batch_size, cfg.model.seq_len, t.eval_batches, device=device)
    params = [p for p in model.parameters() if p.requires_grad]
    monitor = Monitor(model.blocks, params, cfg.monitor.every, cfg.monitor.divergence_factor,
                      grad_norms=cfg.monitor.grad_norms, activations=cfg.monitor.activations)
    use_autocast = device.type == "cuda" and t.autocast

    def autocast():
        if use_autocast:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    summary: dict[str, Any] = {
        "status": "running", "steps": 0, "diverged_at_step": None, "final_val_loss": None,
        "best_val_loss": None, "final_val_bpb": None, "n_params": model.num_params(),
        "alpha": model.alpha, "beta": model.beta, "wall_time_s": None, "device": str(device),
        "run_dir": str(run_dir), "name": run_label(cfg), "corpus": corpus.describe(), "config": to_container(cfg),
    }
    loggers = build_loggers(cfg, run_dir, sweep)
    bar = tqdm(total=t.max_steps, desc=run_label(cfg), disable=not t.progress, dynamic_ncols=True)
    step, val_losses = 0, []
    tokens_per_step = t.batch_size * cfg.model.seq_len
    last_log_time, last_log_step, eval_time = time.perf_counter(), 0, 0.0

    def validate_now(row: dict[str, Any]) -> None:
        nonlocal eval_time
        t0 = time.perf_counter()
        loss = evaluate(model, val_batches, autocast)
        eval_time += time.perf_counter() - t0
        val_losses.append(loss)
        row.update({"val/loss": loss, "val/bpb": loss / LN2})
        bar.set_postfix_str(f"val {loss:.3f}", refresh=False)

    # --- loop
    try:
        for step in range(t.max_steps + 1):
            row: dict[str, Any] = {}
            if step == t.max_steps or (t.eval_every > 0 and step % t.eval_every == 0):
                validate_now(row)
            if step == t.max_steps:
                loggers.log(row, step)
                break
            lr = lr_at(step, lr=o.lr, warmup_steps=o.warmup_steps, max_steps=t.max_steps,
                       schedule=o.schedule, min_lr_ratio=o.min_lr_ratio)
            for group in optimizer.param_groups:
                group["lr"] = lr

            x, y = sampler.next_batch()
            with monitor.capture(step), autocast():
                _, loss = model(x, y)
            loss.backward()
            monitor.after_backward(step, loss)
            if o.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, o.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            bar.update(1)

            if monitor.is_log_step(step) or row:
                metrics, diverged_at = monitor.read()
                now = time.perf_counter()
                elapsed = max(now - last_log_time - eval_time, 1e-9)
                tokens_per_s = (step - last_log_step) * tokens_per_step / elapsed if step > last_log_step else None
                last_log_time, last_log_step, eval_time = now, step, 0.0
                row.update(metrics, lr=lr, tokens_per_s=tokens_per_s)
                loggers.log(row, step)
                if "train/loss" in metrics:
                    bar.set_postfix(loss=f"{metrics['train/loss']:.3f}", lr=f"{lr:.2e}",
                                    tok_s=f"{tokens_per_s or 0:.0f}", refresh=False)
                if diverged_at is not None or not all(math.isfinite(v) for v in val_losses):
                    summary["diverged_at_step"] = diverged_at if diverged_at is not None else step
                    summary["status"] = "diverged"
                    break
            if t.ckpt_every and (step + 1) % t.ckpt_every == 0:
                save_checkpoint(run_dir, model=model, optimizer=optimizer, step=step + 1,
                                sampler_state=sampler.state_dict(), config=summary["config"])
        summary["steps"] = step if summary["status"] == "running" else step + 1
        if summary["status"] == "running":
            summary["status"] = "completed"
    except KeyboardInterrupt:
        summary["status"], summary["steps"] = "interrupted", step
    except BaseException as err:
        summary["status"], summary["error"] = "failed", f"{type(err).__name__}: {err}"
        raise
    finally:
        bar.close()
        finite = [v for v in val_losses if math.isfinite(v)]
        summary.update(final_val_loss=val_losses[-1] if val_losses else None,
                       best_val_loss=min(finite) if finite else None,
                       wall_time_s=round(time.time() - started, 3))
        summary["final_val_bpb"] = (summary["final_val_loss"] / LN2
                                    if summary["final_val_loss"] is not None else None)
        if summary["status"] != "failed":
            save_checkpoint(run_dir, model=model, optimizer=optimizer, step=summary["steps"],
                            sampler_state=sampler.state_dict(), config=summary["config"])
        write_json(run_dir / "summary.json", summary)
        loggers.finish(summary)
    return summary
