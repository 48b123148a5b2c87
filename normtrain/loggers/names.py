"""Names a dashboard shows: a sweep's group (its date and name) and each job's run name (unique, readable).

A multirun's default folder is ``multirun/<date>/<time>``: its name alone (the time) made two sweeps started
at the same minute on different days share a W&B group. The group is ``<date>_<sweep folder name>`` plus the
experiment preset, if any: ``2026-05-04_12-30-00``, ``2026-05-04_depth``, ``2026-05-04_12-30-00_deepnet_depth``.
A job's run name is its job number, the run label and the values the sweep varied that the label does not
show, e.g. ``7_post-rmsnorm-L6 seed=1 lr=0.01``: seeds of one configuration no longer share a name.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from normtrain.util.dotted import under

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
IN_LABEL = ("placement", "norm", "model.n_layers")  # already in <placement>-<norm>-L<layers>
SWEEP_SYNTAX = re.compile(r",|^(range|choice|interval|glob)\(")


@dataclass
class SweepJob:
    """What Hydra knows of a job of a multirun."""

    sweep_dir: Path
    num: int
    overrides: list[str] = field(default_factory=list)  # this job's, as key=value
    swept: list[str] = field(default_factory=list)  # the keys the sweep varies
    experiment: str | None = None


def sweep_job() -> SweepJob | None:
    """This job's place in its multirun, or None for a single run (or outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
    except ImportError:
        return None
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    hc = HydraConfig.get()
    typed = [_split(o) for o in _sweep_overrides(Path(hc.sweep.dir))]
    swept = [key for key, value in typed if SWEEP_SYNTAX.search(value)]
    swept += [str(k) for k in (hc.sweeper.get("params") or {})]
    experiment = hc.runtime.choices.get("experiment")
    return SweepJob(Path(hc.sweep.dir), int(hc.job.num), list(hc.overrides.task), swept,
                    None if experiment in (None, "null") else str(experiment))


def _split(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def _sweep_overrides(sweep_dir: Path) -> list[str]:
    """The sweep's command-line overrides as typed (``norm=layernorm,rmsnorm``), from its multirun.yaml."""
    try:
        import yaml

        config = yaml.safe_load((sweep_dir / "multirun.yaml").read_text(encoding="utf-8"))
        return [str(o) for o in config["hydra"]["overrides"]["task"]]
    except Exception:  # no file yet, or not Hydra's: the sweeper params still name the swept keys
        return []


def group_name(job: SweepJob) -> str:
    """``<date>_<sweep folder name>[_<experiment>]``; the date from the folder, else from when it was made."""
    name = job.sweep_dir.name
    date = job.sweep_dir.parent.name if DATE.fullmatch(job.sweep_dir.parent.name) else None
    if date is None and not DATE.match(name):
        made = job.sweep_dir / "multirun.yaml"
        date = time.strftime("%Y-%m-%d", time.localtime(made.stat().st_mtime if made.exists() else None))
    group = f"{date}_{name}" if date else name
    return f"{group}_{job.experiment}" if job.experiment and job.experiment not in group else group


def run_name(label: str, job: SweepJob) -> str:
    """``<job number>_<label>`` and each swept value the label does not already show (``seed=1``)."""
    shown = [f"{key.rsplit('.', 1)[-1]}={value}" for key, value in map(_split, job.overrides)
             if key in job.swept and not under(key, IN_LABEL)]
    return " ".join([f"{job.num}_{label}", *shown])
