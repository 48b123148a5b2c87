"""One invocation of a reproduction: the grid expanded into runs, where they go, and the budget they share.

The grid is read from ``hydra.sweeper.params`` of ``configs/experiment/NAME.yaml`` (``sweep_axes``), so
``normtrain -m experiment=NAME`` and ``normtrain-reproduce NAME`` run the same jobs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

SCALES = ("cpu", "gpu")
SEED_AXIS = "train.seed"
SMOKE_STEPS = 4  # a smoke run's length, in steps
SMOKE_OVERRIDES = [f"train.max_steps={SMOKE_STEPS}", "train.eval_every=0", "train.eval_batches=1",
                   "train.eval_windows=8", "monitor.every=2"]
SMOKE_LONGEST = 40  # a smoke run's longest run, in steps, where the run length is an axis of the grid
STEPS_AXIS = "train.max_steps"
WARMUP_AXIS = "optim.warmup_steps"


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
    quick: Any = None  # --quick's choice of lrs (normtrain.reproduce.quick.QuickPlan), None otherwise
    tool: str = "normtrain-reproduce"  # the command whose phases are said (normtrain-ablate's runs too)

    def phase(self, text: str) -> None:
        """One line when a phase of the invocation starts, so no phase is silent (with progress on)."""
        if self.progress:
            from normtrain.util.runlog import say

            say(f"{self.tool}: {self.name}: {text}")

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


def smoke_grid(grid: dict[str, list[str]]) -> dict[str, list[str]]:
    """A smoke run's grid: the first seed and the first two values of every other axis. Where the run length
    (``train.max_steps``) is an axis, its values would override the smoke run's few steps: they shrink in
    proportion, the longest to ``SMOKE_LONGEST`` steps (at least 1 each)."""
    small = {k: v[:1] if k == SEED_AXIS else v[:2] for k, v in grid.items()}
    if STEPS_AXIS in small:
        longest = max(int(v) for v in small[STEPS_AXIS])
        small[STEPS_AXIS] = [str(max(1, round(int(v) * SMOKE_LONGEST / longest))) for v in small[STEPS_AXIS]]
    return small


def smoke_settings(cfg: DictConfig, grid: dict[str, list[str]]) -> tuple[list[str], dict[str, list[str]]]:
    """A smoke run's overrides and grid (``cfg``: the registered config the grid's runs share). Its warm-up
    shrinks with its steps, in proportion (100 of 1000 registered steps: 1 of the smoke's 4; a warm-up of 0 stays
    0, one of more at least 1), along a warm-up axis value by value.

    Shrinking it is the honest choice: a smoke run that kept the registered 100-step warm-up over its 4 steps would
    train at 1.7% of its lr and never reach the decay, which the trainer rightly warns about; silencing that
    warning for the smoke's runs would hide that the smoke checked a schedule that is all ramp. Shrunk, the smoke
    runs the schedule's whole shape (ramp, peak, decay), and says nothing about settings it chose itself; a
    warm-up a user sets is shrunk with the rest, since the smoke's length is the smoke's choice too."""
    registered = max(int(v) for v in grid[STEPS_AXIS]) if STEPS_AXIS in grid else int(cfg.train.max_steps)
    small = smoke_grid(grid)
    steps = max(int(v) for v in small[STEPS_AXIS]) if STEPS_AXIS in small else SMOKE_STEPS
    factor = min(1.0, steps / max(registered, 1))
    overrides = list(SMOKE_OVERRIDES)
    if cfg.train.get("select_windows"):  # held-out windows between the smoke's 8 judged ones: at most 7 fit
        overrides.append("train.select_windows=4")
    if WARMUP_AXIS in small:
        small[WARMUP_AXIS] = [str(_shrunk(v, factor)) for v in small[WARMUP_AXIS]]
    elif cfg.optim.warmup_steps:
        overrides.append(f"{WARMUP_AXIS}={_shrunk(cfg.optim.warmup_steps, factor)}")
    return overrides, small


def _shrunk(steps, factor: float) -> int:
    return 0 if int(steps) == 0 else max(1, round(int(steps) * factor))


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


def seed_list(cpu_seeds: list[str], n: int) -> list[str]:
    """``n`` seeds: the grid's first (a v4 re-registration's are new, not 0, 1, ...), then new ones after its
    largest."""
    seeds = [int(s) for s in cpu_seeds]
    extra = range(max(seeds, default=-1) + 1, max(seeds, default=-1) + 1 + max(0, n - len(seeds)))
    return [str(s) for s in [*seeds[:n], *extra]]
