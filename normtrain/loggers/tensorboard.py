"""``logger=tensorboard``: event files in ``<run dir>/tensorboard/`` (``tensorboard --logdir <run dir>``).

Written with tensorboardX, whose only dependencies are protobuf and numpy; ``torch.utils.tensorboard`` would
need the whole ``tensorboard`` package (grpcio, werkzeug, markdown, its data server) just to write files.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from normtrain.loggers.base import LAYER_KEY, finite_numbers
from normtrain.util.events import event_row


class TensorBoardLogger:
    """Every finite metric as a scalar under its own key (``train/loss``, ``grad_norm/layer_3``) against step,
    so TensorBoard files them in one section per prefix; and, in the Custom Scalars tab, one chart per per-layer
    family with a line per block. A resumed run purges the events logged after its checkpoint."""

    def __init__(self, run_dir: str | os.PathLike, start_step: int = 0):
        self.logdir = str(Path(run_dir) / "tensorboard")
        self.writer = self._open(start_step)
        self.families: list[str] = []

    def _open(self, purge_step: int):
        """A writer whose first event hides every earlier event at or after ``purge_step`` (TensorBoard's way of
        continuing a run from a checkpoint)."""
        from tensorboardX import SummaryWriter

        return SummaryWriter(logdir=self.logdir, purge_step=purge_step if purge_step > 0 else None)

    def rollback(self, record: dict[str, Any]) -> None:
        """The abandoned attempt's points are purged (TensorBoard draws one curve, as trained), and the rollback is
        noted at the restored step: a text entry and ``rollback/*`` scalars."""
        self.writer.close()
        step = record["restored_step"]
        self.writer = self._open(max(step, 1))
        self.writer.add_text("rollback", json.dumps(record), global_step=step)
        for key, value in finite_numbers(event_row(record)).items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def log(self, metrics: dict[str, Any], step: int) -> None:
        values = finite_numbers(metrics)
        for key, value in values.items():
            self.writer.add_scalar(key, value, global_step=step)
        families = sorted({m["prefix"] for k in values if (m := LAYER_KEY.match(k))})
        if [f for f in families if f not in self.families]:
            self.families = sorted({*self.families, *families})
            self.writer.add_custom_scalars({"per layer": {
                f: ["Multiline", [rf"^{re.escape(f)}/layer_\d+$"]] for f in self.families}})
        self.writer.flush()

    def finish(self, summary: dict[str, Any]) -> None:
        shown = {k: summary.get(k) for k in ("status", "steps", "diverged_at_step", "final_val_loss", "best_val_loss",
                                               "n_params", "wall_time_s", "rollbacks", "restarts")}
        self.writer.add_text("summary", f"```\n{json.dumps(shown, indent=1)}\n```", global_step=summary.get("steps"))
        self.writer.close()
