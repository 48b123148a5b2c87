"""Checkpoints: written atomically into the run folder (``ckpt.pt``), loaded to resume a run exactly.

A checkpoint holds the model, optimizer, step, data position, every RNG state, the monitor's
reference values and the resolved config. Weights are saved from the plain module (never a
``torch.compile`` or DDP wrapper), so a checkpoint loads whether or not the model was compiled.

Only tensors and plain containers are stored, so a checkpoint loads with ``weights_only=True``: opening
one that someone else wrote runs no code. A checkpoint is a resume point, so it must be finite:
``save_checkpoint`` refuses non-finite weights and ``load_checkpoint`` rejects them.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from normtrain.atomic import atomic_write
from normtrain.errors import CheckpointError, ConfigError

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
    kind, keys, pos, has_gauss, gauss = np.random.get_state()  # as a tensor and plain values (weights_only)
    numpy_state = {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": pos,
                   "has_gauss": has_gauss, "gauss": gauss}
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_states(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
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


def all_finite(tensors: dict[str, Any]) -> bool:
    """Every floating-point tensor of a (model) state dict is finite."""
    return all(bool(torch.isfinite(t).all()) for t in tensors.values()
               if isinstance(t, torch.Tensor) and t.is_floating_point())


def digest(value: Any, crc: int = 0) -> int:
    """CRC-32 of every tensor's bytes and every other value, in order: torch's zip format checks none of them,
    so a flipped byte in a weight would otherwise load silently."""
    if isinstance(value, dict):
        for key in value:
            crc = digest(value[key], zlib.crc32(repr(key).encode(), crc))
        return crc
    if isinstance(value, (list, tuple)):
        for item in value:
            crc = digest(item, crc)
        return crc
    if isinstance(value, torch.Tensor):
        raw = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
        return zlib.crc32(raw, zlib.crc32(f"{value.dtype}{tuple(value.shape)}".encode(), crc))
    return zlib.crc32(repr(value).encode(), crc)


def save_checkpoint(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus the RNG states and a digest of it all) to ``<run_dir>/ckpt.pt`` atomically."""
    if not all_finite(state["model"]):
        raise ValueError("refusing to save non-finite weights as a resume point")  # the loop checks first
    path = Path(run_dir) / CKPT_NAME
    state = {**state, "rng": rng_states()}
    state["digest"] = digest(state)
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
    """The state saved by ``save_checkpoint``; CheckpointError for anything else (damaged, foreign, non-finite)."""
    how = "start over with train.resume=none, or point train.resume at another checkpoint"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a damaged zip, a pickle that wants code run, a truncated file: all unreadable
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"the checkpoint {path} cannot be read ({reason}); it was damaged or is not a "
                              f"normtrain checkpoint: {how}") from None
    missing = {"model", "optimizer", "step", "sampler", "monitor", "rng", "config", "digest"} - set(state or ())
    if not isinstance(state, dict) or missing:
        raise CheckpointError(f"the file {path} is not a normtrain checkpoint (it lacks {sorted(missing)}): {how}")
    if digest({k: v for k, v in state.items() if k != "digest"}) != state["digest"]:
        raise CheckpointError(f"the checkpoint {path} is damaged (its contents do not match the digest written "
                              f"with it): {how}")
    if not all_finite(state["model"]):
        raise CheckpointError(f"the checkpoint {path} holds non-finite weights (the run had diverged): it is not a "
                              f"point to resume from; {how}")
    return state


def restore(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load weights and optimizer state into (possibly wrapped or sharded) ``model`` and ``optimizer``."""
    model = unwrap(model)
    if _is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"],
                       options=StateDictOptions(full_state_dict=True))
    else:
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as err:
            first = str(err).strip().splitlines()
            raise CheckpointError(f"the checkpoint does not fit this model ({' '.join(first[:3])[:300]}): it "
                                  "comes from another architecture; resume it with its own config, or start "
                                  "over with train.resume=none") from None
    set_rng_states(state["rng"])
