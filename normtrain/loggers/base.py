"""The one interface every metric sink has, and the fan-out the training loop talks to."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

Row = TypeVar("Row")

LAYER_KEY = re.compile(r"^(?P<prefix>.+)/layer_(?P<index>\d+)$")  # a per-layer metric: grad_norm/layer_3
HEAD_KEY = re.compile(r"^(?P<prefix>.+)/layer_(?P<layer>\d+)/head_(?P<head>\d+)$")  # attn_logit_max/layer_3/head_1


class Logger(Protocol):
    """A backend: ``log`` one row of metrics at a step; ``rollback`` when the run went back to a checkpoint (the
    record of normtrain/training/rollback.py: the rows logged next restart at its ``restored_step``); ``finish`` once at
    the end, even when the run fails (so files are flushed and remote runs closed)."""

    def log(self, metrics: dict[str, Any], step: int) -> None: ...

    def rollback(self, record: dict[str, Any]) -> None: ...

    def finish(self, summary: dict[str, Any]) -> None: ...


def before_resume(rows: Sequence[Row], start_step: int, step_of: Callable[[Row], int | None]) -> list[Row]:
    """The rows a resumed run keeps: all but the trailing ones at or after ``start_step`` (logged after its
    checkpoint). Only trailing ones, and never past an event row (``step_of`` None): a rollback's event row and
    the abandoned attempt's rows before it stay, as a rollback is checkpointed as soon as it happens."""
    end = len(rows)
    while end and (step := step_of(rows[end - 1])) is not None and step >= start_step:
        end -= 1
    return list(rows[:end])


def finite_numbers(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics a plotting backend can draw: finite numbers (metrics.jsonl writes the others as null)."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class Loggers:
    """Fans each call out to every sink; ``finish`` reaches every sink even if one of them fails."""

    def __init__(self, sinks: list[Logger]):
        self.sinks = sinks

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for sink in self.sinks:
            sink.log(metrics, step)

    def rollback(self, record: dict[str, Any]) -> None:
        for sink in self.sinks:
            sink.rollback(record)

    def finish(self, summary: dict[str, Any]) -> None:
        failed: BaseException | None = None
        for sink in self.sinks:
            try:
                sink.finish(summary)
            except BaseException as err:  # the others still close; the first error is raised afterwards
                failed = failed or err
        if failed is not None:
            raise failed
