"""The numbers behind the interactive report: aggregates over each group's seeds, per-seed series, per-layer maps.

Every series is one record of parallel arrays (``{"g": label, "step": [...], "v": [...]}``) that the page
flattens into rows in the browser, so a point costs a number, not a JSON object. Numbers keep 4 significant
digits (a figure cannot show more) and non-finite values are null. Long series and very large sweeps are
thinned to a budget, so that 200 runs stay well below 10 MB; a ``Thinning`` with a cap on the points (a page with a
size budget: normtrain.compare.cli) thins every series further, but never drops a step the loss chart marks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from normtrain.compare.groups import Group
from normtrain.compare.runs import HEAD_KEY, LAYER_KEY, Run
from normtrain.util.spread import mean_sd

DIGITS = 4
MAX_POINTS = 500  # per line series; a longer one is thinned evenly (its first and last points kept)
LAYER_BUDGET = 300_000  # per-layer values in one report, over every prefix and group; beyond, fewer steps
MIN_POINTS = 10  # the fewest points per series a size budget thins to (normtrain.compare.cli.Draft.fit)
NOT_SCALARS = {"step"}


def num(value: float) -> float | int | None:
    """A value as the page stores it: 4 significant digits, None for NaN or ±inf."""
    if value is None or not math.isfinite(value):
        return None
    rounded = float(f"{value:.{DIGITS}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 1e15 else rounded


def nums(values: Iterable[float]) -> list[float | int | None]:
    return [num(float(v)) for v in values]


def ints(values: Iterable[float]) -> list[int]:
    return [int(v) for v in values]


def thin(n: int, limit: int) -> np.ndarray:
    """Indices of at most ``limit`` evenly spread items of ``n``, the first and last among them."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, limit).round().astype(int))


@dataclass(frozen=True)
class Thinning:
    """Which logged steps each series of the page keeps.

    Without a cap a line keeps at most ``MAX_POINTS`` evenly spread steps, a per-layer or per-head map every
    ``stride``-th step and the last. With one (``points``) a series that would keep more keeps ``points`` steps
    instead: every step of ``marked`` (by group label: where a run of the group diverged or rolled back, see
    ``marked_steps``), so that the loss chart's marks sit on the lines, and evenly spread ones, the first and the
    last among them, for the rest (a series keeps more only where its marks alone outnumber ``points``).
    """

    stride: int = 1
    points: int | None = None
    marked: dict[str, frozenset[float]] = field(default_factory=dict)

    def line(self, steps: np.ndarray, group: str) -> np.ndarray:
        return self._capped(steps, thin(steps.size, MAX_POINTS), group)

    def map(self, steps: np.ndarray, group: str) -> np.ndarray:
        return self._capped(steps, np.unique(np.append(np.arange(0, steps.size, self.stride), steps.size - 1)), group)

    def _capped(self, steps: np.ndarray, pick: np.ndarray, group: str) -> np.ndarray:
        if self.points is None or pick.size <= self.points:
            return pick
        marks = np.flatnonzero(np.isin(steps, list(self.marked.get(group, ()))))
        return np.union1d(thin(steps.size, max(2, self.points - marks.size)), marks)


UNCAPPED = Thinning()  # no cap: at most MAX_POINTS steps of a line, every logged step of a map


def marked_steps(groups: Sequence[Group]) -> dict[str, frozenset[float]]:
    """Per group, the steps where the loss chart marks one of its runs: a divergence and the run's last finite
    training loss (its cross), a rollback and the step it went back to."""
    marked = {}
    for group in groups:
        steps: set[float] = set()
        for run in group.runs:
            if run.status == "diverged":
                logged, loss = run.series("train/loss")
                steps.update(logged[np.isfinite(loss)][-1:].tolist())
                steps.update([float(run.diverged_at)] if run.diverged_at is not None else [])
            steps.update(float(s) for r in run.rollbacks for s in (r["step"], r.get("restored_step"))
                         if isinstance(s, int))
        marked[group.label] = frozenset(steps)
    return marked


def scalar_keys(runs: Sequence[Run]) -> list[str]:
    """Every logged key that is not per-layer, in the order first logged."""
    seen: dict[str, None] = {}
    for run in runs:
        for row in run.rows:
            seen.update((k, None) for k in row
                        if k not in NOT_SCALARS and not LAYER_KEY.match(k) and not HEAD_KEY.match(k))
    return list(seen)


def prefixes(runs: Sequence[Run], pattern: re.Pattern = LAYER_KEY) -> list[str]:
    """``grad_norm`` for ``grad_norm/layer_3`` (``LAYER_KEY``; ``attn_logit_max`` for ``.../layer_3/head_1`` with
    ``HEAD_KEY``), and so on: every family of that kind logged, in first-logged order."""
    seen: dict[str, None] = {}
    for run in runs:
        for row in run.rows:
            seen.update((m["prefix"], None) for k in row if (m := pattern.match(k)))
    return list(seen)


def stack(series: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """(the union of steps, values[series, step]) with NaN where a series did not log a step."""
    steps = np.unique(np.concatenate([s for s, _ in series])) if series else np.empty(0)
    table = np.full((len(series), steps.size), np.nan)
    for i, (s, v) in enumerate(series):
        table[i, np.searchsorted(steps, s)] = v
    return steps, table


def aggregate(series: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per step over the series that have a finite value there: mean, min, max, sample sd (``std``, the one spread
    of normtrain/util/spread.py) and their count."""
    steps, table = stack(series)
    finite = np.isfinite(table)
    keep = finite.any(axis=0)
    table, finite = table[:, keep], finite[:, keep]
    mean, std, n = mean_sd(table)
    return {"step": steps[keep], "mean": mean, "min": np.where(finite, table, np.inf).min(axis=0),
            "max": np.where(finite, table, -np.inf).max(axis=0), "std": std, "n": n}


def line_records(groups: Sequence[Group], key: str, kind: str | None,
                 read: Callable[[Run], tuple[np.ndarray, np.ndarray]] | None = None,
                 thinning: Thinning = UNCAPPED) -> tuple[list[dict], list[dict]]:
    """(one aggregate record per group, one record per run) of the scalar ``key`` (or of the (steps, values) that
    ``read`` gives for a run), each thinned by ``thinning``; ``kind`` tells curves of one figure apart (train /
    validation)."""
    tag = {"k": kind} if kind else {}
    aggregates, seeds = [], []
    for group in groups:
        logged = [(run, *(read(run) if read else run.series(key))) for run in group.runs]
        logged = [(run, s, v) for run, s, v in logged if np.isfinite(v).any()]
        if not logged:
            continue
        agg = aggregate([(s, v) for _, s, v in logged])
        pick = thinning.line(agg["step"], group.label)
        aggregates.append({"g": group.label, **tag, "seeds": seed_list(run for run, _, _ in logged),
                           "step": ints(agg["step"][pick]),
                           **{f: nums(agg[f][pick]) for f in ("mean", "min", "max", "std")},
                           "n": ints(agg["n"][pick])})
        for run, s, v in logged:
            pick = thinning.line(s, group.label)
            seeds.append({"g": group.label, **tag, "run": run.label, "seed": seed_list([run]), "step": ints(s[pick]),
                          "v": nums(v[pick])})
    return aggregates, seeds


def seed_list(runs: Iterable[Run]) -> str:
    """The runs' seeds as a tooltip names them: ``0, 1, 2``; ``—`` for a run without a recorded seed."""
    seeds = [run.seed for run in runs]
    known = sorted({s for s in seeds if isinstance(s, int)})
    other = [str(s) for s in dict.fromkeys(seeds) if not isinstance(s, int) and s is not None]
    return ", ".join([*map(str, known), *other]) or "—"


def layer_stride(groups: Sequence[Group], prefixes: Sequence[str], heads: Sequence[str] = ()) -> int:
    """Every how many logged steps the per-layer (and per-head) maps keep, so that all of them fit
    ``LAYER_BUDGET``."""
    cells = 0
    for group in groups:
        for prefix in prefixes:
            cells += max((len(r.layer_keys(prefix)) * len(r.rows) for r in group.runs), default=0)
        for prefix in heads:
            cells += max((len(r.head_keys(prefix)) * len(r.rows) for r in group.runs), default=0)
    return max(1, math.ceil(cells / LAYER_BUDGET))


def layer_records(groups: Sequence[Group], prefix: str, thinning: Thinning) -> list[dict]:
    """One record per group and layer: the mean over the group's seeds of ``prefix/layer_i`` at the logged steps
    that ``thinning`` keeps."""
    records = []
    for group in groups:
        mats = [run.layer_matrix(prefix) for run in group.runs]
        mats = [(s, v) for s, v in mats if v.size]
        if not mats:
            continue
        n_layers = max(v.shape[1] for _, v in mats)
        steps, _ = stack([(s, s) for s, _ in mats])
        pick = thinning.map(steps, group.label)
        for layer in range(n_layers):
            _, table = stack([(s, v[:, layer] if layer < v.shape[1] else np.full(s.size, np.nan)) for s, v in mats])
            mean, _, _ = mean_sd(table)
            records.append({"g": group.label, "layer": layer, "step": ints(steps[pick]), "v": nums(mean[pick])})
    return records


def head_records(groups: Sequence[Group], prefix: str, thinning: Thinning) -> list[dict]:
    """One record per group, layer and head: the mean over the group's seeds of ``prefix/layer_i/head_j`` at the
    logged steps that ``thinning`` keeps."""
    records = []
    for group in groups:
        keys = sorted({lh for run in group.runs for lh in run.head_keys(prefix)})
        for layer, head in keys:
            agg = aggregate([run.series(f"{prefix}/layer_{layer}/head_{head}") for run in group.runs])
            if not agg["step"].size:
                continue
            pick = thinning.map(agg["step"], group.label)
            records.append({"g": group.label, "layer": layer, "head": head, "step": ints(agg["step"][pick]),
                            "v": nums(agg["mean"][pick])})
    return records


def diverged_marks(groups: Sequence[Group]) -> list[dict[str, Any]]:
    """Where each diverged run stopped: its divergence step at its last finite training loss."""
    marks = []
    for group in groups:
        for run in group.runs:
            if run.status != "diverged":
                continue
            steps, loss = run.series("train/loss")
            finite = np.isfinite(loss)
            if finite.any():
                at = run.diverged_at if run.diverged_at is not None else steps[finite][-1]
                marks.append({"g": group.label, "run": run.label, "step": int(at), "v": num(loss[finite][-1])})
    return marks


def rollback_marks(groups: Sequence[Group]) -> list[dict[str, Any]]:
    """Each rollback of each run: where it diverged, the step it went back to, what it skipped and its lr factor."""
    return [{"g": group.label, "run": run.label, "step": int(r["step"]), "to": r.get("restored_step"),
             "skipped": r.get("skipped_batches"), "lr": r.get("lr_factor"), "retry": r.get("retry")}
            for group in groups for run in group.runs for r in run.rollbacks]


def unigram_levels(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """The unigram baseline loss of the runs' corpora (``summary.json``'s ``unigram_val_loss``), each once."""
    values = sorted({num(v) for r in runs if isinstance(v := r.summary.get("unigram_val_loss"), (int, float))
                     and math.isfinite(v)})
    return [{"v": v, "text": "unigram baseline"} for v in values]
