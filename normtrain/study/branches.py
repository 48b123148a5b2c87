"""Half the budget for about a tenth of a run: a T/2 measurement as a decay branch off the T run's stable phase.

Under ``optim.schedule=wsd`` a T/2 run's learning rate equals the T run's at every step before its own decay starts
(training/optim.py), so the T run keeps a checkpoint there (``train.keep_ckpt_at``) and the T/2 run resumes it with
``train.max_steps=T/2``: step for step the same run as one trained from scratch to T/2 (the same lr, the same
batches; tests/training/test_branch_and_selection.py checks it bit for bit). Under another schedule the T/2 runs are
trained whole. Protocol v5's budget stability reads both budgets (normtrain/study/decision.py, claim.py); an
ablation (normtrain/ablate/runs.py) and a reproduction (normtrain/reproduce/runner.py, ``half_budget``) plan them here.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from omegaconf import DictConfig

from normtrain.study.grid import CODE_COLUMNS
from normtrain.study.plan import Plan

STEPS = "steps"  # a row's budget: T, or T/2 for the half-budget runs
HALF_SUFFIX = "_half"  # the T/2 runs' folder: the T runs' folder name + this


def half_of(steps: int, warmup: int, decay_fraction: float, branch: bool) -> tuple[int, int | None]:
    """T/2 and, for a WSD branch, the step it leaves the T run at: the T/2 run's own decay start (training/optim.py's
    rule), which the T run passes in its stable phase."""
    half = steps // 2
    if not branch:
        return half, None
    return half, max(warmup, half - round(decay_fraction * half))


def reproduction_half(cfg: DictConfig) -> tuple[int, int | None]:
    """``half_of_config`` for a reproduction: a T/2 too short for a decay of its own (a smoke run's 2 steps) is
    trained whole instead of branched at its last step."""
    half, branch_step = half_of_config(cfg)
    return (half, None) if branch_step is not None and branch_step >= half else (half, branch_step)


def half_of_config(cfg: DictConfig) -> tuple[int, int | None]:
    """``half_of`` for a composed config (a branch only under ``optim.schedule=wsd``)."""
    o = cfg.optim
    return half_of(int(cfg.train.max_steps), int(o.warmup_steps), float(o.get("decay_fraction", 0.0)),
                   o.schedule == "wsd")


def keep_overrides(branch_step: int | None) -> list[str]:
    """What a T run adds so that its branch can leave it: the checkpoint at the branch step, whole."""
    if branch_step is None:
        return []
    return [f"train.keep_ckpt_at=[{branch_step}]", "train.ckpt_format=full"]


class BranchPlan(Plan):
    """The T/2 runs: each resumes its T run's checkpoint at the branch step, in a folder of its own."""

    t_plan: Plan | None = None
    branch_step: int | None = None

    def overrides(self, combo: dict[str, str]) -> list[str]:
        own = super().overrides(combo)
        if self.branch_step is None:
            return own
        ckpt = self.t_plan.run_dir(combo) / f"ckpt_step{self.branch_step}.pt"
        return [*own, f"train.resume={ckpt}"]


def half_runs_dir(runs_dir: Path) -> Path:
    """Where a plan's T/2 runs live: beside its T runs' folder, named after it + ``HALF_SUFFIX``."""
    return runs_dir.with_name(runs_dir.name + HALF_SUFFIX)


def half_share(cfg: DictConfig) -> float:
    """The share of a T run's steps its T/2 run trains: from the branch step to T/2 (a WSD decay branch), or T/2
    whole under another schedule (the time models of --plan-only and --scale gpu)."""
    half, branch_step = reproduction_half(cfg)
    return (half - (branch_step or 0)) / int(cfg.train.max_steps)


def is_half_run(run_dir: Path) -> bool:
    """Whether a run folder holds a T/2 run: ``branch_plan``'s runs live in the T runs' folder name + ``_half``."""
    return Path(run_dir).parent.name.endswith(HALF_SUFFIX)


def branch_plan(t: Plan, base: list[str], branch_step: int | None, runs_dir: Path) -> BranchPlan:
    """The T/2 runs of ``t``'s grid (``base``: their shared overrides, ``train.max_steps=T/2`` among them)."""
    half = BranchPlan(name=t.name, scale=t.scale, smoke=t.smoke, base=base, grid=t.grid, runs_dir=runs_dir, out=t.out,
                      jobs=t.jobs, progress=t.progress, tool=t.tool, keep=t.keep, fresh=t.fresh,
                      deadline=t.deadline, budget=t.budget, quick=t.quick, command=t.command)
    half.t_plan, half.branch_step = t, branch_step
    return half


def with_branch_point(t: Plan, branch_step: int | None) -> Plan:
    """``t`` whose runs keep the checkpoint their branches leave from."""
    return replace(t, base=[*t.base, *keep_overrides(branch_step)])


def gone_before_branch(t_rows: list[dict], axes: list[str], branch_step: int | None) -> set[tuple]:
    """The grid points whose T run diverged at or before the branch step: they have no checkpoint to branch from,
    and count as diverged at T/2 too."""
    if branch_step is None:
        return set()
    return {point(r, axes) for r in t_rows
            if r.get("status") == "diverged" and (r.get("diverged_at_step") or 0) <= branch_step}


def lost_at_half(t_rows: list[dict], axes: list[str], gone: set[tuple]) -> list[dict]:
    """The T/2 rows of the points in ``gone``: diverged, and trained by their T run's code (its ``code_commit``,
    ``code_dirty`` and ``training_code_digest`` columns), so that the provenance check reads them as the runs
    they stand for, not as runs of unknown code."""
    code = {point(r, axes): {k: r[k] for k in CODE_COLUMNS if k in r} for r in t_rows}
    return [{**dict(p), **code.get(p, {}), "status": "diverged", "final_val_loss": math.inf} for p in sorted(gone)]


def point(row: dict, axes: list[str]) -> tuple:
    return tuple((a, str(row[a])) for a in axes)


def only(plan: Plan, points: set[tuple]) -> Plan:
    """A copy of ``plan`` (a T plan or a ``BranchPlan``) that runs only the grid points in ``points``, counting its
    own reused time."""
    import copy

    part, keep, axes = copy.copy(plan), plan.keep, list(plan.grid)
    part.keep = lambda c: (keep is None or keep(c)) and point(c, axes) in points
    part.reused_s = 0.0
    return part


def skipping(half: BranchPlan, gone: set[tuple]) -> BranchPlan:
    """``half`` without the grid points in ``gone``."""
    keep, axes = half.keep, list(half.grid)
    half.keep = lambda c: (keep is None or keep(c)) and point(c, axes) not in gone
    return half
