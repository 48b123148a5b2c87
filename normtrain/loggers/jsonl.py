"""``metrics.jsonl``: the run's own record, written whatever other loggers are chosen."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from normtrain.loggers.base import before_resume
from normtrain.util.atomic import atomic_write, json_safe
from normtrain.util.events import event_row


class JsonlLogger:
    """One JSON object per logged step, flushed as it is written.

    The file is only ever appended to, so it keeps what happened. After a rollback (normtrain/training/rollback.py) it
    holds the abandoned attempt's rows (the spike itself), then the rollback's event row (``"event":
    "rollback"``, at the diverged step), then the rows trained again from the restored step: a step may appear
    more than once, and its last row is the one the run kept. Readers that draw the run's curve skip event rows
    and keep the last row of each step (normtrain-compare does).
    """

    def __init__(self, path: str | os.PathLike, start_step: int = 0):
        """``start_step`` > 0 continues a resumed run: the rows at the file's end from that step on (logged after
        the checkpoint, before the stop) are dropped, so no step appears twice; a line cut short is dropped."""
        self.path = Path(path)
        if self.path.exists():
            lines = [line for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True)
                     if _step_of(line) is not None]
            kept = before_resume(lines, start_step, _training_step)
            atomic_write(self.path, lambda f: f.write("".join(kept).encode()))
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in finish()

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self._file.write(json.dumps(json_safe({"step": step, **metrics}), allow_nan=False) + "\n")
        self._file.flush()

    def rollback(self, record: dict[str, Any]) -> None:
        self.log(event_row(record), record["step"])

    def finish(self, summary: dict[str, Any]) -> None:
        self._file.close()


def _step_of(line: str) -> int | None:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None  # a line cut short by a crash


def _training_step(line: str) -> int | None:
    """The step of a training row; None for an event row (a rollback's)."""
    row = json.loads(line)
    return None if "event" in row else int(row["step"])
