"""How long a CPU-scale invocation will take, said before it starts (``normtrain-reproduce NAME --plan-only``).

A CPU grid costs hours, so a user should know what launching it buys. Each run of the plan that is not already
finished in the runs folder (a rerun reuses those) is timed by the committed runs of the same grid point in
``experiments/NAME/runs.csv``: their median own wall time, over the seeds (a run's cost does not depend on its
seed). ``--jobs`` single-threaded runs share the machine, so the elapsed time is about the runs' own time over the
jobs: within 2% for the three experiments measured whole with nothing after their grid (``experiments/
reproduce_budget/``: lr_sensitivity, xiong_warmup, deepnet_update). What runs
after the grid (probes, scoring, the step timing, the analysis) is not counted, and overrides that change a run's
shape or length make the committed times a guess; the estimate says both. The committed runs are the last result's:
between a re-registration and its result they time the earlier design. Once a resumed invocation has finished
runs of its own (at least ``CALIBRATE_AFTER`` with a committed time), the rest are scaled by how long those took
against their committed times: today's machine (lr_sensitivity's v5 runs took 1.4× as long, at the same code speed).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from normtrain.study.plan import SEED_AXIS, STEPS_AXIS, Plan

RUNS_CSV = "runs.csv"
COST_FREE = ("optim.lr", "optim.warmup_steps", "train.param_rounding")  # axes a step's cost barely depends on
# (rounding the stored values is one copy of the parameters and moments a step)
CALIBRATE_AFTER = 3  # finished runs of this invocation's design before their times rescale the rest
CALIBRATE_BEYOND = 0.1  # a ratio within 10% of 1 leaves the committed times as they are
NOT_COUNTED = ("The runs alone: what runs after the grid (curse_of_depth's probes, batchnorm_leak's scoring, "
               "norm_types' step timing) and the analysis add minutes")


@dataclass
class CpuEstimate:
    """One experiment's runs at --scale cpu: how many, how many a rerun reuses, and the time the rest will take."""

    name: str
    runs: int
    reused: int
    own_s: float  # the runs still to train, their own time by the committed ones
    untimed: int  # runs to train with no committed run of their grid point
    jobs: int
    source: str  # where the times come from
    caveats: list[str] = field(default_factory=list)

    @property
    def to_run(self) -> int:
        return self.runs - self.reused

    @property
    def elapsed_s(self) -> float:
        return self.own_s / max(1, min(self.jobs, self.to_run))

    def text(self) -> str:
        done = f"{self.reused} finished in the runs folder" if self.reused else "none finished in the runs folder"
        line = f"{self.name} at --scale cpu: {self.runs} runs, {done}"
        if self.to_run:
            timed = self.to_run - self.untimed
            line += (f"; {self.to_run} to train, {timed} timed by {self.source}: {self.own_s / 60:.0f} min of "
                     f"their own, about {self.elapsed_s / 60:.0f} min at --jobs {self.jobs}")
            if self.untimed:
                line += f"; {self.untimed} with no committed run of their grid point, not counted"
        else:
            line += ": a rerun recomputes only the analysis"
        return line + "".join(f". {c}" for c in self.caveats) + "."


def normal(value: object) -> str:
    """One spelling per value, so a grid's ``1.25e-2`` meets the CSV's ``0.0125`` and ``false`` meets ``False``."""
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return text.lower()
    if text.lower() in ("", "none", "null"):
        return "null"
    try:
        return repr(float(text))
    except ValueError:
        return text


def point(combo: dict[str, str], axes: list[str]) -> tuple[str, ...]:
    """A run's grid point: its values on every axis but the seed."""
    return tuple(normal(combo.get(a)) for a in axes if a != SEED_AXIS)


Translate = Callable[[dict[str, str]], "dict[str, str] | None"]  # an earlier design's row in today's axes


def committed_times(path: Path, axes: list[str], steps: int | None = None,
                    translate: Translate | None = None) -> dict[tuple[str, ...], float]:
    """Each grid point's median own wall time (seconds) over its committed runs; {} without a runs.csv. ``steps``:
    today's run length, to which each committed run's time is scaled from its own (the last step of its
    validation curve less its first, so a T/2 decay branch counts the steps it trained; a run's time is about linear
    in its steps); ``translate``: an experiment's mapping of an
    earlier design's row onto today's axes (None drops the row)."""
    return {k: statistics.median(v) for k, v in _committed(path, axes, steps, translate).items()}


def _committed(path: Path, axes: list[str], steps: int | None = None, translate: Translate | None = None
               ) -> dict[tuple[str, ...], list[float]]:
    if not path.is_file():
        return {}
    times: dict[tuple[str, ...], list[float]] = {}
    with path.open(newline="") as f:
        for found in csv.DictReader(f):
            row = translate(found) if translate else found
            try:
                seconds = float(row.get("wall_time_s") or "") if row else math.nan
            except ValueError:
                continue
            if math.isfinite(seconds) and all(a in row for a in axes):
                times.setdefault(point(row, axes), []).append(seconds * _length_ratio(row, steps))
    return times


def _length_ratio(row: dict[str, str], steps: int | None) -> float:
    """Today's steps over those the committed run trained (1 when either is unknown)."""
    ran = _ran(row)
    return steps / ran if steps and ran > 0 else 1.0


def _ran(row: dict[str, str]) -> float:
    """The steps a committed run trained: its validation curve's last step less its first (0 when it has none). A
    T/2 decay branch's curve starts at its branch step, and its wall time is that of the steps it trained."""
    points = (row.get("val_curve") or "").split()
    try:
        return float(points[-1].split(":")[0]) - float(points[0].split(":")[0]) if points else 0.0
    except ValueError:
        return 0.0


def committed_lengths(path: Path) -> list[float]:
    """The steps the committed runs trained (for the estimate's caveat when today's differ)."""
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return sorted({ran for row in csv.DictReader(f) if (ran := _ran(row)) > 0})


def neighbour_times(path: Path, axes: list[str], steps: int | None = None,
                    translate: Translate | None = None) -> dict[tuple[str, ...], float]:
    """The median own time of the committed runs that share a point's values on every axis but the learning rate
    and the warm-up (neither changes what a step costs): the time of a grid point that a re-registration added."""
    free = [a for a in axes if a not in COST_FREE]
    pooled: dict[tuple[str, ...], list[float]] = {}
    for p, seconds in _committed(path, axes, steps, translate).items():
        pooled.setdefault(_without_free(p, axes, free), []).extend(seconds)
    return {k: statistics.median(v) for k, v in pooled.items()}


def _without_free(p: tuple[str, ...], axes: list[str], free: list[str]) -> tuple[str, ...]:
    named = dict(zip([a for a in axes if a != SEED_AXIS], p, strict=True))
    return tuple(named[a] for a in free if a != SEED_AXIS)


def finished(plan: Plan, combo: dict[str, str], keep_checkpoints: bool, stand_in: str | None = None) -> bool:
    """A rerun would reuse this run: a finished run or measurement of the same config is in its folder."""
    from normtrain.study.grid import reusable, reused_measurement

    return reused_measurement(plan, combo) is not None or reusable(plan, combo, keep_checkpoints, stand_in)


@dataclass
class Calibration:
    """The finished runs of this invocation's design against their committed times: how much slower or faster
    today's code on this machine is (``ratio``), read once ``CALIBRATE_AFTER`` of them have a committed time.
    ``times``: the committed times by grid point; ``axes``: the axes that name a point."""

    times: dict[tuple[str, ...], float]
    axes: list[str]
    own_s: float = 0.0
    committed_s: float = 0.0
    runs: int = 0

    def undone(self, plan: Plan, combos: list[dict[str, str]], reuse: tuple[bool, str | None],
               share: float) -> list[dict[str, str]]:
        """The combos still to train; each finished one with a committed time (``share`` of it: a T/2 run) is
        counted. ``reuse``: whether a reused run needs its checkpoint, and the file that stands in for it."""
        left = []
        for c in combos:
            before = plan.reused_s
            if not finished(plan, c, *reuse):
                left.append(c)
            elif (own := plan.reused_s - before) > 0 and (at := point(c, self.axes)) in self.times:
                self.own_s += own
                self.committed_s += share * self.times[at]
                self.runs += 1
        return left

    def ratio(self) -> float | None:
        """Finished runs' own time over their committed times; None before ``CALIBRATE_AFTER`` runs or within
        ``CALIBRATE_BEYOND`` of 1."""
        if self.runs < CALIBRATE_AFTER or self.committed_s <= 0:
            return None
        ratio = self.own_s / self.committed_s
        return ratio if abs(ratio - 1) > CALIBRATE_BEYOND else None


def estimate(plan: Plan, committed: Path, extra_overrides: list[str], keep_checkpoints: tuple[bool, str | None, bool]
             = (False, None, False), half: tuple[Plan, float] | None = None, translate: Translate | None = None
             ) -> CpuEstimate:
    """The estimate for ``plan`` (the experiment's ``runs_plan``) from the runs.csv at ``committed``;
    ``keep_checkpoints``: whether a reused T run needs its checkpoint, the file that stands in for it, whether a
    T/2 run needs its own (``Experiment.keep_checkpoints``, ``checkpoint_stand_in``, ``half_checkpoints``); ``half``:
    the T/2 plan of a ``half_budget`` experiment and the share of a T run's steps each of its runs trains;
    ``translate``: the experiment's mapping of an earlier design's rows (``committed_times``)."""
    axes = list(plan.grid)
    steps = None if STEPS_AXIS in axes or not plan.combos() else int(plan.compose(plan.combos()[0]).train.max_steps)
    times = committed_times(committed, axes, steps, translate)
    neighbours = neighbour_times(committed, axes, steps, translate)
    free = [a for a in axes if a not in COST_FREE]
    combos = plan.combos()
    calibration = Calibration(times, axes)

    def timed(todo: list[dict[str, str]], share: float) -> tuple[list[float], int]:
        found, by_neighbour = [], 0
        for c in todo:
            if (p := point(c, axes)) in times:
                found.append(share * times[p])
            elif (q := _without_free(p, axes, free)) in neighbours:
                found.append(share * neighbours[q])
                by_neighbour += 1
        return found, by_neighbour

    keep, stand_in, half_keep = keep_checkpoints
    todo = calibration.undone(plan, combos, (keep, stand_in), 1.0)
    known, by_neighbour = timed(todo, 1.0)
    caveats, runs, to_train = [], len(combos), len(todo)
    if half is not None:
        half_plan, share = half
        half_todo = calibration.undone(half_plan, half_plan.combos(), (half_keep, stand_in), share)
        more, more_by_neighbour = timed(half_todo, share)
        known, by_neighbour = known + more, by_neighbour + more_by_neighbour
        runs, to_train = runs + len(half_plan.combos()), to_train + len(half_todo)
        caveats.append(f"The {len(half_plan.combos())} T/2 runs (decay branches or whole runs) are timed as "
                       f"{share:.0%} of their T run's time, their share of its steps (their start-up not counted)")
    if steps and (lengths := committed_lengths(committed)) and lengths != [float(steps)]:
        caveats.append(f"The committed runs trained {', '.join(f'{n:g}' for n in lengths)} steps; their times are "
                       f"scaled to today's {steps}")
    if by_neighbour:
        caveats.append(f"{by_neighbour} run(s) at a grid point with no committed run timed by the committed runs "
                       "at the point's other learning rates or warm-ups")
    if not times:
        caveats.append(f"No committed runs at {committed} to time them by")
    if extra_overrides:
        caveats.append(f"The times are the registered settings'; {' '.join(extra_overrides)} may change them")
    if (ratio := calibration.ratio()) is not None:
        known = [ratio * t for t in known]
        caveats.append(f"The {calibration.runs} runs finished in the runs folder took {ratio:.2f}× their committed "
                       "times (today's code on this machine), so the rest are scaled by it")
    return CpuEstimate(name=plan.name, runs=runs, reused=runs - to_train, own_s=sum(known),
                       untimed=to_train - len(known), jobs=plan.jobs, source=str(committed), caveats=caveats)


def total_text(estimates: list[CpuEstimate]) -> str:
    """The line under ``all``: the sum of the experiments' elapsed estimates (they run one after the other)."""
    runs, todo = sum(e.runs for e in estimates), sum(e.to_run for e in estimates)
    own, elapsed = sum(e.own_s for e in estimates), sum(e.elapsed_s for e in estimates)
    return (f"all at --scale cpu: {len(estimates)} experiments, {runs} runs, {todo} to train: {own / 3600:.1f} h "
            f"of their own, about {elapsed / 3600:.1f} h one experiment after another (the runs alone)")
