"""``normtrain-reproduce NAME|all [--scale cpu|gpu] [--budget MINUTES] [--seeds N] [--smoke | --quick]
[OVERRIDES...]`` and ``reproduce()``.

Runs one experiment end to end: its grid of runs (``--jobs`` at a time, each in its own single-threaded
process; ``--jobs 1``: in this process), the analysis, and the write-up in ``experiments/NAME/``. Runs that
already finished with the same config are reused, so an interrupted experiment (or a later day) picks up where it
stopped and recomputes only the analysis. ``--scale gpu`` plans the strongest version of the experiment that fits
``--budget`` minutes on this machine's GPU (normtrain/reproduce/gpu_plan.py), runs it packed side by side and
writes ``experiments/NAME-gpu/`` with the runs' summaries and metrics; a later invocation continues the plan.
``--smoke`` (a few steps: the pipeline) and ``--quick`` (one seed at the registered steps, each arm at one lr:
normtrain/reproduce/quick.py) are not results: they write their own folders, never a committed one, and every
output says so (normtrain/reproduce/marks.py). A result names the code that ran it, so outside them the checkout
must be clean (committed). Exit codes:
0 when the write-up was written (whatever the verdict) or a GPU plan's budget ran out (run it again to go on), 2
for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from normtrain.data.tokenizer import workers
from normtrain.reproduce import carry, gpu_plan, marks
from normtrain.reproduce import quick as quick_mode
from normtrain.reproduce.catalog import EXPERIMENTS
from normtrain.reproduce.cpu_estimate import NOT_COUNTED, RUNS_CSV, CpuEstimate, estimate, total_text
from normtrain.reproduce.gpu_plan import GpuPlan
from normtrain.reproduce.gpu_scale import ASSUMED_H100, Device
from normtrain.reproduce.index import update_index
from normtrain.reproduce.writeup import write
from normtrain.study.branches import half_share
from normtrain.study.grid import Unfinished
from normtrain.study.plan import SCALES, SEED_AXIS, Plan, expand, seed_list, smoke_settings, sweep_axes
from normtrain.study.preregistration import analysis_files, declaration, declaration_files
from normtrain.study.provenance import plan_folders, refuse_mixed, refuse_stale
from normtrain.util.errors import StudyError

PROG = "normtrain-reproduce"
DEFAULT_BUDGET_MIN = gpu_plan.DEFAULT_BUDGET_MIN  # --scale gpu: at least this many minutes (gpu_plan.default_budget)


class ReproduceError(ValueError):
    """Bad input: reported in one message, exit code 2."""


def device_name(cfg) -> str:
    import torch

    if cfg.train.device != "cpu" and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"CPU ({workers()} cores)"


def default_jobs(scale: str) -> int:
    """Runs at a time at --scale cpu: one per core (single-threaded runs). The GPU scale's plan sizes its own."""
    return workers()


def check_request(name: str, scale: str, seeds: int | None, jobs: int | None, budget: float,
                  overrides: Sequence[str]) -> None:
    """Every problem with the request in one message (exit 2)."""
    problems = []
    if name not in EXPERIMENTS:
        problems.append(f"unknown experiment {name!r}; allowed: {', '.join(EXPERIMENTS)} (or 'all')")
    if scale not in SCALES:
        problems.append(f"--scale {scale!r}; allowed: {', '.join(SCALES)}")
    if seeds is not None and seeds < 1:
        problems.append(f"--seeds {seeds}: need at least 1")
    if jobs is not None and jobs < 1:
        problems.append(f"--jobs {jobs}: need at least 1")
    if budget is not None and not budget > 0:
        problems.append(f"--budget {budget}: minutes on the GPU, more than 0")
    if bad := [o for o in overrides if "=" not in o]:
        problems.append(f"overrides look like KEY=VALUE (e.g. data=local_text data.path=books/); got {bad}")
    if problems:
        raise ReproduceError("; ".join(problems))


def split_overrides(grid: dict[str, list[str]], overrides: Sequence[str]) -> list[str]:
    """Apply the overrides of grid axes to ``grid`` (sweep syntax allowed: a,b or range()); the rest, returned,
    go to every run."""
    rest = []
    for o in overrides:
        key, value = o.split("=", 1)
        if key in grid:
            try:
                grid[key] = expand(key, value)
            except Exception as err:  # Hydra's parser: not a value or a sweep
                raise ReproduceError(f"{o}: not a value or a sweep ({err})") from None
        else:
            rest.append(o)
    return rest


def make_plan(name: str, scale: str = "cpu", seeds: int | None = None, smoke: bool = False,
              overrides: Sequence[str] = (), out: str | Path | None = None, runs_dir: str | Path | None = None,
              fresh: bool = False, progress: bool = True, jobs: int | None = None,
              budget: float | None = None, device: Device | None = None, quick: bool = False) -> Plan:
    """Validate the request and expand the experiment's grid (at --scale gpu: plan it, or read the plan an
    earlier invocation made in the results folder; ``budget`` None: the default, gpu_plan.default_budget)."""
    check_request(name, scale, seeds, jobs, budget, overrides)
    check_mode(smoke, quick, scale, seeds)
    exp = EXPERIMENTS[name]
    grid = sweep_axes(name)
    rest = split_overrides(grid, overrides)
    if seeds is not None:
        grid[SEED_AXIS] = seed_list(grid[SEED_AXIS], seeds)  # the registration's seeds first, never the pilot's
    out, runs_dir = folders(name, scale, smoke, quick, out, runs_dir)
    base, budgeted, keep, chosen = [f"experiment={name}", *rest], None, exp().keeps_at(scale), None
    if scale == "gpu":
        budgeted = gpu_request(name, exp, base, grid, list(overrides), budget, device, out, fresh)
        base, grid = list(budgeted.base), {k: list(v) for k, v in budgeted.grid.items()}
    if smoke:
        from normtrain.config import compose

        extra, grid = smoke_settings(compose(base), grid)
        base += extra
    if quick:
        grid, keep, chosen = quick_mode.plan(exp, grid, keep, quick_mode.committed_folder(name) / "runs.csv")
    command = " ".join([PROG, name, *(["--scale", scale] if scale != "cpu" else []),
                        *(["--budget", f"{budgeted.budget_min:g}"] if budgeted else []),
                        *(["--seeds", str(seeds)] if seeds else []), *(["--smoke"] if smoke else []),
                        *(["--quick"] if quick else []), *overrides])
    plan = Plan(name=name, scale=scale, smoke=smoke, base=base, grid=grid, runs_dir=Path(runs_dir), out=out,
                command=command, fresh=fresh, progress=progress, keep=keep, budget=budgeted, quick=chosen,
                jobs=jobs or (1 if smoke else budgeted.jobs if budgeted else default_jobs(scale)))
    validate_plan(plan, grid)
    return plan


def check_mode(smoke: bool, quick: bool, scale: str, seeds: int | None) -> None:
    """--quick is one seed of the CPU design: with --smoke, --seeds or --scale gpu it would be another mode."""
    if quick and (problems := [text for bad, text in (
            (smoke, "--smoke (a few steps) and --quick (the registered steps, one seed) are two modes: pick one"),
            (seeds is not None, "--quick runs one seed (the registration's first); --seeds is for the full run"),
            (scale != "cpu", "--quick is one seed of the CPU design; --scale gpu plans its own seeds")) if bad]):
        raise ReproduceError("; ".join(problems))


def folders(name: str, scale: str, smoke: bool, quick: bool, out: str | Path | None,
            runs_dir: str | Path | None) -> tuple[Path, Path]:
    """The results folder and the runs folder. A smoke or quick run's are its own (``multirun/reproduce/NAME-smoke``
    or ``-quick``, the report in ``report/``), and a results folder that holds a full result is refused for them:
    a run that is not a result never overwrites one."""
    suffix = "-gpu" if scale == "gpu" else ""
    mode = "-smoke" if smoke else "-quick" if quick else ""
    default_runs = Path("multirun") / "reproduce" / f"{name}{suffix}{mode}"
    out = Path(out) if out else default_runs / "report" if mode else Path("experiments") / f"{name}{suffix}"
    if runs_dir is None:
        runs_dir = out / "runs" if scale == "gpu" and not smoke else default_runs
    if mode and (found := quick_mode.full(out / "result.json")) is not None:
        raise ReproduceError(f"{out} holds a full result ({found.get('verdict')}); a {mode[1:]} run is not one and "
                             "never writes over it: leave out --out (its own folder is the default) or name another")
    return out, Path(runs_dir)


def gpu_request(name: str, exp, base: list[str], grid: dict[str, list[str]], overrides: list[str], budget: float,
                device: Device | None, out: Path, fresh: bool) -> GpuPlan:
    """The plan an earlier invocation left in ``out`` for the same overrides (continued whatever this invocation's
    budget), or a new one for this machine's GPU (``device`` overrides it: an assumed one, or a test's)."""
    try:
        earlier = None if fresh else gpu_plan.load(out, name, overrides)
    except gpu_plan.PlanMismatch as err:
        raise ReproduceError(str(err)) from None
    if earlier is not None:
        return earlier
    device = device or Device.detect()
    if device is None:
        raise ReproduceError("--scale gpu plans and runs on a CUDA GPU, and torch sees none here "
                             "(torch.cuda.is_available() is False); --plan-only prints the plan for an H100 "
                             "without running it, and --scale cpu runs here")
    return gpu_plan.make(name, exp.gpu_recipe, base, grid, exp().keeps_at("gpu"), overrides, budget, device,
                         exp.half_budget)


def validate_plan(plan: Plan, grid: dict[str, list[str]]) -> None:
    from normtrain.config import validate
    from normtrain.util.errors import NormtrainError

    if not plan.combos():
        raise ReproduceError(f"the overrides leave no run of {plan.name}'s grid (it runs only some combinations of "
                             f"its axes: see configs/experiment/{plan.name}.yaml); axes: "
                             + "; ".join(f"{k}={','.join(v)}" for k, v in grid.items()))
    try:
        validate(plan.compose(plan.combos()[0]))
    except NormtrainError as err:
        raise ReproduceError(str(err)) from None
    except Exception as err:  # Hydra: an unknown key or group option in the overrides
        raise ReproduceError(f"the overrides do not compose: {err}") from None


def reproduce(name: str, scale: str = "cpu", seeds: int | None = None, smoke: bool = False,
              overrides: Sequence[str] = (), out: str | Path | None = None, runs_dir: str | Path | None = None,
              fresh: bool = False, progress: bool = True, jobs: int | None = None,
              budget: float | None = None, device: Device | None = None, quick: bool = False,
              allow_dirty: bool = False) -> dict[str, Any]:
    """Run experiment ``name`` end to end; returns what ``result.json`` holds plus ``readme`` (its path). At
    --scale gpu an invocation whose budget ran out before the plan's last run returns ``verdict: unfinished``."""
    from normtrain.util.provenance import code_state

    plan = make_plan(name, scale, seeds, smoke, overrides, out, runs_dir, fresh, progress, jobs, budget, device,
                     quick)
    exp = EXPERIMENTS[name]()
    code = code_state()
    result_run = not (smoke or quick)  # a smoke or quick run is not a result: it may run uncommitted code
    if quick:
        plan.phase(f"quick: {plan.quick.text()}")
    if result_run and code.get("code_dirty"):
        raise ReproduceError("the checkout has uncommitted changes to its code (normtrain/, configs/, scripts/): "
                             "a result must name the code that ran it, so commit them first (git status shows "
                             "what changed), or use --smoke to try the pipeline")
    record = declaration(declaration_files(name))  # read before any run: what was declared when the runs began
    code["analysis_code"] = declaration(analysis_files(name))
    if result_run and record.get("dirty") is not False:
        print(f"{PROG}: warning: the checks of {name} ({', '.join(record['files'])}) are not committed; the "
              "result will say so", file=sys.stderr)
    if result_run and scale == "cpu":
        carry.restore(plan)  # the finished runs an earlier machine packed (--pack), before any is trained
    if exp.registration.protocol >= 5 and result_run and not fresh:  # v5: one training code, refused up front
        refuse_stale(plan_folders(plan), code["training_code_digest"], "--fresh trains them again, or --runs-dir")
    started, started_at = time.time(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    if plan.budget is not None:
        gpu_plan.begin_budget(plan, budget if budget is not None else plan.budget.budget_min)
    try:
        rows = exp.measure(plan)
    except Unfinished as err:
        return gpu_plan.unfinished(plan, err, time.time() - started, started_at)
    if exp.registration.protocol >= 5 and result_run:
        code["runs_code"] = refuse_mixed(rows, allow_dirty, str(plan.runs_dir))
    plan.phase("analysing the runs")
    findings = exp.analyse(rows, plan)
    timing = {"wall_time_s": time.time() - started, "reused_run_time_s": plan.reused_s, "jobs": plan.jobs,
              "run_time_s": sum(r.get("wall_time_s") or 0.0 for r in rows)}
    if plan.budget is not None:
        gpu_plan.end_budget(plan, timing["wall_time_s"], started_at)
    plan.phase(f"writing {plan.out}")
    readme = write(exp, plan, rows, findings, timing=timing, device=device_name(plan.compose(plan.combos()[0])),
                   declared=record, code=code, started_at=started_at)
    if result_run:
        carry.drop(plan.out)
        update_index(plan.out.parent / "README.md", order=list(EXPERIMENTS))
    result = json.loads((plan.out / "result.json").read_text())
    return {**result, "readme": readme}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Reproduce a deep-model stability result: run its grid, analyse, write experiments/NAME/.",
        epilog="experiments: " + ", ".join(EXPERIMENTS))
    p.add_argument("name", help="an experiment, or 'all'")
    p.add_argument("overrides", nargs="*", help="extra config overrides for every run, e.g. data=local_text "
                                                "data.path=books/ or train.device=cpu")
    p.add_argument("--scale", default="cpu", help="cpu (the committed results; hours on 2 cores) or gpu (the "
                                                  "same design, a model ≥ 4× larger, steps and seeds from --budget, "
                                                  "runs packed side by side on one GPU)")
    p.add_argument("--budget", type=float, default=None,
                   help=f"--scale gpu: minutes on the GPU (default {DEFAULT_BUDGET_MIN:g}, or the least the smallest "
                        "plan that can be judged needs where that is more); a larger budget buys more steps and "
                        "seeds; a later invocation continues the plan")
    p.add_argument("--plan-only", action="store_true",
                   help="print the plan and exit: at cpu the runs, those already finished, and the time the rest "
                        "take by the committed runs' own times; at gpu a table of the plan (without a GPU: for an "
                        "assumed H100)")
    p.add_argument("--pack", action="store_true", help="--scale cpu: pack the runs folder's finished runs (no "
                   "checkpoints) into experiments/NAME/unfinished_runs/ and exit; committed, the next "
                   "invocation on a fresh machine restores them (normtrain/reproduce/carry.py)")
    p.add_argument("--json", action="store_true", help="--plan-only --scale gpu: the whole plan as JSON (what "
                                                       "plan.json will hold) instead of the table")
    p.add_argument("--seeds", type=int, default=None, help="seeds per configuration (default: the experiment's)")
    p.add_argument("--smoke", action="store_true", help="a few steps of a reduced grid: checks the pipeline only")
    p.add_argument("--quick", action="store_true", help="one seed at the registered steps, each arm at its committed "
                                                        "best lr: the direction of the primary difference, no verdict")
    p.add_argument("--out", default=None, help="results folder (default experiments/NAME, or experiments/NAME-gpu)")
    p.add_argument("--runs-dir", default=None, help="where the run folders go (default multirun/reproduce/NAME; at "
                                                    "--scale gpu the results folder's runs/)")
    p.add_argument("--fresh", action="store_true", help="retrain runs that already finished (--scale gpu: and "
                                                        "plan anew)")
    p.add_argument("--jobs", type=int, default=None, help="runs at a time, each a single-threaded process "
                                                          "(default: one per core at --scale cpu; the plan's at gpu)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--allow-dirty", action="store_true",
                   help="protocol v5: accept runs trained from uncommitted code (the result says so); runs trained "
                        "by different training code are refused whatever this says")
    return p.parse_intermixed_args(argv)  # overrides may come after the options


def show_plan(name: str, args: argparse.Namespace) -> CpuEstimate | Plan | None:
    """--plan-only: nothing run or written (but a pack of finished runs restored, as a run would). At --scale cpu
    the runs and the time they will take (returned, for 'all' to add up); at gpu the plan, returned for ``main`` to
    print in one table (or as JSON)."""
    if args.scale == "cpu":
        return show_cpu_plan(name, args)
    plan = make_plan(name, "gpu", args.seeds, args.smoke, args.overrides, args.out, args.runs_dir, args.fresh,
                     False, args.jobs, args.budget, None if Device.detect() else ASSUMED_H100, args.quick)
    return plan


def pack_runs(name: str, args: argparse.Namespace) -> None:
    """--pack: the runs folder's finished runs into the results folder's pack (normtrain/reproduce/carry.py)."""
    if args.scale != "cpu" or args.smoke or args.quick:
        raise ReproduceError("--pack carries a CPU result's runs; --scale gpu keeps them in the results folder "
                             "(commit runs/), and --smoke or --quick runs are not a result")
    exp, plan = EXPERIMENTS[name](), make_plan(name, "cpu", args.seeds, False, args.overrides, args.out,
                                               args.runs_dir, False, False, args.jobs)
    if exp.keep_checkpoints and exp.checkpoint_stand_in is None:
        raise ReproduceError(f"{name}'s analysis reads its runs' checkpoints (a scoring), which a pack leaves "
                             "behind; it has to run whole on one machine")
    runs = exp.runs_plan(plan)
    branch_step = exp.budgets(runs)[1].branch_step if exp.half_budget else None
    try:
        if exp.checkpoint_stand_in is not None:  # the probes, made now from the checkpoints that stay behind
            exp.make_stand_ins(runs, carry.packable_t_runs(runs, exp.half_budget, branch_step))
        print(carry.pack(runs, exp.half_budget, branch_step))
    except carry.PackError as err:
        raise ReproduceError(str(err)) from None


def print_gpu_plans(plans: list[Plan], as_json: bool) -> None:
    """The GPU plans in one short table, or (``--json``) each in full as plan.json will hold it."""
    from dataclasses import asdict

    if as_json:
        found = [{k: v for k, v in asdict(p.budget).items() if k not in ("measured", "invocations")} for p in plans]
        print(json.dumps(found[0] if len(found) == 1 else found, indent=1))
    else:
        print(gpu_plan.table([(p.budget, len(p.combos())) for p in plans]))


def show_cpu_plan(name: str, args: argparse.Namespace) -> CpuEstimate | None:
    """The CPU plan's runs, those a rerun reuses, and the time the rest take by the committed runs' own times."""
    plan = make_plan(name, "cpu", args.seeds, args.smoke, args.overrides, args.out, args.runs_dir, args.fresh,
                     False, args.jobs, quick=args.quick)
    if not (args.smoke or args.quick) and carry.restore(plan):  # as the run itself would, so that they count
        print(f"{name}: finished runs restored from {plan.out / carry.PACK} into {plan.runs_dir}")
    if args.smoke:
        print(f"{name} --smoke: {len(plan.combos())} runs of a few steps each, under a minute in all")
        return None
    exp = EXPERIMENTS[name]()
    rest = split_overrides(sweep_axes(name), args.overrides)
    runs, half = exp.runs_plan(plan), None
    if exp.half_budget:
        runs, half_plan, _ = exp.budgets(runs)
        half = (half_plan, half_share(runs.compose(runs.combos()[0])))
    keeps = (exp.keep_checkpoints, exp.checkpoint_stand_in, exp.half_checkpoints)
    found = estimate(runs, committed_runs(plan), rest, keeps, half, exp.committed_row)
    if plan.quick is not None:
        found.name = f"{name} --quick ({plan.quick.text()})"
    print(found.text())
    return found


def committed_runs(plan: Plan) -> Path:
    """The runs.csv that times the plan: the results folder's, else the committed one in this checkout."""
    here = plan.out / RUNS_CSV
    return here if here.is_file() else quick_mode.committed_folder(plan.name) / RUNS_CSV


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    if args.out and len(names) > 1:
        print(f"{PROG}: --out names one folder; with 'all' each experiment writes its own", file=sys.stderr)
        return 2
    estimates = []
    for name in names:
        try:
            if args.plan_only or args.pack:
                estimates.append(pack_runs(name, args) if args.pack else show_plan(name, args))
                continue
            result = reproduce(name, args.scale, args.seeds, args.smoke, args.overrides, args.out, args.runs_dir,
                               args.fresh, not args.no_progress, args.jobs, args.budget, quick=args.quick,
                               allow_dirty=args.allow_dirty)
        except (ReproduceError, StudyError) as err:
            print(f"{PROG}: {err}", file=sys.stderr)
            return 2
        print(marks.closing_line(name, result))
    if gpu := [e for e in estimates if isinstance(e, Plan)]:
        print_gpu_plans(gpu, args.json)
    if timed := [e for e in estimates if isinstance(e, CpuEstimate)]:
        if len(names) > 1:
            print(total_text(timed))
        if any(e.to_run for e in timed):
            print(NOT_COUNTED + ".")
    return 0
