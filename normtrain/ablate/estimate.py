"""How long an ablation will take, measured on this machine before it starts, and the seeds a budget buys.

No committed runs time a user's own question, so the estimate is measured: two short calibration runs of the
baseline's config (2 and 8 steps, each evaluated once at its end) give the time of a step (their difference over
6 steps) and the fixed cost of a run (start-up and one evaluation: the rest). A run of T steps then costs the fixed
part plus T steps plus its further evaluations (each about the fixed part's evaluation share, counted at a third of
a step per window batch: a forward pass of the same windows); a T/2 decay branch costs the fixed part and the steps
after its branch point. ``--jobs`` single-threaded runs share the machine, so the elapsed time is the runs' own
time over the jobs. Runs already finished in the folder are not counted. Extensions at an edge are not known in
advance: the plan names their cost per point. On a GPU the same two runs time the device itself (they replace
the assumed figures ``--scale gpu`` plans with), and ``--jobs`` defaults to the runs that fit its free memory.

``--budget`` (:func:`fit_budget`) buys seeds first down to 5, then trims the grid to its three central values, then
fewer seeds, and says what it could not buy.
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


STATED_SEEDS = 5  # below this the decision's interval is wide; the budget keeps 5 before it keeps the whole grid
GRID_FLOOR = 3  # the fewest values a best can be read from (one each side of it)


@dataclass
class Fitted:
    """What a budget buys: the spec to run, its estimate, and in words what the budget could not buy."""

    spec: Spec
    found: Estimate
    missed: list[str]


def central(grid: tuple[float, ...], n: int = GRID_FLOOR) -> tuple[float, ...]:
    """The ``n`` values around the grid's middle (the config's own value, by the default grid)."""
    ordered = sorted(grid)
    start = max(0, min(len(ordered) - n, len(ordered) // 2 - n // 2))
    return tuple(ordered[start:start + n])


def choices(spec: Spec) -> list[Spec]:
    """Candidate specs, most preferred first: every seed asked down to 5 at the full grid, then at the 3 central
    values, then fewer than 5 seeds (full grid, then central): seeds before grid points while 5 or more remain, as
    5 seeds give the decision a usable interval and 3 values still locate a best (an edge is extended)."""
    from dataclasses import replace

    asked = len(spec.seeds)
    grids = [spec.grid] + ([central(spec.grid)] if len(spec.grid) > GRID_FLOOR else [])
    many = range(asked, min(asked, STATED_SEEDS) - 1, -1)
    few = range(min(asked, STATED_SEEDS) - 1, 1, -1)
    return [replace(spec, grid=g, seeds=spec.seeds[:n]) for part in (many, few) for g in grids for n in part]


def fit_budget(spec: Spec, out: Path, jobs: int, timing: Timing, minutes: float) -> Fitted | None:
    """The most preferred of ``choices`` whose runs fit ``minutes`` at ``jobs`` (None: not even 2 seeds of 3
    values fit), with what it leaves out. Extensions at an edge are not in the budget: the plan names their cost."""
    for option in choices(spec):
        found = estimate(option, out, jobs, timing)
        if found.elapsed_s <= minutes * 60:
            return Fitted(option, found, missed(spec, option, found))
    return None


def missed(asked: Spec, got: Spec, found: Estimate) -> list[str]:
    lost = []
    if len(got.seeds) < len(asked.seeds):
        per_seed = found.per_extension_s * len(got.grid) / max(1, len(got.seeds))
        lost.append(f"seeds {', '.join(map(str, asked.seeds[len(got.seeds):]))} (about {per_seed / 60:.1f} min "
                    "each): the interval is wider for it")
    if dropped := [v for v in asked.grid if v not in got.grid]:
        lost.append(f"{asked.tune} values {', '.join(f'{v:g}' for v in dropped)} (an arm whose best lands at an "
                    "edge of the central three is still extended)")
    return lost


GPT2_VOCAB = 50304  # a sizing bound for a tokenizer other than bytes: its vocabulary is read only once data loads
SAFETY = 0.8  # of the free memory: the estimate leaves out allocator slack and the evaluation batches


def gpu_jobs(spec: Spec, cores: int) -> int | None:
    """On a GPU, the runs that fit its free memory side by side (by normtrain/training/memory.py's estimate of the
    largest arm), at most one per core; None on a CPU (one run per core)."""
    import torch

    from normtrain.config import compose
    from normtrain.training.memory import available, estimate

    cfgs = [compose([*spec.shared, f"{spec.arm_key}={arm}"]) for arm in spec.arms]
    if not torch.cuda.is_available() or str(cfgs[0].train.device).startswith("cpu"):
        return None
    vocab = 257 if cfgs[0].data.get("tokenizer", "bytes") == "bytes" else GPT2_VOCAB
    need = max(estimate(cfg, vocab).total() for cfg in cfgs)
    free, _ = available(torch.device("cuda"))
    return max(1, min(cores, int(free * SAFETY // max(need, 1.0))))
