"""What the terminal says when a run ends, and when a sweep does: the outcome in words, from the run's own labels
(outcome.py), with the numbers they were read from.

A run's line keeps its status first (``completed`` | ``diverged`` | ``interrupted``, as summary.json's ``status``),
so a script that reads the line reads what it always did; what the labels say follows it::

    normtrain: completed after 200 steps, collapsed onto the unigram line: final val loss 3.3824 (step 200),
    unigram 3.3764; run folder ...      (one line)

A multirun ends with one table of its jobs (``SweepOutcomes``, a Hydra callback in configs/config.yaml), read
from each job's summary.json, so it is the same table whichever launcher ran the jobs and wherever.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from normtrain.util.markdown import table
from normtrain.util.numbers import number
from normtrain.util.runlog import say


def outcome(summary: dict[str, Any]) -> str:
    """The run's outcome in words: ``diverged at step k``, ``collapsed onto the unigram line``, ``above the unigram
    line``, ``left the unigram line at step k``, ``still falling (undertrained)``; ``completed`` alone when no label
    holds, and the status for a run that did not finish (``interrupted``)."""
    status = summary.get("status")
    if status == "diverged":
        return f"diverged at step {summary.get('diverged_at_step')}"
    if status != "completed":
        return str(status)
    words = []
    if summary.get("collapsed"):
        words.append("collapsed onto the unigram line")
    elif summary.get("above_line"):
        words.append("above the unigram line")
    if summary.get("plateaued"):
        words.append(f"left the unigram line at step {summary.get('left_line_at_step')}")
    if summary.get("undertrained") is True:
        drop = (summary.get("val_trend") or {}).get("drop")
        words.append(f"still falling (undertrained: {number(drop, 3)} nats over the last quarter)")
    return ", ".join(words) or "completed"


def final_loss(summary: dict[str, Any]) -> str:
    """``final val loss X (step s)``, or the last finite one of a diverged run, and the unigram line's loss; an
    evaluation older than the run's last step (an interrupted run not evaluated on its way out) says so."""
    loss, step = summary.get("final_val_loss"), summary.get("final_val_loss_step")
    name = "final val loss"
    if loss is None and summary.get("last_finite_val_loss") is not None:
        loss, name = summary["last_finite_val_loss"], "last finite val loss"
    at = "" if step is None or loss is None else f" (step {step}" + (")" if step >= summary["steps"] else
                                                                        ", the last evaluation)")
    unigram = summary.get("unigram_val_loss")
    return f"{name} {number(loss, 4, missing='n/a')}{at}" + (f", unigram {number(unigram, 4)}" if unigram else "")


def end_line(summary: dict[str, Any]) -> str:
    """The run's last line on the terminal (and in cli.log): its status, its outcome in words, its numbers."""
    status, words = summary["status"], outcome(summary)
    said = "" if words in (status, "completed") or status == "diverged" else f", {words}"
    head = words if status == "diverged" else status
    return (f"normtrain: {head} after {summary['steps']} steps{said}: {final_loss(summary)}; "
            f"run folder {summary['run_dir']}")


def sweep_table(jobs: list[tuple[int, list[str], dict[str, Any]]]) -> str:
    """One row per job ``(number, overrides, summary)``: its swept values (the overrides not shared by every job),
    outcome and final loss."""
    varying = {o for _, overrides, _ in jobs for o in overrides if not all(o in other for _, other, _ in jobs)}
    rows = [[str(num), " ".join(o for o in overrides if o in varying) or "–", outcome(summary),
             number(summary.get("final_val_loss"), 4), number(summary.get("unigram_val_loss"), 4)]
            for num, overrides, summary in sorted(jobs, key=lambda job: job[0])]
    return table(["job", "swept values", "outcome", "final val loss", "unigram"], rows,
                 numeric=[True, False, False, True, True])


def sweep_jobs(sweep_dir: Path, since: float) -> list[tuple[int, list[str], dict[str, Any]]]:
    """The jobs of the sweep in ``sweep_dir`` whose summary was written at or after ``since`` (a folder reused by an
    earlier sweep may hold jobs of that one), as ``sweep_table`` reads them."""
    import json

    jobs = []
    for path in sorted(sweep_dir.glob("*/summary.json")):
        hydra_dir = path.parent / ".hydra"
        if path.stat().st_mtime < since or not (hydra_dir / "hydra.yaml").is_file():
            continue
        num = OmegaConf.load(hydra_dir / "hydra.yaml").hydra.job.get("num", len(jobs))
        listed = hydra_dir / "overrides.yaml"
        overrides = list(OmegaConf.load(listed)) if listed.is_file() else []
        jobs.append((int(num), [str(o) for o in overrides], json.loads(path.read_text())))
    return jobs


class SweepOutcomes(Callback):
    """After the last job of a multirun: one table of every job's outcome, printed once."""

    def __init__(self) -> None:
        self.started = time.time()

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self.started = time.time() - 1.0  # file times are coarse on some file systems

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        jobs = sweep_jobs(Path(str(config.hydra.sweep.dir)), self.started)
        if jobs:
            say(f"normtrain: the sweep's {len(jobs)} jobs ({config.hydra.sweep.dir}):\n{sweep_table(jobs)}")
