"""A multirun checked whole before its first job starts: each job composed as its launcher will compose it and
validated as training will, and every problem reported at once (which job, which overrides, what is wrong).

Hydra composes a job when it launches it, and it knows nothing of normtrain's checks: in ``normtrain -m
model.n_heads=2,3,4`` job 0 trained, job 1 failed (3 heads do not divide the width) and job 2 never ran; on
SLURM that failure can come hours in. Hydra's basic sweeper (the default) knows every job in advance, so
``sweep_problems`` expands the sweep the way it does (``BasicSweeper.split_arguments``), composes each job with
the app's own config loader (``load_sweep_config``, as the launchers do) and runs ``validation.problems`` on it.
It runs before the launcher is called (``normtrain.cli.SweepCheck``, a Hydra callback), so it covers every
launcher: in-process, submitit's local one and SLURM. What only the machine that trains can tell (is there a
GPU?) is left to the job when its launcher runs it elsewhere, and the world size is the one the launcher gives a
job (``tasks_per_node × nodes``). Sweepers that choose their jobs as they go (Optuna, Ax) are not checked here.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from normtrain.config.compose import group_options
from normtrain.config.names import composition_problem, override_problems
from normtrain.config.validation import problems
from normtrain.util.errors import NormtrainError

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
# launchers that run every job on this machine (the rest, SLURM's, run them elsewhere)
HERE = ("BasicLauncher", "LocalLauncher", "JoblibLauncher")


@dataclass(frozen=True)
class JobProblems:
    """Job ``number`` of the sweep (Hydra's ``hydra.job.num``), its ``overrides`` and what is wrong with it."""

    number: int
    overrides: list[str]
    problems: list[str]


class SweepError(NormtrainError, ValueError):
    """Jobs of a multirun that would fail: the sweep was not started. Problems every job shares are listed once."""

    def __init__(self, failing: list[JobProblems], jobs: list[list[str]]):
        self.failing, n = failing, len(jobs)
        shared = [p for p in failing[0].problems if all(p in j.problems for j in failing)] if len(failing) == n else []
        varying = _varying(jobs)
        lines = [f"  every job:\n{_listed(shared)}"] if shared else []
        lines += [f"  job {j.number} ({' '.join(o for o in j.overrides if o in varying) or 'no swept value'}):\n"
                  f"{_listed([p for p in j.problems if p not in shared])}"
                  for j in failing if any(p not in shared for p in j.problems)]
        bad = f"every one of its {n} jobs" if len(failing) == n else f"{len(failing)} of its {n} jobs"
        super().__init__(f"the sweep was not started: {bad} would fail, so none was run (nothing trained):\n"
                         + "\n".join(lines) + "\nFix these values, or leave them out of the sweep, and run it again")


class SweepRefused(BaseException):
    """A SweepError on its way out of Hydra's callbacks, which turn every Exception into a warning and go on, to
    the command line (``normtrain.cli.run``: the message, exit 2)."""

    def __init__(self, error: SweepError):
        super().__init__(str(error))
        self.error = error


class SweepCheck(Callback):
    """``check_sweep`` where Hydra calls back before the sweeper starts (``hydra.callbacks`` in configs/config.yaml):
    before any job is launched, whatever the launcher."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        from hydra.core.global_hydra import GlobalHydra

        try:
            check_sweep(config, GlobalHydra.instance().config_loader())
        except SweepError as err:
            raise SweepRefused(err) from None


def check_sweep(config: DictConfig, loader) -> None:
    """Raise SweepError when a job of the multirun ``config`` (composed by Hydra for ``-m``; ``loader``: its
    config loader) has a problem; nothing for a sweep whose jobs are not known in advance."""
    jobs = sweep_jobs(config, loader)
    if jobs is None:
        return
    found = sweep_problems(config, loader, jobs)
    if found:
        raise SweepError(found, jobs)


def sweep_jobs(config: DictConfig, loader) -> list[list[str]] | None:
    """Every job's overrides, in Hydra's order (its job numbers), as the basic sweeper expands them: the
    sweeper's own ``params`` (an experiment's ``hydra.sweeper.params``), then the command line's. None for
    another sweeper."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    sweeper = config.hydra.sweeper
    if sweeper.get("_target_") != BASIC_SWEEPER:
        return None
    params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
    arguments = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    overrides = OverridesParser.create(config_loader=loader).parse_overrides([*params, *arguments])
    return [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


def sweep_problems(config: DictConfig, loader, jobs: list[list[str]]) -> list[JobProblems]:
    """The jobs that cannot train, each with every problem: one that does not compose (an unknown option, a
    misspelt key) says why; one that does is validated for the world size and machine its launcher gives it."""
    launcher = config.hydra.launcher
    here = str(launcher.get("_target_", "")).endswith(HERE)
    world_size = launcher.tasks_per_node * launcher.nodes if "tasks_per_node" in launcher else None
    found, groups = [], group_options()
    for number, overrides in enumerate(jobs):
        try:
            job = loader.load_sweep_config(master_config=config, sweep_overrides=list(overrides))
        except Exception as err:  # Hydra's and OmegaConf's composition errors: the job's problem, not a bug here
            first = composition_problem(err) or _hydras(err)  # Hydra stops at the first; the others too:
            wrong = list(dict.fromkeys([first, *override_problems(list(overrides), groups)]))
            found.append(JobProblems(number, overrides, wrong))
            continue
        if wrong := problems(job, world_size=world_size, on_this_machine=here):
            found.append(JobProblems(number, overrides, wrong))
    return found


def _varying(jobs: list[list[str]]) -> set[str]:
    """The overrides that are not the same in every job: what tells one job from another."""
    return {o for job in jobs for o in job} - set(jobs[0]).intersection(*jobs[1:])


def _hydras(err: BaseException) -> str:
    """Hydra's message in one line: its first line, and its cause's (OmegaConf's reason) when there is one."""
    lines = [str(e).strip().splitlines()[0] for e in (err, err.__cause__) if e is not None and str(e).strip()]
    return "; ".join(dict.fromkeys(lines)) or type(err).__name__


def _listed(problems: list[str]) -> str:
    return "\n".join(f"    - {p}" for p in problems)
