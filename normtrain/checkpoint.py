"""Checkpoints written atomically into the run folder (``ckpt.pt``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from normtrain.atomic import atomic_write

CKPT_NAME = "ckpt.pt"


def rng_states() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def save_checkpoint(run_dir: str | Path, *, model: nn.Module, optimizer: torch.optim.Optimizer, step: int,
                    sampler_state: dict, config: dict) -> Path:
    """Everything needed to continue the run: weights, optimizer, step, data position, RNG states, config."""
    model = getattr(model, "_orig_mod", model)  # a compiled model saves the plain module's keys
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
             "sampler": sampler_state, "rng": rng_states(), "config": config}
    path = Path(run_dir) / CKPT_NAME
    atomic_write(path, lambda f: torch.save(state, f))
    return path
