"""The one-file format (``train.ckpt_format=full``, the default on one process): ``<run dir>/ckpt.pt``, written
by rank 0 alone from full (gathered) state dicts, atomically (temp file, fsync, rename).

Only tensors and plain containers are stored, so a checkpoint loads with ``weights_only=True``: opening one that
someone else wrote runs no code. A digest (CRC-32) of the whole state is stored with it and checked on load.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normtrain.checkpoint.identify import what_it_is
from normtrain.checkpoint.state import (
    UnusableCheckpoint,
    all_finite,
    digest,
    is_fsdp,
    rng_states,
    set_rng_states,
    unwrap,
)
from normtrain.util.atomic import atomic_write
from normtrain.util.optimizers import optimizers_of

CKPT_NAME = "ckpt.pt"


def model_and_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Full (unsharded) state dicts; a collective under FSDP, so every rank must call it."""
    model = unwrap(model)
    if is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        return get_state_dict(model, optimizers_of(optimizer),
                              options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return model.state_dict(), optimizer.state_dict()


def save_checkpoint(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus the RNG states and a digest of it all) to ``<run_dir>/ckpt.pt`` atomically."""
    if not all_finite(state["model"]):
        raise ValueError("refusing to save non-finite weights as a resume point")  # the loop checks first
    path = Path(run_dir) / CKPT_NAME
    state = {**state, "rng": rng_states()}
    state["digest"] = digest(state)
    atomic_write(path, lambda f: torch.save(state, f))
    return path


def load_checkpoint(path: Path) -> dict[str, Any]:
    """The state saved by ``save_checkpoint``; UnusableCheckpoint, saying what the file is, for anything else
    (damaged, cut short, foreign, holding code, non-finite)."""
    try:
        with warnings.catch_warnings():  # torch's notes on a foreign pickle: the message below says what it is
            warnings.simplefilter("ignore", UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a damaged zip, a pickle that wants code run, a truncated file: all unreadable
        raise UnusableCheckpoint(f"the checkpoint {path} cannot be read: it {what_it_is(path, err)}") from None
    if not isinstance(state, dict):
        raise UnusableCheckpoint(f"the file {path} is not a normtrain checkpoint: torch.save wrote a "
                                 f"{type(state).__name__} into it, not a checkpoint's dict")
    missing = {"model", "optimizer", "step", "sampler", "monitor", "rng", "config", "digest"} - set(state)
    if missing:
        held = ", ".join(map(repr, list(state)[:5])) + (", ..." if len(state) > 5 else "")
        raise UnusableCheckpoint(f"the file {path} is not a normtrain checkpoint: torch.save wrote a dict of "
                                 f"{held or 'nothing'} into it, without {sorted(missing)}")
    if digest({k: v for k, v in state.items() if k != "digest"}) != state["digest"]:
        raise UnusableCheckpoint(f"the checkpoint {path} is damaged: its contents do not match the digest written "
                                 "with it (a changed byte, a bad copy)")
    if not all_finite(state["model"]):
        raise UnusableCheckpoint(f"the checkpoint {path} holds non-finite weights (the run had diverged)")
    return state


def restore(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load weights and optimizer state into (possibly wrapped or sharded) ``model`` and ``optimizer``."""
    model = unwrap(model)
    if is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        set_state_dict(model, optimizers_of(optimizer), model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"], options=StateDictOptions(full_state_dict=True))
    else:
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as err:
            first = str(err).strip().splitlines()
            raise UnusableCheckpoint(f"the checkpoint does not fit this model ({' '.join(first[:3])[:300]}): it "
                                     "comes from another architecture (another model config)") from None
    set_rng_states(state["rng"])


@dataclass(frozen=True)
class FullCheckpoint:
    """A ``ckpt.pt`` to resume from: ``read`` verifies and loads it whole, ``restore`` puts it into a model."""

    path: Path
    format = "full"

    def read(self, ctx=None) -> dict[str, Any]:
        return load_checkpoint(self.path)

    def restore(self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any], ctx=None) -> None:
        restore(model, optimizer, state)

    def load_weights(self, model: nn.Module, state: dict[str, Any]) -> None:
        """The weights alone, into a plain model in one process (normtrain-export, normtrain.load)."""
        model.load_state_dict(state["model"])
