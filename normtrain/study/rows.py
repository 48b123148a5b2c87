"""A trained run as one row of a study's table: its status, losses, labels, provenance and validation curve.

Every study (a user's ablation, a reproduction) reads its run folders through ``run_row``; a curve is kept whole in
one CSV cell (``curve_text``), so runs.csv alone is enough to redraw every figure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from normtrain.compare.runs import Run
from normtrain.study.grid import code_of
from normtrain.study.plan import Plan
from normtrain.training.outcome import Labels, labels


def run_row(run: Run) -> dict[str, Any]:
    """The columns every trained run gives (an experiment adds its own)."""
    s = run.summary
    steps, losses = run.series("val/loss")
    return {"status": s.get("status"), "diverged_at_step": s.get("diverged_at_step"),
            "final_val_loss": s.get("final_val_loss"), "best_val_loss": s.get("best_val_loss"),
            "initial_val_loss": losses[0].item() if losses.size else None,
            "unigram_val_loss": s.get("unigram_val_loss"),
            **label_columns(run_labels(s, list(zip(steps.tolist(), losses.tolist(), strict=True)))),
            "tail_drop": (s.get("loss_trend") or {}).get("tail_drop"),
            "wall_time_s": s.get("wall_time_s"), "started_at": s.get("started_at"), "device": s.get("device"),
            **execution_of(s.get("execution")), **code_of(s.get("code")), "val_curve": curve_text(steps, losses)}


def run_labels(summary: dict[str, Any], curve: list[tuple[int, float]]) -> Labels:
    """A run's labels (normtrain/training/outcome.py) from its validation curve, computed here for every run, so
    runs trained before the labels existed get them too (their few evaluations may leave ``undertrained``
    unknown)."""
    last = ((summary.get("config") or {}).get("train") or {}).get("max_steps") or summary.get("steps") or 0
    return labels(curve, summary.get("unigram_val_loss"), int(last), diverged=summary.get("status") == "diverged")


def label_columns(found: Labels) -> dict[str, Any]:
    """The runs.csv columns of a run's labels."""
    return {"collapsed": found.collapsed, "above_line": found.above_line, "plateaued": found.plateaued,
            "left_line_at_step": found.left_line_at_step, "undertrained": found.undertrained,
            "val_quarter_drop": found.quarter_drop}


def execution_of(record: dict | None) -> dict[str, Any]:
    """A run's ``threads``, ``deterministic`` and ``device_name`` columns (normtrain/util/provenance.py; empty for
    runs made before they were recorded)."""
    record = record or {}
    return {"threads": record.get("threads"), "deterministic": record.get("deterministic_algorithms"),
            "device_name": record.get("device_name")}


def read_rows(plan: Plan, done: list[tuple[dict[str, str], Run]], row: Callable[[Run, dict[str, str]], dict]
              ) -> list[dict[str, Any]]:
    """One row per trained run, with progress: reading a run's logs is quick, but an experiment's row may score
    the trained model (BatchNorm's two ways), which takes seconds a run."""
    from normtrain.util.progress import make_progress

    plan.phase(f"reading {len(done)} trained runs")
    bar = make_progress(len(done), 0, f"{plan.name}: reading runs", plan.progress, every_s=30.0, unit="run")
    rows = []
    try:
        for combo, run in done:
            rows.append({**combo, **row(run, combo)})
            bar.update(1)
    finally:
        bar.close()
    return rows


def curve_text(steps, values) -> str:
    """A logged series as ``"step:value step:value ..."``, one CSV cell (runs.csv keeps the whole curve)."""
    return " ".join(f"{int(s)}:{v:.5g}" for s, v in zip(steps, values, strict=True))


def curve_points(text: str) -> list[tuple[float, float]]:
    """``curve_text`` read back."""
    return [(float(s), float(v)) for s, v in (p.split(":") for p in text.split())]
