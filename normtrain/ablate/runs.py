"""The runs of an ablation: every arm at every value of its grid for every seed, trained to T; then each at T/2.

T/2 is a decay branch where the schedule allows one (``optim.schedule=wsd``; normtrain/study/branches.py), for
about a tenth of a T run; under another schedule the T/2 runs are trained whole.

An arm whose best value lands on an edge of its grid gets one more point beyond it (the grid's own ratio), at most
``max_extensions`` times; the rule is fixed before the runs, so extending is not a choice made after seeing data.
Every run is reused when a finished run of the same config is in its folder (normtrain/study/grid.py): a killed
invocation, run again, trains only what is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normtrain.ablate.spec import Spec
from normtrain.compare.runs import Run
from normtrain.study import best_against_best, best_lr
from normtrain.study.branches import BranchPlan, branch_plan, gone_before_branch, point, skipping
from normtrain.study.grid import Unfinished, train_grid
from normtrain.study.plan import SEED_AXIS, Plan

T_DIR, HALF_DIR = "runs", "runs_half"


def value_text(v: float) -> str:
    """A grid value as an override writes it (and reads back to the same float)."""
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


@dataclass
class Grids:
    """Each arm's values of the tuned key: the spec's grid, then the extensions the edge rule added."""

    values: dict[str, list[float]]
    extensions: dict[str, int] = field(default_factory=dict)

    @classmethod
    def first(cls, spec: Spec) -> Grids:
        return cls({a: list(spec.grid) for a in spec.arms}, {a: 0 for a in spec.arms})

    def union(self) -> list[float]:
        return sorted({v for vs in self.values.values() for v in vs})

    def extend(self, arm: str, best: float) -> float:
        """One point beyond the edge ``best`` sits on, at the ratio of the grid's two outermost points there."""
        vs = sorted(self.values[arm])
        if best == vs[0]:
            new = vs[0] * vs[0] / vs[1]
        else:
            new = vs[-1] * vs[-1] / vs[-2]
        new = float(f"{new:.6g}")
        self.values[arm] = sorted([*vs, new])
        self.extensions[arm] += 1
        return new


def base_overrides(spec: Spec, steps: int, keep_at: int | None) -> list[str]:
    keep = f"[{keep_at}]" if keep_at is not None else "[]"
    return [*spec.shared, f"train.max_steps={steps}", f"train.select_windows={spec.select_windows}",
            f"train.keep_ckpt_at={keep}", "train.ckpt_format=full"]


def t_plan(spec: Spec, grids: Grids, out: Path, jobs: int, progress: bool) -> Plan:
    allowed = {a: {value_text(v) for v in vs} for a, vs in grids.values.items()}
    return Plan(name=spec.name, scale="cpu", smoke=False, base=base_overrides(spec, spec.steps, spec.branch_step),
                grid={spec.arm_key: list(spec.arms), spec.tune: [value_text(v) for v in grids.union()],
                      SEED_AXIS: [str(s) for s in spec.seeds]},
                runs_dir=out / T_DIR, out=out, jobs=jobs, progress=progress, tool="normtrain-ablate",
                keep=lambda c: c[spec.tune] in allowed[c[spec.arm_key]])


def half_plan(spec: Spec, t: Plan, out: Path) -> BranchPlan:
    return branch_plan(t, base_overrides(spec, spec.half_steps, None), spec.branch_step, out / HALF_DIR)


def rows_of(spec: Spec, done: list[tuple[dict[str, str], Run]], steps: int) -> list[dict[str, Any]]:
    return [{**combo, best_against_best.STEPS: steps, **best_against_best.study_row(run, tail_fallback=False)}
            for combo, run in done]


def train_t(spec: Spec, out: Path, jobs: int, progress: bool) -> tuple[Grids, Plan, list[dict[str, Any]]]:
    """Train every T run, extending an arm's grid at an edge by the rule, until no best is at an edge or no
    extension is left."""
    grids = Grids.first(spec)
    while True:
        plan = t_plan(spec, grids, out, jobs, progress)
        rows = rows_of(spec, train_grid(plan), spec.steps)
        grew = []
        for arm in spec.arms:
            best = best_lr.choose(rows, spec.arm_key, arm, best_against_best.select_or_inf, key=spec.tune)
            if best.at_edge and best.lr is not None and grids.extensions[arm] < spec.max_extensions:
                grew.append(f"{arm} at {grids.extend(arm, best.lr):g}")
        if not grew:
            return grids, plan, rows
        plan.phase(f"a best value is at an edge of its grid: extending ({', '.join(grew)})")


def train_half(spec: Spec, t: Plan, t_rows: list[dict[str, Any]], out: Path) -> list[dict[str, Any]]:
    """Every T/2 run (a branch, or a whole run): a T run that diverged before the branch step has no branch, and
    counts as diverged at T/2 too."""
    axes = [spec.arm_key, spec.tune, SEED_AXIS]
    gone = gone_before_branch(t_rows, axes, spec.branch_step)
    half = skipping(half_plan(spec, t, out), gone)
    rows = rows_of(spec, train_grid(half), spec.half_steps)
    for r in t_rows:
        if point(r, axes) in gone:
            rows.append({**_combo(spec, r), best_against_best.STEPS: spec.half_steps, "status": "diverged",
                         "diverged_at_step": r.get("diverged_at_step"), "final_val_loss": math.inf,
                         best_against_best.SELECT: None, "select_source": None, "run_dir": r.get("run_dir")})
    return rows


def _combo(spec: Spec, row: dict[str, Any]) -> dict[str, str]:
    return {k: row[k] for k in (spec.arm_key, spec.tune, SEED_AXIS)}


def train_all(spec: Spec, out: Path, jobs: int, progress: bool) -> tuple[Grids, list[dict[str, Any]]]:
    """T runs (with the extensions), then T/2; ``Unfinished`` never escapes (no deadline here)."""
    grids, plan, t_rows = train_t(spec, out, jobs, progress)
    return grids, t_rows + train_half(spec, plan, t_rows, out)


__all__ = ["BranchPlan", "Grids", "Unfinished", "rows_of", "train_all", "value_text"]
