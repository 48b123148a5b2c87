"""How a reproduction is measured: the experiment's class, the row each run gives, and what the analysis found.

An experiment's settings live in ``configs/experiment/NAME.yaml`` (a ``@package _global_`` preset)
and its grid in that file's ``hydra.sweeper.params`` (normtrain/study/plan.py); the runs are trained by
normtrain/study/grid.py. ``--scale gpu`` grows the model and spends a budget of
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
from normtrain.study import branches
from normtrain.study.grid import train_grid
from normtrain.study.plan import Plan
from normtrain.study.preregistration import Registration
from normtrain.study.rows import (  # noqa: F401 (the experiments import them from here)
    curve_points,
    curve_text,
    execution_of,
    label_columns,
    read_rows,
    run_labels,
    run_row,
)

PAIRS_AT_ONCE = 3  # T runs per job in one group of ``train_in_pairs`` (a pool of workers starts per group)
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
    # a file a T run's checkpoint is turned into, all the analysis reads of it (curse_of_depth: the probe): with it a
    # T run is reused and packed without its checkpoint (``make_stand_ins``), and the T/2 runs keep none
    checkpoint_stand_in: ClassVar[str | None] = None
    # the stand-in is made of both budgets' runs, pair by pair as they finish (batchnorm_leak: the scores): the T/2
    # runs keep their checkpoints until then, and a session's end leaves pairs that --pack carries as they are
    stand_in_of_pairs: ClassVar[bool] = False
    half_budget: ClassVar[bool] = False  # protocol v5: every run measured at T/2 too (normtrain/study/branches.py)
    lr_tuned: ClassVar[bool] = True  # the lr axis is tuned (each arm judged at its own best): --quick runs one lr
    # per arm; False where the lrs are the design itself (a sensitivity over the grid, multiples of a best lr)

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
        if self.half_budget:
            return self.measure_both(plan, runs)
        try:
            return self.train_rows(runs)
        finally:
            plan.reused_s = runs.reused_s  # a copy counted the reused runs' time: the write-up reads ``plan``

    def budgets(self, runs: Plan) -> tuple[Plan, branches.BranchPlan, int]:
        """``half_budget``'s two plans: the T runs (keeping the checkpoint their branches leave from) and the T/2
        runs in ``RUNS_half`` beside (a WSD decay branch each, or a whole run under another schedule), and T."""
        cfg = runs.compose(runs.combos()[0])
        (steps, branch_step), full = branches.reproduction_half(cfg), int(cfg.train.max_steps)
        t = branches.with_branch_point(runs, branch_step)
        half = branches.branch_plan(t, [*runs.base, f"train.max_steps={steps}", *(
            ["train.keep_ckpt_at=[]", "train.ckpt_format=full"] if branch_step is not None else [])], branch_step,
            branches.half_runs_dir(runs.runs_dir))
        return t, half, full

    def measure_both(self, plan: Plan, runs: Plan) -> list[dict[str, Any]]:
        """``half_budget``: every run at T, then at T/2 (``budgets``); each row says its budget (``steps``). A T run
        that diverged before the branch step counts as diverged at T/2 too."""
        t, half, full = self.budgets(runs)
        steps, reused = full // 2, None
        try:
            if plan.scale == "cpu" and half.branch_step is not None:
                reused = self.train_in_pairs(t, half)
            t_rows = [{**r, branches.STEPS: full} for r in self.train_rows(t)]
            axes = list(runs.grid)
            gone = branches.gone_before_branch(t_rows, axes, half.branch_step)
            half_rows = read_rows(half, train_grid(branches.skipping(half, gone), self.half_checkpoints,
                                                   self.checkpoint_stand_in), self.row)
            lost = branches.lost_at_half(t_rows, axes, gone)
            return t_rows + [{**r, branches.STEPS: steps} for r in half_rows + lost]
        finally:
            plan.reused_s = t.reused_s + half.reused_s if reused is None else reused

    def train_in_pairs(self, t: Plan, half: branches.BranchPlan) -> float:
        """The T runs ``PAIRS_AT_ONCE`` per job at a time, each group's T/2 branches right after: a CPU session
        that ends mid-grid leaves finished pairs, which ``--pack`` carries to the next machine in git
        (normtrain/reproduce/carry.py), not T runs whose branches need a checkpoint the next machine lacks (at
        --scale gpu the runs stay in the results folder, and the plan's time model assumes one pool a phase). The
        runs reused from an earlier invocation: their own time."""
        combos, axes = t.combos(), list(t.grid)
        size, reused = PAIRS_AT_ONCE * max(1, t.jobs), 0.0
        for start in range(0, len(combos), size):
            points = {branches.point(c, axes) for c in combos[start:start + size]}
            if len(combos) > size:
                t.phase(f"runs {start + 1}–{start + len(points)} of {len(combos)} at T, then their T/2 branches")
            part_t, part_half = branches.only(t, points), branches.only(half, points)
            done = train_grid(part_t, self.keep_checkpoints, self.checkpoint_stand_in)
            gone = branches.gone_before_branch([{**c, "status": run.status, "diverged_at_step": run.summary.get(
                "diverged_at_step")} for c, run in done], axes, half.branch_step)
            train_grid(branches.skipping(part_half, gone), self.half_checkpoints, self.checkpoint_stand_in)
            if self.stand_in_of_pairs:
                self.make_stand_ins(part_t, part_t.combos())
            reused += part_t.reused_s + part_half.reused_s
        return reused

    def train_rows(self, runs: Plan) -> list[dict[str, Any]]:
        """Train ``runs`` (the T runs of a ``half_budget`` experiment) and give one row per run; an experiment that
        measures the trained models further (a probe) extends it."""
        return read_rows(runs, train_grid(runs, self.keep_checkpoints, self.checkpoint_stand_in), self.row)

    @property
    def half_checkpoints(self) -> bool:
        """Whether the T/2 runs keep their checkpoints: where the analysis reads them (batchnorm_leak scores both
        budgets), not where a stand-in of the T runs is all it reads; until their stand-in is made
        (``stand_in_of_pairs``)."""
        return self.keep_checkpoints and (self.checkpoint_stand_in is None or self.stand_in_of_pairs)

    def make_stand_ins(self, runs: Plan, combos: list[dict[str, str]]) -> None:
        """Write ``checkpoint_stand_in`` in these finished T runs' folders (and their T/2 runs', where
        ``stand_in_of_pairs``) from their checkpoints (before --pack leaves the checkpoints behind)."""
        raise NotImplementedError(f"{self.name} declares no checkpoint stand-in")

    def committed_row(self, row: dict[str, str]) -> dict[str, str] | None:
        """A committed run of an earlier design, in today's grid axes, for ``--plan-only``'s timing (None: it
        times nothing here). By default the row as it is; an experiment whose axes were renamed maps them."""
        return row

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        return run_row(run)

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
