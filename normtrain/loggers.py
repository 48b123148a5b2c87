"""Metric sinks, one class per backend: a local JSONL file (always) and Weights & Biases.

Every sink has ``log(metrics, step)`` and ``finish(summary)``; ``finish`` is called even when the
run fails, so W&B runs are always closed and the JSONL file is always flushed.
"""

from __future__ import annotations

import json
import netrc
import os
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

from normtrain.atomic import atomic_write, json_safe


class JsonlLogger:
    """``metrics.jsonl``: one JSON object per logged step, flushed as it is written."""

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


def wandb_mode(mode: str) -> str:
    """``auto`` -> online when an API key is configured (env or ``wandb login``), else offline."""
    if mode != "auto":
        return mode
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if os.environ.get("WANDB_API_KEY"):
        return "online"
    try:
        if netrc.netrc().authenticators("api.wandb.ai"):
            return "online"
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        pass
    return "offline"


class WandbLogger:
    """A W&B run; metrics keyed by ``step``, per-layer keys grouped into panels by their prefix."""

    def __init__(self, *, run_dir: Path, project: str, entity: str | None, group: str | None, name: str,
                 tags: list[str], job_type: str, mode: str, config: dict[str, Any]):
        import wandb

        self._wandb = wandb
        # one W&B run per run folder: a resumed run continues the same W&B run
        id_file = Path(run_dir) / "wandb_run_id"
        run_id = id_file.read_text().strip() if id_file.is_file() else uuid.uuid4().hex[:12]
        id_file.write_text(run_id)
        kwargs = dict(project=project, entity=entity, group=group, name=name, tags=tags, job_type=job_type,
                      config=config, dir=str(run_dir), reinit="finish_previous", id=run_id, resume="allow",
                      settings=wandb.Settings(console="off", silent=True))
        mode = wandb_mode(mode)
        try:
            self.run = wandb.init(mode=mode, **kwargs)
        except Exception as err:  # a network or auth failure must not cost the run
            if mode != "online":
                raise
            warnings.warn(f"W&B online init failed ({err}); logging offline instead", stacklevel=2)
            self.run = wandb.init(mode="offline", **kwargs)
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log({"step": step, **metrics})

    def finish(self, summary: dict[str, Any]) -> None:
        keys = ("status", "steps", "diverged_at_step", "final_val_loss", "best_val_loss", "n_params", "alpha",
                "beta", "wall_time_s")
        self.run.summary.update({k: summary.get(k) for k in keys})
        offline = self.run.settings.mode == "offline"
        wandb_dir = Path(self.run.dir).parent.parent  # <run_dir>/wandb/offline-run-*/files
        self.run.finish(exit_code=0 if summary.get("status") in ("completed", "diverged") else 1)
        if offline:  # a resumed run has one offline folder per process that wrote it: sync them all
            folders = " ".join(str(p) for p in sorted(wandb_dir.glob("offline-run-*")))
            print(f"W&B run saved offline; upload it with: wandb sync {folders}", file=sys.stderr)


class Loggers:
    """Fans each call out to every sink."""

    def __init__(self, sinks: list):
        self.sinks = sinks

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for sink in self.sinks:
            sink.log(metrics, step)

    def finish(self, summary: dict[str, Any]) -> None:
        for sink in self.sinks:
            sink.finish(summary)
