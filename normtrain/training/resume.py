"""What a resume continues from (``ResumePoint``), and which config changes it may bring: the experiment stays the
same, its bookkeeping may change.

A checkpoint carries the resolved config it was trained with. Resuming it under keys that define the
experiment (``FIXED``) with other values would describe a run that never happened, so that is refused with
every difference listed as ``key: old → new``. The user may accept named differences explicitly with
``train.allow_changes=[key,...]`` (a key or a whole group, e.g. ``optim.lr`` or ``optim``); every accepted or
free change is recorded in the summary's ``resumes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normtrain.checkpoint import Checkpoint, find_checkpoint
from normtrain.config import global_batch, with_defaults
from normtrain.training.debug import restart_count
from normtrain.util.dotted import flatten, under
from normtrain.util.errors import CheckpointError
from normtrain.util.runlog import say

# Keys (or whole groups) that define the experiment: the model, its data and global batch, the optimizer and
# schedule, the seed, and the validation set every val loss is measured on. The global batch (sequences per
# optimizer step) is compared, not the number of processes nor the per-rank train.batch_size that make it up:
# a run resumes on another world size with gradient accumulation making up the difference.
FIXED = ("model", "norm", "placement", "data", "optim", "train.seed", "train.eval_batches",
         "train.eval_windows", "global_batch_size", "vocab_size")
# Bookkeeping: keys that say where and how a run is kept and shown, not what it computes. A resume ignores them
# inside FIXED groups (data.cache_dir), and normtrain-reproduce reuses a finished run whose config differs only in
# them (normtrain.study.grid.same_run).
BOOKKEEPING = ("logger", "data.cache_dir", "train.progress", "train.resume", "train.allow_changes")
# FIXED values the run resolves rather than the config names, and the keys through which train.allow_changes
# accepts a change of them: the vocabulary comes from the corpus (none), the global batch from
# train.global_batch_size or train.batch_size × world size.
RESOLVED = {"vocab_size": (), "global_batch_size": ("train.global_batch_size", "train.batch_size")}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value  # as JSON would show it


def _opt_in_keys(refused: dict[str, list]) -> list[str]:
    """The keys train.allow_changes would need for these changes (a resolved value through its config key)."""
    return [k if k not in RESOLVED else RESOLVED[k][0] for k in refused if k not in RESOLVED or RESOLVED[k]]


def config_changes(old: dict[str, Any], new: dict[str, Any], step: int) -> dict[str, list]:
    """Every changed key as ``{key: [old, new]}``; raise CheckpointError if any FIXED key changed unallowed.

    ``old``/``new`` are resolved configs plus the resolved ``global_batch_size``; ``step`` is the checkpoint's
    step, below which ``train.max_steps`` may not go.
    """
    before, after = flatten(old), flatten(new)
    missing = object()
    changes = {k: [_plain(before.get(k)), _plain(after.get(k))] for k in sorted(set(before) | set(after))
               if before.get(k, missing) != after.get(k, missing)}
    allowed = list(after.get("train.allow_changes") or ())
    refused = {k: v for k, v in changes.items()
               if under(k, FIXED) and not under(k, BOOKKEEPING) and not under(k, allowed)
               and not any(under(key, allowed) for key in RESOLVED.get(k, ()))}
    problems = [f"{k}: {v[0]!r} → {v[1]!r}" for k, v in refused.items()]
    if after.get("train.max_steps", step) < step:
        problems.append(f"train.max_steps: {after['train.max_steps']} is below the checkpoint's step {step}")
    keep = (f". To resume on another number of processes or with another micro-batch, keep the global batch "
            f"instead: train.global_batch_size={refused['global_batch_size'][0]}" if "global_batch_size" in refused
            else "")
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise CheckpointError(
            f"the checkpoint was trained with another experiment; resuming it would record a run that never "
            f"happened. Differences:\n{lines}\nTo proceed: train in a new folder (hydra.run.dir=PATH), start this "
            f"folder over with train.resume=none, or accept these changes explicitly with "
            f"'train.allow_changes=[{','.join(_opt_in_keys(refused)) or 'KEY'}]' (recorded in "
            f"the summary){keep}")
    return changes


def experiment(config: dict, world_size: int, corpus_fingerprint: str | None, vocab_size: int) -> dict[str, Any]:
    """What a checkpoint must share with this run to be resumed (``FIXED``): the global batch, not the number of
    processes that made it. Keys added to the schema since a record was written count at their defaults; records
    written before token shards have no vocab_size: they were byte-level (256)."""
    config = with_defaults(config)
    return {**config, "global_batch_size": global_batch(config.get("train") or {}, world_size),
            "corpus_fingerprint": corpus_fingerprint, "vocab_size": vocab_size}


@dataclass
class ResumePoint:
    """A checkpoint this run continues from: its state, read and verified, and the config changes since it was
    written (``config_changes`` has refused any the experiment does not allow)."""

    ckpt: Checkpoint
    state: dict[str, Any]
    changes: dict[str, list]

    @classmethod
    def find(cls, setting: str, run_dir: Path, ctx, this: dict[str, Any]) -> ResumePoint | None:
        """``train.resume`` (``setting``) resolved on rank 0 and read on every rank; ``this``: this run's
        ``experiment``. None: nothing to resume."""
        ckpt: Checkpoint | None = ctx.broadcast(find_checkpoint(setting, run_dir) if ctx.is_main else None)
        if ckpt is None:
            return None
        state = ckpt.read(ctx)
        old = experiment(state["config"], state.get("world_size", 1), state.get("corpus_fingerprint"),
                         state.get("vocab_size", 256))
        return cls(ckpt, state, config_changes(old, this, step=state["step"]))

    def history(self, world_size: int) -> list[dict[str, Any]]:
        """The run's resumes, this one last: from which step and file, with what changes, on how many processes
        (and which torchrun restart, if one)."""
        entry = {"step": self.state["step"], "path": str(self.ckpt.path), "changes": self.changes,
                 "world_size": world_size}
        return [*self.state.get("resumes", []), {**entry, **({"restart": restart_count()} if restart_count() else {})}]

    def message(self) -> str:
        changed = "".join(f"\n  {k}: {v[0]!r} → {v[1]!r}" for k, v in self.changes.items())
        return (f"normtrain: resuming from step {self.state['step']} ({self.ckpt.path})"
                + (f"; changed since the checkpoint:{changed}" if changed else ""))


def diverged_record(previous: dict[str, Any] | None, this: dict[str, Any], run_dir: Path) -> dict[str, Any] | None:
    """The folder's summary if its run diverged (a result: resuming returns it instead of re-training, once the
    experiment is found the same), else None."""
    if not (previous and previous.get("status") == "diverged"):
        return None
    config_changes(experiment(previous.get("config") or {}, previous.get("world_size", 1),
                              (previous.get("corpus") or {}).get("fingerprint"), previous.get("vocab_size", 256)),
                   this, step=previous.get("steps") or 0)
    say(f"normtrain: this run diverged at step {previous.get('diverged_at_step')} (recorded in "
        f"{run_dir / 'summary.json'}); nothing to resume. To train it again, use train.resume=none or a new folder")
    return previous
