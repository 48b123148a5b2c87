"""Running a reproduction's grid: its runs (or measurements) ``plan.jobs`` at a time, each reused when a run of the
same config is already in its folder, and stopped at the plan's deadline (``Unfinished``: a later invocation goes on).

``--jobs N`` runs N of the grid's runs at a time, each in its own process with one torch thread: the models
here are so small that a second thread buys little, while two single-threaded runs use both cores of a small
machine fully (and a busy machine does not stall a run's threads waiting for each other).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from normtrain.compare.runs import Run, load_run
from normtrain.study.plan import Plan

CODE_COLUMNS = ("code_commit", "code_dirty", "training_code_digest")  # what code_of gives a row


def code_of(code: dict | None) -> dict[str, Any]:
    """A run's ``code_commit`` and ``code_dirty`` columns (normtrain/util/provenance.py), and its
    ``training_code_digest`` where the run recorded one (runs before it have no such column: their runs.csv
    re-renders unchanged)."""
    code = code or {}
    digest = {"training_code_digest": code["training_code_digest"]} if code.get("training_code_digest") else {}
    return {"code_commit": code.get("code_commit"), "code_dirty": code.get("code_dirty"), **digest}


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


def train_grid(plan: Plan, keep_checkpoints: bool = False, stand_in: str | None = None
               ) -> list[tuple[dict[str, str], Run]]:
    """Run (or reuse) every run of the grid; a run already done with the same config is kept (``stand_in``:
    ``reusable``'s)."""
    from functools import partial

    combos = plan.combos()
    todo = [c for c in combos if not reusable(plan, c, keep_checkpoints, stand_in)]
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


def reusable(plan: Plan, combo: dict[str, str], keep_checkpoints: bool, stand_in: str | None = None) -> bool:
    """A finished run of this config is in the combo's folder (and its checkpoint, when the experiment needs it and
    the run did not diverge: a diverged run keeps none that is finite; or in its place ``stand_in``, a file of the
    run folder made from the checkpoint after the run, all the experiment reads of it: a probe);
    its own wall time is added to ``plan.reused_s``."""
    from normtrain.config import to_container

    run_dir = plan.run_dir(combo)
    previous = load_run(run_dir) if (run_dir / "summary.json").is_file() else None
    ok = (not plan.fresh and isinstance(previous, Run) and previous.status in ("completed", "diverged")
          and same_run(previous.summary.get("config") or {}, to_container(plan.compose(combo)))
          and (not keep_checkpoints or previous.status == "diverged" or (run_dir / "ckpt.pt").is_file()
               or (stand_in is not None and made_after_run(run_dir, stand_in))))
    if ok:
        plan.reused_s += previous.summary.get("wall_time_s") or 0.0
    return ok


def made_after_run(run_dir: Path, name: str) -> bool:
    """The run folder's file ``name`` is there and no older than the run's summary (a retrained run makes it again)."""
    path, summary = run_dir / name, run_dir / "summary.json"
    return path.is_file() and summary.is_file() and path.stat().st_mtime >= summary.stat().st_mtime


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
