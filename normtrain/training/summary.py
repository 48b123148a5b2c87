"""summary.json as a run starts: every field it will have, those known once the run is built filled in, the rest
(``status: running``, no losses yet) for ``Trainer.finish`` to fill at the end (``Trainer.finalize_summary``).
INTERFACE.md lists the fields users read."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from normtrain.config import to_container
from normtrain.model import GPT
from normtrain.ops.guard import Choice
from normtrain.training.debug import restart_count
from normtrain.training.distributed import DistContext
from normtrain.training.evaluation import Evaluation
from normtrain.training.outcome import labels, tail_trend
from normtrain.training.reporting import run_label
from normtrain.util.provenance import code_state_at_start, execution_state


def first_summary(cfg: DictConfig, ctx: DistContext, plain: GPT, corpus, evaluation: Evaluation, *, vocab_size: int,
                  global_batch: int, accumulation: int, ckpt_format: str, norm_impl: Choice, run_dir: Path,
                  started: float) -> dict[str, Any]:
    """The summary of a built run (``plain``: its model before any wrapper), before it trains."""
    return {
        "status": "running", "steps": 0, "diverged_at_step": None, "final_val_loss": None, "final_val_loss_step": None,
        "last_finite_val_loss": None, "best_val_loss": None, "final_val_bpb": None,
        "n_params": plain.num_params(), "alpha": plain.alpha, "beta": plain.beta, "wall_time_s": None,
        "vocab_size": vocab_size, "device": str(ctx.device), "world_size": ctx.world_size,
        "global_batch_size": global_batch, "grad_accumulation": accumulation,
        "ckpt_format": ckpt_format, "resumed_from_step": None, "resumes": [], "rollbacks": [],
        "restarts": restart_count(), "run_dir": str(run_dir), "name": run_label(cfg),
        "norm_impl": norm_impl.as_dict(), "corpus": corpus.describe(),
        "eval_windows": evaluation.n_windows, "unigram_val_loss": evaluation.unigram_val_loss,
        "collapsed": False, "undertrained": False, "loss_trend": None,
        "code": code_state_at_start(), "execution": execution_state(ctx.device),
        "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        "config": to_container(cfg),
    }


def final_fields(summary: dict[str, Any], val_steps: list[int], val_losses: list[float],
                 train_losses: list[tuple[int, float]], steps_done: int, max_steps: int,
                 bpb: Callable[[float], float]) -> dict[str, Any]:
    """What the run's end adds: its losses, and its labels read from the validation curve (outcome.py)."""
    finite = [v for v in val_losses if math.isfinite(v)]
    last = val_losses[-1] if val_losses else None
    diverged = summary["status"] == "diverged"
    final = None if diverged or last is None or not math.isfinite(last) else last
    trend = tail_trend([s for s, _ in train_losses], [v for _, v in train_losses], steps_done)
    paired = len(val_steps) == len(val_losses)  # a checkpoint from before val_steps: no curve
    curve = list(zip(val_steps, val_losses, strict=True)) if paired else []
    judged = labels(curve, summary["unigram_val_loss"], max_steps, diverged=diverged)
    return {**judged.as_dict(), "loss_trend": trend.as_dict(), "steps": steps_done, "final_val_loss": final,
            "final_val_loss_step": val_steps[-1] if final is not None and paired and val_steps else None,
            "final_val_bpb": None if final is None else bpb(final),
            "last_finite_val_loss": finite[-1] if finite else None, "best_val_loss": min(finite) if finite else None}

