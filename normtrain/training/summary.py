"""summary.json as a run starts: every field it will have, those known once the run is built filled in, the rest
(``status: running``, no losses yet) for ``Trainer.finish`` to fill at the end (``Trainer.finalize_summary``).
INTERFACE.md lists the fields users read."""

from __future__ import annotations

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
from normtrain.training.reporting import run_label
from normtrain.util.provenance import code_state_at_start


def first_summary(cfg: DictConfig, ctx: DistContext, plain: GPT, corpus, evaluation: Evaluation, *, vocab_size: int,
                  global_batch: int, accumulation: int, ckpt_format: str, norm_impl: Choice, run_dir: Path,
                  started: float) -> dict[str, Any]:
    """The summary of a built run (``plain``: its model before any wrapper), before it trains."""
    return {
        "status": "running", "steps": 0, "diverged_at_step": None, "final_val_loss": None,
        "last_finite_val_loss": None, "best_val_loss": None, "final_val_bpb": None,
        "n_params": plain.num_params(), "alpha": plain.alpha, "beta": plain.beta, "wall_time_s": None,
        "vocab_size": vocab_size, "device": str(ctx.device), "world_size": ctx.world_size,
        "global_batch_size": global_batch, "grad_accumulation": accumulation,
        "ckpt_format": ckpt_format, "resumed_from_step": None, "resumes": [], "rollbacks": [],
        "restarts": restart_count(), "run_dir": str(run_dir), "name": run_label(cfg),
        "norm_impl": norm_impl.as_dict(), "corpus": corpus.describe(),
        "eval_windows": evaluation.n_windows, "unigram_val_loss": evaluation.unigram_val_loss,
        "collapsed": False, "undertrained": False, "loss_trend": None,
        "code": code_state_at_start(),
        "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        "config": to_container(cfg),
    }
