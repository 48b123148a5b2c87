"""Checkpoints: written atomically into the run folder (``ckpt.pt``), loaded to resume a run exactly.

A checkpoint holds the model, optimizer, step, data position, every RNG state, the monitor's
reference values and the resolved config. Weights are saved from the plain module (never a
``torch.compile`` or DDP wrapper), so a checkpoint loads whether or not the model was compiled.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from normtrain.atomic import atomic_write
from normtrain.errors import ConfigError

CKPT_NAME = "ckpt.pt"


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module under ``torch.compile`` (``_orig_mod``) and DDP (``module``) wrappers."""
    while True:
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if not isinstance(inner, nn.Module):
            return model
        model = inner


def _is_fsdp(model: nn.Module) -> bool:
    return any(type(m).__name__.startswith("FSDP") for m in model.modules())


def rng_states() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_states(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def model_and_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Full (unsharded) state dicts; a collective under FSDP, so every rank must call it."""
    model = unwrap(model)
    if _is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        return get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return model.state_dict(), optimizer.state_dict()


def save_checkpoint(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus the RNG states) to ``<run_dir>/ckpt.pt`` atomically."""
    path = Path(run_dir) / CKPT_NAME
    state = {**state, "rng": rng_states()}
    atomic_write(path, lambda f: torch.save(state, f))
    return path


def resolve_resume(resume: str, run_dir: Path) -> Path | None:
    """``auto``: the run folder's checkpoint if there is one; ``none``: start fresh; else a path."""
    if resume in ("none", "", None):
        return None
    if resume == "auto":
        path = run_dir / CKPT_NAME
        return path if path.is_file() else None
    path = Path(resume).expanduser()
    if path.is_dir():
        path = path / CKPT_NAME
    if not path.is_file():
        raise ConfigError(f"train.resume={resume!r}: no checkpoint there; give a ckpt.pt, a run folder, "
                          "'auto' or 'none'")
    return path


def load_checkpoint(path: Path) -> dict[str, Any]:
    # our own file, holding numpy RNG state and plain Python objects besides tensors
    return torch.load(path, map_location="cpu", weights_only=False)


def restore(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load weights and optimizer state into (possibly wrapped or sharded) ``model`` and ``optimizer``."""
    model = unwrap(model)
    if _is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"],
                       options=StateDictOptions(full_state_dict=True))
    else:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    set_rng_states(state["rng"])
