"""How long an ablation will take, measured on this machine before it starts, and the seeds a budget buys.

No committed runs time a user's own question, so the estimate is measured: two short calibration runs of the
baseline's config (2 and 8 steps, each evaluated once at its end) give the time of a step (their difference over
6 steps) and the fixed cost of a run (start-up and one evaluation: the rest). A run of T steps then costs the fixed
part plus T steps plus its further evaluations (each about the fixed part's evaluation share, counted at a third of
a step per window batch: a forward pass of the same windows); a T/2 decay branch costs the fixed part and the steps
after its branch point. ``--jobs`` single-threaded runs share the machine, so the elapsed time is the runs' own
time over the jobs. Runs already finished in the folder are not counted. Extensions at an edge are not known in
advance: the plan names their cost per point.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from normtrain.ablate.runs import Grids, base_overrides, half_plan, t_plan, value_text
from normtrain.ablate.spec import Spec
from normtrain.study.grid import reusable

CALIBRATION_STEPS = (2, 8)


@dataclass
class Timing:
    step_s: float
    fixed_s: float
    eval_s: float

    def run_s(self, steps: int, evals: int) -> float:
        return self.fixed_s + steps * self.step_s + max(0, evals - 1) * self.eval_s


def calibrate(spec: Spec, jobs: int) -> Timing:
    """Two short runs of the baseline at the grid's middle value, on this machine, in a scratch folder, with the
    threads a run will have (one each when ``jobs`` > 1: normtrain/study/grid.py's workers)."""
    import torch

    from normtrain.config import compose
    from normtrain.training.trainer import train

    threads = torch.get_num_threads()
    if jobs > 1:
        torch.set_num_threads(1)
    try:
        walls = calibration_walls(spec, compose, train)
    finally:
        torch.set_num_threads(threads)
    step_s = max(1e-4, (walls[1] - walls[0]) / (CALIBRATION_STEPS[1] - CALIBRATION_STEPS[0]))
    fixed_s = max(0.0, walls[0] - CALIBRATION_STEPS[0] * step_s)
    cfg = compose([*spec.shared, f"{spec.arm_key}={spec.baseline}"])
    windows = spec.select_windows + 1
    eval_s = math.ceil(windows / cfg.train.batch_size) * step_s / 3
    return Timing(step_s, fixed_s, eval_s)


def calibration_walls(spec: Spec, compose, train) -> list[float]:
    walls = []
    value = value_text(spec.grid[len(spec.grid) // 2])
    with tempfile.TemporaryDirectory(prefix="normtrain-ablate-calibration-") as tmp:
        for steps in CALIBRATION_STEPS:
            overrides = [*base_overrides(spec, steps, None), f"{spec.arm_key}={spec.baseline}", f"{spec.tune}={value}",
                         "train.eval_every=0", "logger=none", "train.progress=false", "optim.warmup_steps=0"]
            t0 = time.perf_counter()
            train(compose(overrides), run_dir=Path(tmp) / f"steps{steps}")
            walls.append(time.perf_counter() - t0)
    return walls


def evals(steps: int, eval_every: int, start: int = 0) -> int:
    if eval_every <= 0:
        return 1
    return len(range(start, steps, eval_every)) + 1


@dataclass
class Estimate:
    t_runs: int
    half_runs: int
    to_run: int
    own_s: float
    elapsed_s: float
    jobs: int
    per_extension_s: float  # one more grid point for one arm (its seeds, T and T/2)

    def text(self, spec: Spec) -> str:
        half = (f"{self.half_runs} decay branches at {spec.half_steps} steps (from step {spec.branch_step})"
                if spec.branch else f"{self.half_runs} complete runs at {spec.half_steps} steps")
        return (f"{self.t_runs} runs at {spec.steps} steps ({len(spec.arms)} arms × {len(spec.grid)} values of "
                f"{spec.tune} × {len(spec.seeds)} seeds) and {half}; {self.to_run} to train (the rest are "
                f"finished in the folder): about {self.elapsed_s / 60:.1f} min at --jobs {self.jobs} "
                f"({self.own_s / 60:.1f} min of their own). A best at an edge adds a point: about "
                f"{self.per_extension_s / 60:.1f} min each, at most {spec.max_extensions} per arm")


def estimate(spec: Spec, out: Path, jobs: int, timing: Timing) -> Estimate:
    from normtrain.config import compose

    grids = Grids.first(spec)
    t = t_plan(spec, grids, out, jobs, progress=False)
    h = half_plan(spec, t, out)
    cfg = compose([*spec.shared, f"{spec.arm_key}={spec.baseline}"])
    every = int(cfg.train.eval_every)
    t_s = timing.run_s(spec.steps, evals(spec.steps, every))
    start = spec.branch_step or 0
    h_s = timing.run_s(spec.half_steps - start, evals(spec.half_steps, every, start))
    combos = t.combos()
    todo_t = [c for c in combos if not reusable(t, c, False)]
    todo_h = [c for c in combos if not reusable(h, c, False)]
    own = len(todo_t) * t_s + len(todo_h) * h_s
    return Estimate(len(combos), len(combos), len(todo_t) + len(todo_h), own, own / max(1, jobs), jobs,
                    len(spec.seeds) * (t_s + h_s) / max(1, jobs))


def seeds_for(spec: Spec, out: Path, jobs: int, timing: Timing, minutes: float) -> tuple[int, Estimate]:
    """The most seeds (up to the spec's) whose runs fit ``minutes`` at ``jobs``; 0 when not even 2 fit."""
    from dataclasses import replace

    for n in range(len(spec.seeds), 1, -1):
        found = estimate(replace(spec, seeds=spec.seeds[:n]), out, jobs, timing)
        if found.elapsed_s <= minutes * 60:
            return n, found
    return 0, estimate(replace(spec, seeds=spec.seeds[:2]), out, jobs, timing)
