"""Event rows: a row of metrics that marks an event of the run (a rollback) instead of a training step. The loop
writes them, every logger knows them, so they sit below both."""

from __future__ import annotations

from typing import Any


def event_row(record: dict[str, Any]) -> dict[str, Any]:
    """The metrics row of a rollback (logged at its diverged step): ``event`` tells readers it is no training
    row; its values are ``rollback/<key>``."""
    return {"event": "rollback", **{f"rollback/{k}": v for k, v in record.items() if k != "step"}}
