"""How a reproduction is measured: the experiment's class, the row each run gives, and what the analysis found.

An experiment's settings live in ``configs/experiment/NAME.yaml`` (a ``@package _global_`` preset)
and its grid in that file's ``hydra.sweeper.params`` (normtrain/reproduce/plan.py); the runs are trained by
normtrain/reproduce/grid.py. ``--scale gpu`` grows the model and spends a budget of
minutes on steps and seeds (normtrain/reproduce/gpu_plan.py); ``--smoke`` shrinks everything to a few steps.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig

from normtrain.compare.runs import Run
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.grid import code_of, train_grid
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.preregistration import Registration
from normtrain.training.outcome import Labels, labels

PLACEMENT_ORDER = ("post", "pre", "deepnorm", "peri", "reorder", "mix", "subln", "admin", "rezero",
                   "none")  # the order of rows and lines in every table and figure


class Experiment:
    """One reproduction: the runs that test a paper's claim, and how to measure them.

    What the experiment claims and which checks decide it are declared apart, before the runs, in
    ``normtrain/reproduce/preregistered/NAME.py`` (``registration``); a subclass sets the class attributes,
    ``measure`` (default: train every run of the grid) and ``analyse`` (rows in, ``Findings`` out: the table,
    every checked quantity per condition and seed, the figures).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    paper: ClassVar[str]  # short citation for tables, e.g. "Xiong et al. 2020, Fig. 3"
    reference: ClassVar[str]  # paper and figure/table, in Markdown
    method: ClassVar[str]  # how we test it, in Markdown
    gpu_recipe: ClassVar[Recipe] = Recipe()  # how the model grows at --scale gpu (normtrain/reproduce/gpu_scale.py)
    keep_checkpoints: ClassVar[bool] = False

    def keeps(self, combo: dict[str, str]) -> bool:
        """Which runs of the grid's full product the experiment runs (a plain ``-m`` sweep runs them all)."""
        return True

    def keeps_at(self, scale: str) -> Callable[[dict[str, str]], bool]:
        """``keeps`` at a scale: an experiment whose CPU budget drops secondary grid points that its GPU scale
        runs (issue 37: compute goes to the primary claim first) narrows it here; by default the same at both."""
        return self.keeps

    @property
    def registration(self) -> Registration:
        return importlib.import_module(f"normtrain.reproduce.preregistered.{self.name}").REGISTRATION

    def runs_plan(self, plan: Plan) -> Plan:
        """The plan the runs train under: ``plan``, or one that adds per-run overrides the grid cannot state (the
        write-up describes the runs from it)."""
        return plan

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        """Train every run of the grid and return one row per run (its axes plus ``self.row``)."""
        runs = self.runs_plan(plan)
        try:
            return read_rows(runs, train_grid(runs, self.keep_checkpoints), self.row)
        finally:
            plan.reused_s = runs.reused_s  # a copy counted the reused runs' time: the write-up reads ``plan``

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
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

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        raise NotImplementedError


@dataclass
class Findings:
    """What the analysis measured; the checks are applied to ``measured`` by the declared rules."""

    table: str  # Markdown
    measured: dict[str, dict[str, dict[str, float | None]]]  # quantity -> condition -> seed -> value
    figures: dict[str, Callable[[Path], None]]  # file name -> function drawing it to that path
    key: str  # the headline, one line
    ours: str  # our number for the top table, with its spread and n
    notes: list[str] = field(default_factory=list)
    csv: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # more measurements than runs.csv holds
    repeats: frozenset[str] = frozenset()  # quantities whose values are repeats of one measurement, not seeds

    def unit(self, quantity: str) -> str:
        return "repeats" if quantity in self.repeats else "seeds"


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


def validation_batches(cfg: DictConfig) -> list[tuple[Any, Any]]:
    """The run's fixed validation windows (``train.eval_windows``, or the global batch × eval_batches) in batches
    of ``cfg.train.batch_size``: exactly the set the training loop evaluates on (one process)."""
    from normtrain.config import global_batch
    from normtrain.data import eval_starts, eval_window_count, load_corpus, window_batches

    d, t, seq_len = cfg.data, cfg.train, cfg.model.seq_len
    corpus = load_corpus(d.name, d.path, d.val_fraction, d.cache_dir, progress=False)
    n = eval_window_count(t.eval_windows, global_batch(t, 1), t.eval_batches, 1)
    starts = eval_starts(len(corpus.val), seq_len, n)
    return window_batches(corpus.val, starts, seq_len, t.batch_size)


def present(rows: list[dict[str, Any]], key: str, order: tuple[str, ...]) -> list[str]:
    """The values of ``key`` in ``order`` that the rows hold (a smoke run or a narrowed grid holds fewer)."""
    return [v for v in order if any(r[key] == v for r in rows)]


def curve_text(steps, values) -> str:
    """A logged series as ``"step:value step:value ..."``, one CSV cell (runs.csv keeps the whole curve)."""
    return " ".join(f"{int(s)}:{v:.5g}" for s, v in zip(steps, values, strict=True))


def curve_points(text: str) -> list[tuple[float, float]]:
    """``curve_text`` read back."""
    return [(float(s), float(v)) for s, v in (p.split(":") for p in text.split())]
