"""``logger=csv``: ``metrics.csv``, the rows of metrics.jsonl as a table for spreadsheets and pandas."""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

from normtrain.loggers.base import before_resume
from normtrain.util.atomic import atomic_write
from normtrain.util.events import event_row


def _cell(value: Any) -> Any:
    """Empty for what metrics.jsonl writes as null (non-finite); numbers at full precision."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return value


class CsvLogger:
    """One row per logged row of metrics.jsonl (rollback event rows too), one column per key in the order first
    logged. A key that first appears later
    (``tokens_per_s`` after step 0, a diagnostic switched on at a resume) adds a column: the file is rewritten
    with the wider header, atomically, which happens a few times per run at most."""

    def __init__(self, path: str | os.PathLike, start_step: int = 0):
        self.path = Path(path)
        self.columns: list[str] = ["step"]
        rows: list[dict[str, str]] = []
        if self.path.exists():  # a resumed run: keep the rows before the checkpoint's step
            with open(self.path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                self.columns = list(reader.fieldnames or ["step"])
                rows = before_resume([r for r in reader if _int(r.get("step")) is not None], start_step,
                                     lambda r: None if r.get("event") else _int(r["step"]))
        self._rewrite(rows)
        self._file = open(self.path, "a", newline="", encoding="utf-8")  # noqa: SIM115 - closed in finish()

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        text = io.StringIO()
        writer = csv.DictWriter(text, self.columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write(self.path, lambda f: f.write(text.getvalue().encode("utf-8")))

    def log(self, metrics: dict[str, Any], step: int) -> None:
        row = {"step": step, **{k: _cell(v) for k, v in metrics.items()}}
        if new := [k for k in row if k not in self.columns]:
            self._file.close()
            with open(self.path, newline="", encoding="utf-8") as f:
                old = list(csv.DictReader(f))
            self.columns += new
            self._rewrite(old)
            self._file = open(self.path, "a", newline="", encoding="utf-8")  # noqa: SIM115
        csv.DictWriter(self._file, self.columns, restval="").writerow(row)
        self._file.flush()

    def rollback(self, record: dict[str, Any]) -> None:
        """The rollback's event row (``event`` = rollback, at the diverged step), as in metrics.jsonl."""
        self.log(event_row(record), record["step"])

    def finish(self, summary: dict[str, Any]) -> None:
        self._file.close()


def _int(text: str | None) -> int | None:
    try:
        return int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
