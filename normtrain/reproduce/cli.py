"""``normtrain-reproduce NAME|all [--scale cpu|gpu] [--seeds N] [--smoke] [OVERRIDES...]`` and ``reproduce()``.

Runs one experiment end to end: its grid of runs (``--jobs`` at a time, each in its own single-threaded
process; ``--jobs 1``: in this process), the analysis, and the write-up in ``experiments/NAME/``
(``--scale gpu``: ``experiments/NAME-gpu/``). Runs that already finished with the same config are reused, so
an interrupted experiment (or a later day) picks up where it stopped and recomputes only the analysis. A
result names the code that ran it, so outside ``--smoke`` the checkout must be clean (committed). Exit codes:
0 when the write-up was written (whatever the verdict), 2 for bad input.
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
from normtrain.reproduce.catalog import EXPERIMENTS
from normtrain.reproduce.preregistration import declaration, declaration_files
from normtrain.reproduce.runner import SCALES, SEED_AXIS, SMOKE_OVERRIDES, Plan, expand, sweep_axes
from normtrain.reproduce.writeup import update_index, write

PROG = "normtrain-reproduce"


class ReproduceError(ValueError):
    """Bad input: reported in one message, exit code 2."""


def device_name(cfg) -> str:
    import torch

    if cfg.train.device != "cpu" and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"CPU ({workers()} cores)"


def default_jobs(scale: str) -> int:
    """Runs at a time: one per core on a CPU (single-threaded runs), one on a GPU."""
    return 1 if scale == "gpu" else workers()


def make_plan(name: str, scale: str = "cpu", seeds: int | None = None, smoke: bool = False,
              overrides: Sequence[str] = (), out: str | Path | None = None, runs_dir: str | Path | None = None,
              fresh: bool = False, progress: bool = True, jobs: int | None = None) -> Plan:
    """Validate the request and expand the experiment's grid."""
    from normtrain.config import validate
    from normtrain.util.errors import NormtrainError

    if name not in EXPERIMENTS:
        raise ReproduceError(f"unknown experiment {name!r}; allowed: {', '.join(EXPERIMENTS)} (or 'all')")
    if scale not in SCALES:
        raise ReproduceError(f"--scale {scale!r}; allowed: {', '.join(SCALES)}")
    if seeds is not None and seeds < 1:
        raise ReproduceError(f"--seeds {seeds}: need at least 1")
    if jobs is not None and jobs < 1:
        raise ReproduceError(f"--jobs {jobs}: need at least 1")
    exp = EXPERIMENTS[name]
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ReproduceError(f"overrides look like KEY=VALUE (e.g. data=local_text data.path=books/); got {bad}")
    grid = sweep_axes(name)
    if scale == "gpu":
        grid.update({k: expand(k, v) for k, v in exp.gpu.grid.items()})
    rest = []
    for o in overrides:  # an override of a grid axis replaces the axis (sweep syntax allowed: a,b or range())
        key, value = o.split("=", 1)
        if key in grid:
            try:
                grid[key] = expand(key, value)
            except Exception as err:  # Hydra's parser: not a value or a sweep
                raise ReproduceError(f"{o}: not a value or a sweep ({err})") from None
        else:
            rest.append(o)
    if seeds is not None:
        grid[SEED_AXIS] = [str(s) for s in range(seeds)]
    if smoke:
        grid = {k: v[:1] if k == SEED_AXIS else v[:2] for k, v in grid.items()}
    suffix = "-gpu" if scale == "gpu" else ""
    base = [f"experiment={name}", *(exp.gpu.overrides if scale == "gpu" else ()),
            *(SMOKE_OVERRIDES if smoke else ()), *rest]
    default_runs = Path("multirun") / "reproduce" / f"{name}{suffix}{'-smoke' if smoke else ''}"
    runs_dir = Path(runs_dir) if runs_dir else default_runs
    if out is None:
        out = runs_dir / "report" if smoke else Path("experiments") / f"{name}{suffix}"
    command = " ".join([PROG, name, *(["--scale", scale] if scale != "cpu" else []),
                        *(["--seeds", str(seeds)] if seeds else []), *(["--smoke"] if smoke else []), *overrides])
    plan = Plan(name=name, scale=scale, smoke=smoke, base=base, grid=grid, runs_dir=runs_dir, out=Path(out),
                command=command, fresh=fresh, progress=progress, keep=exp().keeps,
                jobs=jobs or (1 if smoke else default_jobs(scale)))  # a smoke run's runs are too short for workers
    if not plan.combos():
        raise ReproduceError(f"the overrides leave no run of {name}'s grid (it runs only some combinations of its "
                             f"axes: see configs/experiment/{name}.yaml); axes: "
                             + "; ".join(f"{k}={','.join(v)}" for k, v in grid.items()))
    try:
        validate(plan.compose(plan.combos()[0]))
    except NormtrainError as err:
        raise ReproduceError(str(err)) from None
    except Exception as err:  # Hydra: an unknown key or group option in the overrides
        raise ReproduceError(f"the overrides do not compose: {err}") from None
    return plan


def reproduce(name: str, scale: str = "cpu", seeds: int | None = None, smoke: bool = False,
              overrides: Sequence[str] = (), out: str | Path | None = None, runs_dir: str | Path | None = None,
              fresh: bool = False, progress: bool = True, jobs: int | None = None) -> dict[str, Any]:
    """Run experiment ``name`` end to end; returns what ``result.json`` holds plus ``readme`` (its path)."""
    from normtrain.util.provenance import code_state

    plan = make_plan(name, scale, seeds, smoke, overrides, out, runs_dir, fresh, progress, jobs)
    exp = EXPERIMENTS[name]()
    code = code_state()
    if not smoke and code.get("code_dirty"):
        raise ReproduceError("the checkout has uncommitted changes to its code (normtrain/, configs/, scripts/): "
                             "a result must name the code that ran it, so commit them first (git status shows "
                             "what changed), or use --smoke to try the pipeline")
    record = declaration(declaration_files(name))  # read before any run: what was declared when the runs began
    if not smoke and record.get("dirty") is not False:
        print(f"{PROG}: warning: the checks of {name} ({', '.join(record['files'])}) are not committed; the "
              "result will say so", file=sys.stderr)
    started, started_at = time.time(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows = exp.measure(plan)
    findings = exp.analyse(rows, plan)
    timing = {"wall_time_s": time.time() - started, "reused_run_time_s": plan.reused_s, "jobs": plan.jobs,
              "run_time_s": sum(r.get("wall_time_s") or 0.0 for r in rows)}
    readme = write(exp, plan, rows, findings, timing=timing, device=device_name(plan.compose(plan.combos()[0])),
                   declared=record, code=code, started_at=started_at)
    if not smoke:
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
    p.add_argument("--scale", default="cpu", help="cpu (minutes on a laptop; the committed results) or gpu "
                                                  "(wider, deeper, longer, more seeds)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per configuration (default: the experiment's)")
    p.add_argument("--smoke", action="store_true", help="a few steps of a reduced grid: checks the pipeline only")
    p.add_argument("--out", default=None, help="results folder (default experiments/NAME, or experiments/NAME-gpu)")
    p.add_argument("--runs-dir", default=None, help="where the run folders go (default multirun/reproduce/NAME)")
    p.add_argument("--fresh", action="store_true", help="retrain runs that already finished")
    p.add_argument("--jobs", type=int, default=None, help="runs at a time, each a single-threaded process "
                                                          "(default: one per core at --scale cpu, 1 at gpu)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_intermixed_args(argv)  # overrides may come after the options


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    if args.out and len(names) > 1:
        print(f"{PROG}: --out names one folder; with 'all' each experiment writes its own", file=sys.stderr)
        return 2
    for name in names:
        try:
            result = reproduce(name, args.scale, args.seeds, args.smoke, args.overrides, args.out, args.runs_dir,
                               args.fresh, not args.no_progress, args.jobs)
        except ReproduceError as err:
            print(f"{PROG}: {err}", file=sys.stderr)
            return 2
        print(f"{name}: {result['verdict']} ({result['wall_time_s'] / 60:.1f} min). {result['key']}\n"
              f"  written: {result['readme']}")
    return 0
