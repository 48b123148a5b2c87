"""Checkpoints: a resume point in the run folder, written atomically, in one of two formats.

  full (``ckpt.pt``) ....... one file, the whole state gathered and written by rank 0 (full.py); the default on
                             one process
  dcp (``ckpt.dcp/``) ...... torch.distributed.checkpoint: every rank writes its own shard, optionally in the
                             background (``train.async_ckpt``) (sharded.py); the default under torchrun

Both hold the same state: model, optimizer, step, data position, every RNG state, the monitor's reference values,
the resolved config and the run's resumes and rollbacks. Both load with ``weights_only`` (no code runs), carry
CRC-32 digests checked on load, and refuse non-finite weights; a file that cannot be used is refused with what it
is (``UnusableCheckpoint``; identify.py names an unreadable file), and each command adds what to do about it.
``Checkpointer`` is what the training loop talks to; ``find_checkpoint`` resolves ``train.resume`` to either format
(a run may change format on a resume: each commit removes the folder's checkpoint of the other format, so a folder
holds one resume point).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normtrain.checkpoint.full import (
    CKPT_NAME,
    FullCheckpoint,
    load_checkpoint,
    model_and_optimizer_state,
    save_checkpoint,
)
from normtrain.checkpoint.sharded import DCP_NAME, LATEST, MANIFEST, ShardedCheckpoint, ShardedWriter, latest_folder
from normtrain.checkpoint.state import UnusableCheckpoint, all_finite, digest, unwrap
from normtrain.util.errors import ConfigError

Checkpoint = FullCheckpoint | ShardedCheckpoint


def in_folder(run_dir: Path) -> Checkpoint | None:
    """A run folder's checkpoint: ``ckpt.pt`` or the one ``ckpt.dcp/LATEST`` names; the newer if both are there
    (a crash between a commit and the removal of the other format's)."""
    found = []
    if (run_dir / CKPT_NAME).is_file():
        found.append(((run_dir / CKPT_NAME).stat().st_mtime, FullCheckpoint(run_dir / CKPT_NAME)))
    if (folder := latest_folder(run_dir / DCP_NAME)) is not None:
        found.append(((run_dir / DCP_NAME / LATEST).stat().st_mtime, ShardedCheckpoint(folder)))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def find_checkpoint(resume: str | None, run_dir: Path) -> Checkpoint | None:
    """``auto``: the run folder's checkpoint if there is one; ``none``: start fresh; else a path: a ``ckpt.pt``, a
    run folder, a ``ckpt.dcp`` folder or one sharded save in it."""
    if resume in ("none", "", None):
        return None
    if resume == "auto":
        return in_folder(run_dir)
    path = Path(resume).expanduser()
    found: Checkpoint | None = None
    if path.is_file():
        found = FullCheckpoint(path)
    elif (path / MANIFEST).is_file():
        found = ShardedCheckpoint(path)
    elif (path / LATEST).is_file():
        found = ShardedCheckpoint(latest_folder(path))
    elif path.is_dir():
        found = in_folder(path)
    if found is None:
        raise ConfigError(f"train.resume={resume!r}: no checkpoint there; give a ckpt.pt, a run folder, a "
                          f"{DCP_NAME} folder, 'auto' or 'none'")
    return found


def keep_copy(run_dir: Path, name: str) -> Path:
    """A copy of the folder's ``ckpt.pt`` under ``name``, written atomically (a later save does not touch it)."""
    import os

    target = Path(run_dir) / name
    partial = target.with_name(target.name + ".partial")
    shutil.copyfile(Path(run_dir) / CKPT_NAME, partial)
    os.replace(partial, target)
    return target


class Checkpointer:
    """Saves the run's resume points in its format (``train.ckpt_format``, resolved) and finds the newest one.
    Every rank calls every method at the same point of the loop."""

    def __init__(self, run_dir: Path, ctx, fmt: str, async_save: bool = False):
        self.run_dir, self.ctx, self.format = Path(run_dir), ctx, fmt
        self.sharded = ShardedWriter(self.run_dir, ctx, async_save) if fmt == "dcp" else None

    def save(self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        """Write a resume point of ``state`` (step, data position, ...) with the model's and optimizer's."""
        if self.sharded is not None:
            self.sharded.save(model, optimizer, state)
            if self.sharded.pending is None:  # committed at once (not in the background)
                self._drop(CKPT_NAME)
            return
        model_state, optim_state = model_and_optimizer_state(model, optimizer)  # a collective under FSDP
        if self.ctx.is_main:
            save_checkpoint(self.run_dir, {"model": model_state, "optimizer": optim_state, **state})
            self._drop(DCP_NAME)

    def poll(self) -> None:
        """Commit a finished background save (at a point where the ranks are in step: a log step)."""
        if self.sharded is not None and self.sharded.poll():
            self._drop(CKPT_NAME)

    def wait(self) -> None:
        """Wait for a background save and commit it (before a rollback reads the folder, and at the end)."""
        if self.sharded is not None and self.sharded.wait():
            self._drop(CKPT_NAME)

    def latest(self) -> Checkpoint | None:
        """The run folder's newest committed checkpoint, as rank 0 sees it."""
        return self.ctx.broadcast(in_folder(self.run_dir) if self.ctx.is_main else None)

    def close(self, failed: bool = False) -> None:
        """Stop the background writer (after ``wait`` where the run ends well; see ``ShardedWriter.close``)."""
        if self.sharded is not None:
            self.sharded.close(failed)

    def _drop(self, name: str) -> None:
        """The folder's checkpoint in the other format, once one in this format is committed."""
        other = self.run_dir / name
        if not self.ctx.is_main or not other.exists():
            return
        shutil.rmtree(other) if other.is_dir() else other.unlink(missing_ok=True)


__all__ = ["CKPT_NAME", "DCP_NAME", "Checkpoint", "Checkpointer", "FullCheckpoint", "ShardedCheckpoint",
           "UnusableCheckpoint", "all_finite", "digest", "find_checkpoint", "in_folder", "keep_copy", "load_checkpoint",
           "save_checkpoint", "unwrap"]
