"""The GPU scale's plan for one experiment: the grown configs, the rung the budget buys, ``plan.json``, and what
the runs measured (normtrain/reproduce/gpu_scale.py has the model of time and memory behind it).

Without a ``--budget`` the budget is the default, ``DEFAULT_BUDGET_MIN``, or, where the lowest rung of the
ladder (the fewest seeds the checks can judge, at the CPU scale's steps) needs more, the least that holds it
(:func:`default_budget`): the default plan always fits. The planner never buys a fit with fewer seeds or a
narrower grid: below 3 seeds the rules cannot judge, and the grid is the registered design.

``plan.json`` lives in the results folder (``experiments/NAME-gpu/``) with the runs' summaries and metrics
(``runs/``, no checkpoints). A later invocation reads it and runs what is left, so a plan larger than one
invocation's budget finishes over several; it never re-plans unless asked (``--fresh``), so a finished run is
never wasted on a changed plan.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normtrain.reproduce.gpu_scale import (
    ASSUMPTIONS,
    MIN_SEEDS,
    SAFETY,
    STEP_KEYS,
    Device,
    Recipe,
    Size,
    ladder,
    packing,
    wall_s,
)
from normtrain.study.branches import half_runs_dir, half_share
from normtrain.study.plan import SEED_AXIS, Plan, seed_list
from normtrain.util import markdown
from normtrain.util.atomic import write_text

if TYPE_CHECKING:
    from normtrain.study.grid import Unfinished

PLAN_JSON = "plan.json"
DEFAULT_BUDGET_MIN = 8.0  # minutes on one H100/H200: the default where the lowest rung fits in it


class PlanMismatch(ValueError):
    """plan.json was made for another request than this invocation's."""


@dataclass
class GpuPlan:
    """What ``plan.json`` holds: the plan, how it was sized, and (once runs ran) what was measured."""

    name: str
    budget_min: float
    device: dict[str, Any]
    recipe: dict[str, Any]
    rung: dict[str, Any]  # seeds, steps (the factor on the runs' steps), index on the ladder
    base: list[str]  # the overrides every run gets: the experiment's, the user's, the growth
    grid: dict[str, list[str]]  # the CPU grid's axes (step counts and widths grown) and the rung's seeds
    jobs: int
    memory_gib_per_run: float
    estimate_s: float
    scale_up: dict[str, float]  # width, depth, tokens and their product over the CPU scale
    overrides: list[str]  # the user's overrides the plan was made with
    fits: bool = True  # False: even the lowest rung needs more than the budget (several invocations finish it)
    budget_default: bool = False  # no --budget: DEFAULT_BUDGET_MIN, or the least the lowest rung needs
    half_share: float = 0.0  # a T/2 run's steps over its T run's (0: no T/2 runs; plans made before them say 0)
    assumptions: list[str] = field(default_factory=lambda: list(ASSUMPTIONS))
    created_at: str = ""
    measured: dict[str, Any] = field(default_factory=dict)
    invocations: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> GpuPlan:
        return cls(**{k: v for k, v in record.items() if k in cls.__dataclass_fields__})

    def save(self, folder: Path) -> None:
        from normtrain.util.atomic import write_json

        write_json(folder / PLAN_JSON, asdict(self))

    def text(self) -> str:
        """The plan in a few lines, for the terminal and the README."""
        growth = ", ".join(f"{k} × {v:g}" for k, v in self.scale_up.items())
        default = (" (the default)" if self.budget_min <= DEFAULT_BUDGET_MIN else " (the default: the least that holds "
                   "the lowest rung)") if self.budget_default else ""
        return (f"{self.name} at --scale gpu, budget {self.budget_min:g} min{default} on {self.device['name']}: "
                f"{self.rung['seeds']} seeds, steps × {self.rung['steps']:g} (rung {self.rung['index']} of the "
                f"ladder), {self.jobs} runs side by side (≈ {self.memory_gib_per_run:.1f} GiB each); the model and "
                f"its tokens against the CPU scale: {growth}; estimated {self.estimate_s / 60:.1f} min"
                + ("" if self.fits else ", more than the budget: later invocations continue it")
                + ". The throughput behind the estimate is assumed, not measured: " + "; ".join(self.assumptions)
                + ".")


def grow(cfg, grid: dict[str, list[str]], recipe: Recipe, steps: float) -> tuple[list[str], dict[str, list[str]]]:
    """The overrides and the axes of the GPU scale: the recipe's factors on the CPU config ``cfg`` (an axis of the
    grid is grown value by value instead), and every step count × ``steps``."""
    axes = {k: list(v) for k, v in grid.items()}
    over: list[str] = []

    def scaled(key: str, value, factor: float) -> None:
        if factor == 1 or value is None:
            return
        if key in axes:
            axes[key] = [str(_times(v, factor)) for v in axes[key]]
        else:
            over.append(f"{key}={_times(value, factor)}")

    m, t = cfg.model, cfg.train
    scaled("model.d_model", m.d_model, recipe.width)
    if "model.d_model" not in axes:  # a width the design compares keeps its heads: they are part of the design
        scaled("model.n_heads", m.n_heads, recipe.width)
        scaled("model.d_ff", m.d_ff, recipe.width)
    scaled("model.n_layers", m.n_layers, recipe.depth)
    scaled("model.seq_len", m.seq_len, recipe.seq)
    scaled("train.batch_size", t.batch_size, recipe.batch)
    scaled("train.global_batch_size", t.global_batch_size, recipe.batch)
    for key in STEP_KEYS:
        group, name = key.split(".")
        scaled(key, cfg[group][name] or None, steps)  # 0 (off) stays off
    return over, axes


def _times(value, factor: float) -> int:
    """A count × factor, rounded, never below 1 (a count of 0, "off", stays 0)."""
    return 0 if float(value) == 0 else max(1, round(float(value) * factor))


def growth(cpu: Size, gpu: Size) -> dict[str, float]:
    """Width, depth and tokens (sequences × length × steps) of a GPU run over its CPU twin, and their product."""
    width, depth = gpu.d / cpu.d, gpu.layers / cpu.layers
    tokens = (gpu.tokens * max(gpu.steps, 1)) / (cpu.tokens * max(cpu.steps, 1))
    return {"width": round(width, 3), "depth": round(depth, 3), "tokens": round(tokens, 3),
            "product": round(width * depth * tokens, 3)}


def make(name: str, recipe: Recipe, base: list[str], grid: dict[str, list[str]], keep, overrides: list[str],
         budget_min: float | None, device: Device, half_budget: bool = False) -> GpuPlan:
    """The highest rung of the ladder whose estimated wall time fits ``SAFETY`` of the budget (the lowest when
    none does), with its configs, packing and growth; ``budget_min`` None: :func:`default_budget`.
    ``half_budget``: every run also has its T/2 run (normtrain/study/branches.py), timed as a run of its own for
    the steps it trains (``half_share`` of the T run's)."""
    from normtrain.config import compose

    cpu_plan = Plan(name, "cpu", False, base, grid, Path("."), Path("."), keep=keep)
    cpu_cfg = compose(cpu_plan.overrides(cpu_plan.combos()[0]))
    rungs = ladder(len(grid[SEED_AXIS]), recipe.lengthen)
    seeds = seed_list(grid[SEED_AXIS], max(r.seeds for r in rungs))
    over, axes = grow(cpu_cfg, grid, recipe, 1.0)
    probe = Plan(name, "gpu", False, [*base, *over], {**axes, SEED_AXIS: seeds}, Path("."), Path("."), keep=keep)
    combos = probe.combos()
    sizes = _sizes(probe, combos)
    share = half_share(probe.compose(combos[0])) if half_budget else 0.0
    defaulted, chosen = budget_min is None, []
    for index, rung in enumerate(rungs):
        runs = [replace(sizes[_key(c)], steps=round(sizes[_key(c)].steps * rung.steps)) for c in combos
                if c[SEED_AXIS] in seeds[:rung.seeds]]
        runs += [half_run(r, share) for r in runs] if share else []
        jobs = packing(runs, device, len(runs))
        estimate = wall_s(runs, device, jobs, recipe)
        budget_min = default_budget(estimate) if budget_min is None else budget_min
        if chosen and estimate > SAFETY * budget_min * 60:
            break
        chosen.append((index, rung, jobs, estimate, max(r.memory_gib() for r in runs)))
    index, rung, jobs, estimate, memory = chosen[-1]
    over, axes = grow(cpu_cfg, grid, recipe, rung.steps)
    axes[SEED_AXIS] = seeds[:rung.seeds]
    gpu_cfg = compose([*base, *over, *(f"{k}={v[0]}" for k, v in axes.items())])
    return GpuPlan(name=name, budget_min=budget_min, device=asdict(device), recipe=asdict(recipe),
                   rung={"index": index, "seeds": rung.seeds, "steps": rung.steps}, base=[*base, *over], grid=axes,
                   jobs=jobs, memory_gib_per_run=round(memory, 2), estimate_s=round(estimate, 1),
                   scale_up=growth(Size.of(cpu_cfg), Size.of(gpu_cfg)), overrides=list(overrides),
                   fits=estimate <= SAFETY * budget_min * 60, budget_default=defaulted, half_share=round(share, 4),
                   created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def half_run(size: Size, share: float) -> Size:
    """A T run's T/2 run, as the time model sees it: ``share`` of its steps and evaluations, a start of its own."""
    return replace(size, steps=max(1, round(size.steps * share)), evals=max(1, round(size.evals * share)))


def default_budget(lowest_s: float) -> float:
    """The budget without a --budget: ``DEFAULT_BUDGET_MIN``, or the whole minutes whose ``SAFETY`` share holds the
    lowest rung's estimate ``lowest_s`` where that is more."""
    return max(DEFAULT_BUDGET_MIN, float(math.ceil(lowest_s / (SAFETY * 60) - 1e-9)))


def table(plans: list[tuple[GpuPlan, int]]) -> str:
    """The plans (each with its number of runs) in a few lines for the terminal: per experiment the runs, seeds, the
    factor on the steps, the runs side by side, the estimate, the budget and whether it fits (plan.json, or --json,
    holds the rest)."""
    rows = [[p.name, str(runs), str(p.rung["seeds"]), f"{p.rung['steps']:g}", str(p.jobs),
             f"{p.memory_gib_per_run:.1f}", f"{p.estimate_s / 60:.1f}",
             f"{p.budget_min:g}" + (" (default)" if p.budget_default else ""),
             "yes" if p.fits else f"no: {invocations_needed(p)} invocations"] for p, runs in plans]
    lines = [f"--scale gpu on {plans[0][0].device['name']}; minutes estimated from assumed throughput, not measured:",
             markdown.table(["experiment", "runs", "seeds", "steps ×", "side by side", "GiB a run", "estimate min",
                             "budget min", "fits"], rows, [False, True, True, True, True, True, True, True, False])]
    if any(p.budget_default and p.budget_min > DEFAULT_BUDGET_MIN for p, _ in plans):
        lines.append(f"(default): {DEFAULT_BUDGET_MIN:g} min, or the least that holds the smallest plan the checks "
                     f"can judge ({MIN_SEEDS} seeds at the CPU scale's steps) where that needs more.")
    lines.append("The assumptions, the growth and the configs: --json (what plan.json will hold).")
    return "\n".join(lines)


def _key(combo: dict[str, str]) -> tuple:
    return tuple((k, v) for k, v in combo.items() if k != SEED_AXIS)


def _sizes(plan, combos: list[dict[str, str]]) -> dict[tuple, Size]:
    """One composed Size per combination of the non-seed axes (composing every seed's would cost seconds)."""
    from normtrain.config import compose

    sizes: dict[tuple, Size] = {}
    for combo in combos:
        if _key(combo) not in sizes:
            sizes[_key(combo)] = Size.of(compose(plan.overrides(combo)))
    return sizes


def load(folder: Path, name: str, overrides: list[str]) -> GpuPlan | None:
    """The plan an earlier invocation made in ``folder`` (None: there is none); PlanMismatch when it was made
    for another experiment or other overrides."""
    path = folder / PLAN_JSON
    if not path.is_file():
        return None
    plan = GpuPlan.from_dict(json.loads(path.read_text()))
    if plan.name != name or plan.overrides != list(overrides):
        raise PlanMismatch(f"{path} holds the plan of `{plan.name}` with overrides {plan.overrides or 'none'}; this "
                           f"invocation asks for `{name}` with {list(overrides) or 'none'}: run it with the same "
                           "overrides to continue that plan, or --fresh to plan (and train) anew")
    return plan


def measured(run_dirs: list[Path], elapsed_s: float) -> dict[str, Any]:
    """What the finished runs measured, beside the plan's assumptions: each run's tokens per second over its whole
    wall time (evaluations and start included), their median, and all runs' tokens over the invocation's elapsed
    time (the packed throughput)."""
    rates, tokens = [], 0
    for folder in run_dirs:
        path = folder / "summary.json"
        if not path.is_file():
            continue
        s = json.loads(path.read_text())
        t = (s.get("config") or {}).get("train") or {}
        seq = ((s.get("config") or {}).get("model") or {}).get("seq_len") or 0
        trained = (s.get("steps") or 0) - (s.get("resumed_from_step") or 0)  # a T/2 branch: from its branch step
        n = trained * (s.get("global_batch_size") or t.get("batch_size") or 0) * seq
        if s.get("wall_time_s"):
            rates.append(n / s["wall_time_s"])
            tokens += n
    rates.sort()
    median = rates[len(rates) // 2] if rates else None
    return {"runs": len(rates), "median_run_tokens_per_s": round(median) if median else None,
            "packed_tokens_per_s": round(tokens / elapsed_s) if elapsed_s > 0 and tokens else None,
            "elapsed_s": round(elapsed_s, 1), "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def deadline(budget_min: float) -> float:
    """The time.monotonic() after which no run starts: the budget less what the analysis and the write-up take
    (a tenth of it, at most a minute)."""
    return time.monotonic() + budget_min * 60 - min(60.0, 6.0 * budget_min)


def invocations_needed(plan: GpuPlan) -> int:
    return max(1, math.ceil(plan.estimate_s / (SAFETY * plan.budget_min * 60)))


def begin_budget(plan: Plan, budget: float) -> None:
    """The GPU plan is saved before any run (a later invocation continues it), and this invocation stops starting
    runs when its own budget is spent."""
    plan.out.mkdir(parents=True, exist_ok=True)
    plan.budget.save(plan.out)
    if plan.runs_dir.is_relative_to(plan.out):  # kept with the results: summaries and metrics, not checkpoints
        for folder in (plan.runs_dir, half_runs_dir(plan.runs_dir)):  # the T runs and the T/2 runs
            folder.mkdir(parents=True, exist_ok=True)
            write_text(folder / ".gitignore", "# checkpoints (the final one, kept only for a probe, and the one a "
                                              "T/2 branch leaves from) and locks stay out of git\n"
                                              "*.pt\nnormtrain.lock\n")
    plan.deadline = deadline(budget)
    plan.phase(plan.budget.text())


def end_budget(plan: Plan, elapsed_s: float, started_at: str) -> None:
    """What this invocation measured, beside the plan's assumptions, into plan.json."""
    halves = half_runs_dir(plan.runs_dir)  # the T/2 runs, where the design has them
    plan.budget.measured = measured([*(plan.run_dir(c) for c in plan.combos()),
                                     *(halves / plan.run_dir(c).name for c in plan.combos())], elapsed_s)
    plan.budget.invocations.append({"started_at": started_at, "elapsed_s": round(elapsed_s, 1), "finished": True})
    plan.budget.save(plan.out)


def unfinished(plan: Plan, err: Unfinished, elapsed_s: float, started_at: str) -> dict[str, Any]:
    """The budget ran out first: the invocation is recorded in plan.json and the next one continues."""
    plan.budget.invocations.append({"started_at": started_at, "elapsed_s": round(elapsed_s, 1), "finished": False,
                                    "runs_done": err.done, "runs": err.total})
    plan.budget.save(plan.out)
    key = (f"{err.done} of {err.total} runs done when this invocation's budget ran out; run the same command again "
           "to continue the plan")
    return {"verdict": "unfinished", "key": key, "wall_time_s": elapsed_s, "readme": plan.out / "plan.json"}
