"""How a reproduction runs: the grid from its Hydra file, the runs, and what they measured.

An experiment's settings live in ``configs/experiment/NAME.yaml`` (a ``@package _global_`` preset)
and its grid in that file's ``hydra.sweeper.params``, so ``normtrain -m experiment=NAME`` and
``normtrain-reproduce NAME`` run the same jobs. ``--scale gpu`` grows the model and spends a budget of
minutes on steps and seeds (normtrain/reproduce/gpu_plan.py); ``--smoke`` shrinks everything to a few steps.

``--jobs N`` runs N of the grid's runs at a time, each in its own process with one torch thread: the models
here are so small that a second thread buys little, while two single-threaded runs use both cores of a small
machine fully (and a busy machine does not stall a run's threads waiting for each other).
"""

from __future__ import annotations

import importlib
import itertools
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig

from normtrain.compare.runs import Run, load_run
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.preregistration import Registration
from normtrain.training.outcome import Labels, labels

SCALES = ("cpu", "gpu")
SEED_AXIS = "train.seed"
SMOKE_OVERRIDES = ["train.max_steps=4", "train.eval_every=0", "train.eval_batches=1", "train.eval_windows=8",
                   "monitor.every=2"]
PLACEMENT_ORDER = ("post", "pre", "deepnorm", "peri", "reorder", "mix", "subln", "admin", "rezero",
                   "none")  # the order of rows and lines in every table and figure


@dataclass
class Plan:
    """One invocation: the grid expanded into runs, and where they and the write-up go."""

    name: str
    scale: str
    smoke: bool
    base: list[str]  # overrides every run gets, the experiment preset first
    grid: dict[str, list[str]]  # axis -> values, in the YAML's order
    runs_dir: Path
    out: Path
    command: str = ""  # how to run it again, for the write-up
    fresh: bool = False
    progress: bool = True
    reused_s: float = 0.0  # wall time of the runs reused from an earlier invocation (counted in the total)
    keep: Callable[[dict[str, str]], bool] | None = None  # the experiment's filter on the grid's product
    jobs: int = 1  # runs at a time, each in its own single-threaded process (1: in this process)
    deadline: float | None = None  # time.monotonic() after which no run starts (the GPU scale's budget)
    budget: Any = None  # the GPU scale's plan (normtrain.reproduce.gpu.GpuPlan), None at cpu

    def phase(self, text: str) -> None:
        """One line when a phase of the invocation starts, so no phase is silent (with progress on)."""
        if self.progress:
            from normtrain.util.runlog import say

            say(f"normtrain-reproduce: {self.name}: {text}")

    def out_of_time(self) -> bool:
        import time

        return self.deadline is not None and time.monotonic() >= self.deadline

    def combos(self) -> list[dict[str, str]]:
        axes = list(self.grid)
        every = [dict(zip(axes, values, strict=True)) for values in itertools.product(*self.grid.values())]
        return [c for c in every if self.keep is None or self.keep(c)]

    def overrides(self, combo: dict[str, str]) -> list[str]:
        return [*self.base, *(f"{k}={v}" for k, v in combo.items())]

    def compose(self, combo: dict[str, str]) -> DictConfig:
        from normtrain.config import compose

        return compose(self.overrides(combo))

    def run_dir(self, combo: dict[str, str]) -> Path:
        return self.runs_dir / "_".join(f"{k.split('.')[-1]}-{_slug(v)}" for k, v in combo.items())


def _slug(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "", str(value)) or "x"


def sweep_axes(name: str) -> dict[str, list[str]]:
    """``hydra.sweeper.params`` of ``configs/experiment/NAME.yaml``, each expanded to its values."""
    from normtrain.config import compose

    params = compose([f"experiment={name}"], return_hydra_config=True).hydra.sweeper.params or {}
    return {k: expand(k, v) for k, v in params.items()}


def expand(key: str, value) -> list[str]:
    """The values of one axis in Hydra's sweep syntax (``a,b``, ``range(0,3)``) or a single value."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    override = OverridesParser.create().parse_override(f"{key}={value}")
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    return [override.get_value_element_as_str()]


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

    @property
    def registration(self) -> Registration:
        return importlib.import_module(f"normtrain.reproduce.preregistered.{self.name}").REGISTRATION

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        """Train every run of the grid and return one row per run (its axes plus ``self.row``)."""
        return read_rows(plan, train_grid(plan, self.keep_checkpoints), self.row)

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


def code_of(code: dict | None) -> dict[str, Any]:
    """A run's ``code_commit`` and ``code_dirty`` columns (normtrain/util/provenance.py)."""
    code = code or {}
    return {"code_commit": code.get("code_commit"), "code_dirty": code.get("code_dirty")}


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


class Unfinished(Exception):  # noqa: N818 (a state, not an error: the budget ran out first)
    """The deadline stopped the invocation before every run of the plan was done; a later one continues."""

    def __init__(self, done: int, total: int):
        super().__init__(f"{done} of {total} runs done")
        self.done, self.total = done, total


def describe(combo: dict[str, str]) -> str:
    return " ".join(f"{k.split('.')[-1]}={v}" for k, v in combo.items())


def map_grid(plan: Plan, fn: Callable[[list[str], str], Any], combos: Sequence[dict[str, str]],
             what: str = "runs", unit: str = "run") -> list[Any]:
    """``fn(overrides, run_dir)`` for each combo, in the combos' order: ``plan.jobs`` at a time in single-threaded
    worker processes (``fn`` must be a module-level function), or one after the other in this process. Past
    ``plan.deadline`` no combo starts (its result stays None; the runs in flight finish)."""
    from normtrain.util.progress import Lines, make_progress

    if not combos:
        return []
    plan.phase(f"{len(combos)} {what}, {min(plan.jobs, len(combos))} at a time")
    bar = make_progress(len(combos), 0, f"{plan.name}: {what}", plan.progress, every_s=30.0, unit=unit)
    results: list[Any] = [None] * len(combos)
    try:
        if plan.jobs <= 1 or len(combos) <= 1:
            for i, combo in enumerate(combos):
                if plan.out_of_time():
                    break
                if not isinstance(bar, Lines):
                    bar.set_postfix_str(describe(combo), refresh=True)
                results[i] = fn(plan.overrides(combo), str(plan.run_dir(combo)))
                bar.update(1)
            return results
        return _in_workers(plan, fn, combos, bar, results)
    finally:
        bar.close()


def _in_workers(plan: Plan, fn: Callable[[list[str], str], Any], combos: Sequence[dict[str, str]], bar,
                results: list[Any]) -> list[Any]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(plan.jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=single_threaded) as pool:
        futures = {pool.submit(fn, plan.overrides(c), str(plan.run_dir(c))): i for i, c in enumerate(combos)}
        for future in as_completed(futures):
            if not future.cancelled():
                results[futures[future]] = future.result()
                bar.update(1)
            if plan.out_of_time():  # what has not started yet stays for the next invocation
                for f in futures:
                    f.cancel()
    return results


MEASUREMENT = "measurement.json"  # a forward-only experiment's result for one combo, in the combo's folder


def measure_grid(plan: Plan, fn: Callable[[list[str]], Any]) -> list[dict[str, Any]]:
    """Forward-only experiments: ``fn(overrides)`` for every combo of the grid, in the grid's order. Each result is
    kept in the combo's folder (``measurement.json``: the value, the config, the code that measured it, when and how
    long) and reused like a finished run when the config is the same, so a rerun recomputes only the analysis."""
    from functools import partial

    from normtrain.util.atomic import write_json

    combos = plan.combos()
    records: list[dict[str, Any] | None] = [reused_measurement(plan, c) for c in combos]
    todo = [i for i, r in enumerate(records) if r is None]
    for i, record in zip(todo, map_grid(plan, partial(_measured, fn), [combos[i] for i in todo], "measurements",
                                        "measurement"), strict=True):
        if record is not None:  # None: not started before the deadline
            write_json(plan.run_dir(combos[i]) / MEASUREMENT, record)
            records[i] = record
    if left := sum(r is None for r in records):
        raise Unfinished(len(records) - left, len(records))
    return records  # type: ignore[return-value]


def _measured(fn: Callable[[list[str]], Any], overrides: list[str], _run_dir: str) -> dict[str, Any]:
    import time
    from datetime import datetime, timezone

    from normtrain.config import compose, to_container
    from normtrain.util.provenance import code_state_at_start

    started, t0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.time()
    value = fn(overrides)
    return {"value": value, "config": to_container(compose(overrides)), **code_of(code_state_at_start()),
            "started_at": started, "wall_time_s": round(time.time() - t0, 3)}


def reused_measurement(plan: Plan, combo: dict[str, str]) -> dict[str, Any] | None:
    import json

    from normtrain.config import to_container

    path = plan.run_dir(combo) / MEASUREMENT
    if plan.fresh or not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not same_run(record.get("config") or {}, to_container(plan.compose(combo))):
        return None
    plan.reused_s += record.get("wall_time_s") or 0.0
    return record


def single_threaded() -> None:
    """A worker's set-up: one thread for torch (and the libraries it calls), quiet progress."""
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


def train_run(overrides: list[str], run_dir: str, keep_checkpoint: bool) -> None:
    """Train one run of a grid into ``run_dir`` (a fresh folder); the checkpoint is dropped unless kept."""
    from normtrain.config import compose
    from normtrain.training.trainer import train

    train(compose(overrides), run_dir=run_dir)
    if not keep_checkpoint:
        (Path(run_dir) / "ckpt.pt").unlink(missing_ok=True)  # the runs are measured, not resumed


def train_grid(plan: Plan, keep_checkpoints: bool = False) -> list[tuple[dict[str, str], Run]]:
    """Run (or reuse) every run of the grid; a run already done with the same config is kept."""
    from functools import partial

    combos = plan.combos()
    todo = [c for c in combos if not reusable(plan, c, keep_checkpoints)]
    for combo in todo:
        if plan.run_dir(combo).exists():
            shutil.rmtree(plan.run_dir(combo))
    map_grid(plan, partial(train_run, keep_checkpoint=keep_checkpoints), todo, "training runs")
    if left := sum(not (plan.run_dir(c) / "summary.json").is_file() for c in todo):
        raise Unfinished(len(combos) - left, len(combos))  # the deadline came first: the next invocation goes on
    done = []
    for combo in combos:
        run = load_run(plan.run_dir(combo))
        if not isinstance(run, Run):
            raise RuntimeError(f"{plan.run_dir(combo)}: the run left nothing readable ({run})")
        done.append((combo, run))
    return done


def reusable(plan: Plan, combo: dict[str, str], keep_checkpoints: bool) -> bool:
    """A finished run of this config is in the combo's folder (and its checkpoint, when the experiment needs it and
    the run did not diverge: a diverged run keeps none that is finite);
    its own wall time is added to ``plan.reused_s``."""
    from normtrain.config import to_container

    run_dir = plan.run_dir(combo)
    previous = load_run(run_dir) if (run_dir / "summary.json").is_file() else None
    ok = (not plan.fresh and isinstance(previous, Run) and previous.status in ("completed", "diverged")
          and same_run(previous.summary.get("config") or {}, to_container(plan.compose(combo)))
          and (not keep_checkpoints or previous.status == "diverged" or (run_dir / "ckpt.pt").is_file()))
    if ok:
        plan.reused_s += previous.summary.get("wall_time_s") or 0.0
    return ok


def same_run(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a finished run's config describes the run ``new`` asks for, so its result can be reused.

    Keys added to the schema after the run take their defaults (``normtrain.config.with_defaults``: a new key's
    default reproduces the runs made before it existed); where the run is logged (logger, progress, cache:
    ``normtrain.training.resume.BOOKKEEPING``) does not matter, and a newer monitor switch the run predates only means a
    diagnostic it did not log. Everything else must match.
    """
    from normtrain.config import with_defaults
    from normtrain.training.resume import BOOKKEEPING
    from normtrain.util.dotted import flatten, under

    before, after = flatten(with_defaults(old)), flatten(new)
    keys = {k for k in set(before) | set(after) if not under(k, BOOKKEEPING)}
    keys -= {k for k in set(after) - set(before) if k.startswith("monitor.")}
    return all(before.get(k) == after.get(k) for k in keys)


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
