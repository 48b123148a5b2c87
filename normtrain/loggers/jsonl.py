"""``metrics.jsonl``: the run's own record, written whatever other loggers are chosen."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from normtrain.atomic import atomic_write, json_safe


class JsonlLogger:
    """One JSON object per logged step, flushed as it is written."""

    def __init__(self, path: str | os.PathLike, start_step: int = 0):
        """``start_step`` > 0 continues a resumed run: rows from that step on (logged after the
        checkpoint, before the stop) are dropped, so no step appears twice."""
        self.path = Path(path)
        if self.path.exists():
            kept = [line for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True)
                    if _step_of(line) is not None and _step_of(line) < start_step]
            atomic_write(self.path, lambda f: f.write("".join(kept).encode()))
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in finish()

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self._file.write(json.dumps(json_safe({"step": step, **metrics}), allow_nan=False) + "\n")
        self._file.flush()

    def finish(self, summary: dict[str, Any]) -> None:
        self._file.close()


def _step_of(line: str) -> int | None:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None  # a line cut short by a crash
