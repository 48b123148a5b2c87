"""What a checkpoint holds, whatever its format: the plain module's weights, the RNG states, and the checks
that make a checkpoint trustworthy (every tensor finite, a CRC-32 of the contents)."""

from __future__ import annotations

import random
import zlib
from typing import Any

import numpy as np
import torch
from torch import nn

from normtrain.util.errors import CheckpointError
from normtrain.util.ranks import local


class UnusableCheckpoint(CheckpointError):
    """A checkpoint file that cannot be used, saying what is wrong with it and nothing of what to do: that depends
    on the command that met it (``normtrain`` resumes a run, ``normtrain-probe`` and ``normtrain-export`` read a
    finished one), which adds its own advice (``advised``)."""

    def advised(self, advice: str) -> CheckpointError:
        """The message followed by ``advice`` (a sentence)."""
        problem = str(self)
        return CheckpointError(f"{problem}{'' if problem.endswith(('.', '?', '!')) else '.'} {advice}")


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module under ``torch.compile`` (``_orig_mod``) and DDP (``module``) wrappers."""
    while True:
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if not isinstance(inner, nn.Module):
            return model
        model = inner


def is_fsdp(model: nn.Module) -> bool:
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


def all_finite(tensors: dict[str, Any]) -> bool:
    """Every floating-point tensor of a (model) state dict is finite (this rank's shard of a sharded one)."""
    return all(bool(torch.isfinite(local(t)).all()) for t in tensors.values()
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


def split_tensors(tree: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the tensors of a nested dict, everything else), both nested as ``tree`` was: the sharded format stores
    the first with DCP and the second in a file that loads with ``weights_only``."""
    tensors: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            t, r = split_tensors(value)
            if t:
                tensors[key] = t
            if r or not t:
                rest[key] = r
        elif isinstance(value, torch.Tensor):
            tensors[key] = value
        else:
            rest[key] = value
    return tensors, rest


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``split_tensors`` undone: the two nested dicts as one."""
    out = dict(a)
    for key, value in b.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
