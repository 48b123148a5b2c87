"""Rollback on divergence (``train.on_divergence=rollback``): the remedy reported for PaLM and OPT and automated
in OLMo's trainers. A loss spike or a non-finite loss sends the run back to its last checkpoint; the batches that
led to it are skipped (the sampler moves past them, so the same data is not replayed), the learning rate may be
lowered for a while, and training goes on. After ``train.rollback.max_retries`` rollbacks the next divergence
stops the run as diverged, as ``train.on_divergence=stop`` (the default) does at once.

This module holds the policy and the record; ``Trainer.roll_back`` (normtrain/training/trainer.py) does the restoring.
Each rollback is one record, kept in the checkpoint (a resumed run goes on counting), in summary.json's
``rollbacks`` and, as an event row, in metrics.jsonl and every logger:

    {"step": 37,                     the diverged step (as the divergence flag reports it)
     "restored_step": 30,            the checkpoint's step, where training resumed
     "checkpoint": ".../ckpt.pt",    the checkpoint restored
     "skipped_batches": 8,           global batches skipped after it
     "lr_factor": 0.5, "lr_steps": 20, "retry": 1}

``train.rollback.skip_batches`` null skips the batches from the checkpoint through the diverged step (37 + 1 - 30
= 8 above), so the run never trains on the data it diverged on again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from normtrain.util.events import event_row  # noqa: F401 (moved to util/, still importable here)


class RollBack(Exception):  # noqa: N818 - a signal to the loop, not an error
    """Raised where the divergence flag is read when the policy allows a rollback; ``Trainer.loop`` catches it."""

    def __init__(self, diverged_at: int):
        super().__init__(f"diverged at step {diverged_at}: rolling back")
        self.diverged_at = diverged_at


@dataclass
class RollbackPolicy:
    enabled: bool
    skip_batches: int | None = None
    max_retries: int = 3
    lr_factor: float = 1.0
    lr_steps: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_config(cls, train: Any) -> RollbackPolicy:
        r = train.rollback
        return cls(enabled=train.on_divergence == "rollback", skip_batches=r.skip_batches,
                   max_retries=r.max_retries, lr_factor=r.lr_factor, lr_steps=r.lr_steps)

    def allows(self) -> bool:
        """Whether the next divergence rolls back (rather than ending the run as diverged)."""
        return self.enabled and len(self.records) < self.max_retries

    def batches_to_skip(self, diverged_at: int, restored_step: int) -> int:
        return self.skip_batches if self.skip_batches is not None else max(0, diverged_at + 1 - restored_step)

    def record(self, diverged_at: int, restored_step: int, checkpoint: str, skipped: int) -> dict[str, Any]:
        entry = {"step": diverged_at, "restored_step": restored_step, "checkpoint": checkpoint,
                 "skipped_batches": skipped, "lr_factor": self.lr_factor, "lr_steps": self.lr_steps,
                 "retry": len(self.records) + 1}
        self.records.append(entry)
        return entry

    def describe(self, record: dict[str, Any]) -> str:
        """The log line of a rollback ``record``."""
        lowered = f", lr × {record['lr_factor']} for {record['lr_steps']} steps" if record["lr_steps"] else ""
        return (f"normtrain: diverged at step {record['step']}; rolled back to step {record['restored_step']} "
                f"({record['checkpoint']}), skipping {record['skipped_batches']} batches{lowered} (rollback "
                f"{record['retry']} of {self.max_retries})")

    def lr_scale(self, step: int) -> float:
        """The factor on the scheduled lr at ``step``: ``lr_factor`` for ``lr_steps`` steps after the last
        rollback, 1 otherwise (derived from the record, so a resumed run keeps it)."""
        if not self.records:
            return 1.0
        last = self.records[-1]
        return last["lr_factor"] if last["restored_step"] <= step < last["restored_step"] + last["lr_steps"] else 1.0
