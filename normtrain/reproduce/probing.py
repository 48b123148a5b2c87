"""``normtrain-probe`` on a reproduction's trained runs: which blocks the model uses, and each norm's curve.

The experiments about the 2025 papers (curse_of_depth, dyt) measure trained models, not only their logs: the eval
loss with each block skipped, block input/output cosine, the stream's rms, each norm's input → output curve
(normtrain/probe/). The probe runs after training, ``plan.jobs`` runs at a time like the training runs, and its
``probe.json`` stays in the run folder (``RUN_DIR/probe/``), where normtrain-compare's report finds it. A probe
written after its run finished is reused, so a rerun only analyses again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from normtrain.compare.runs import PROBE_DIR, PROBE_JSON
from normtrain.study.grid import made_after_run, map_grid
from normtrain.study.plan import Plan

PROBE_FILE = f"{PROBE_DIR}/{PROBE_JSON}"  # in the run folder: with it the checkpoint is no longer needed


def probe_path(run_dir: Path) -> Path:
    return run_dir / PROBE_FILE


def probe_runs(plan: Plan, combos: list[dict[str, str]]) -> list[dict[str, Any] | None]:
    """The probe of each combo's run, in the combos' order; None where the run left nothing to probe (a run that
    diverged without a finite checkpoint). The runs must have kept their checkpoints."""
    todo = [c for c in combos if not fresh(plan.run_dir(c))]
    map_grid(plan, _probe, todo, "probes of trained models", "probe")
    found = []
    for combo in combos:
        path = probe_path(plan.run_dir(combo))
        found.append(json.loads(path.read_text()) if path.is_file() else None)
    return found


def fresh(run_dir: Path) -> bool:
    """A probe of this run is there and younger than the run's summary (a retrained run is probed again)."""
    return made_after_run(run_dir, PROBE_FILE)


def _probe(_overrides: list[str], run_dir: str) -> None:
    from normtrain.probe import probe
    from normtrain.util.errors import NormtrainError

    probe_path(Path(run_dir)).unlink(missing_ok=True)  # a stale probe of an earlier run of this folder never counts
    try:
        probe(run_dir)
    except NormtrainError:  # nothing to probe (diverged without a finite checkpoint): the analysis counts it missing
        return


def per_layer(probe: dict[str, Any] | None, key: str) -> list[float]:
    """One per-block number of a probe (``skip_delta``, ``block_cos``, ``act_rms``, ...), block 0 first."""
    return [layer[key] for layer in probe["layers"]] if probe else []


def halves(values: list[float]) -> tuple[float | None, float | None]:
    """The mean over the early half of the blocks and over the deep half (the middle block of an odd count goes to
    the deep half)."""
    if len(values) < 2:
        return None, None
    mid = len(values) // 2
    early, deep = values[:mid], values[mid:]
    return sum(early) / len(early), sum(deep) / len(deep)


def profile_text(values: list[float]) -> str:
    """A per-block profile as one CSV cell (``runs.csv`` keeps it)."""
    return " ".join(f"{v:.5g}" for v in values)


def profile_values(text: str | None) -> list[float]:
    return [float(v) for v in text.split()] if text else []
