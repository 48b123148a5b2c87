"""``normtrain-ablate KEY=A,B[,...] [OVERRIDES...] [--tune KEY] [--grid V,...] [--seeds N] [--baseline A]
[--margin NATS] [--max-extensions K] [--jobs N] [--budget MINUTES] [--out DIR] [--plan-only]``: the user's own
"is A better than B?", judged best against best.

Plans the runs and says how long they take (measured here), trains them ``--jobs`` at a time, extends an arm's grid
where its best is at an edge, trains the T/2 runs, decides by protocol v5 (normtrain/study/decision.py) and writes
``ablation.json``, ``verdict.md`` and the figures into ``--out``. A folder holds one ablation: run the same command
again and finished runs are reused; another ablation there is refused. Exit codes: 0 with a decision (whatever it
is), 2 for bad input or a refused folder (nothing trained, nothing overwritten), 130 when interrupted (the finished
runs stay).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from normtrain.ablate.spec import MAX_EXTENSIONS, SEEDS, TUNE, Asked, Spec, parse
from normtrain.study.decision import ALPHA, MARGIN
from normtrain.util.errors import ConfigError, DataError, StudyError

PROG = "normtrain-ablate"
SPEC_JSON = "spec.json"  # written before the first run: which ablation the folder holds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG, description="Is X better than Y? Each arm at its own best learning rate, paired seeds, a "
                               "decision that holds at half the budget: better, worse, equivalent, or inconclusive "
                               "with its reason.",
        epilog="example: normtrain-ablate placement=pre,peri model.n_layers=24 --seeds 5")
    p.add_argument("overrides", nargs="*", help="KEY=A,B,... names the arms (one key); every other override is "
                                                "shared by all of them")
    p.add_argument("--tune", default=TUNE, help=f"the key tuned for every arm (default {TUNE})")
    p.add_argument("--grid", default=None, help="its values, comma separated, at least 3 (default: the config's "
                                                "value ÷ 2, itself, × 2)")
    p.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds per arm and value (default {SEEDS})")
    p.add_argument("--baseline", default=None, help="the reference arm (default: the first)")
    p.add_argument("--margin", type=float, default=MARGIN,
                   help=f"nats: the equivalence band ±δ and the smallest effect of interest (default {MARGIN:g})")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"one-sided level of each test (default {ALPHA:g})")
    p.add_argument("--max-extensions", type=int, default=MAX_EXTENSIONS,
                   help=f"points an arm's grid may grow by at an edge (default {MAX_EXTENSIONS})")
    p.add_argument("--jobs", type=int, default=None, help="runs at a time, each single-threaded (default: one per "
                                                          "core; on a GPU as many as fit its free memory)")
    p.add_argument("--budget", type=float, default=None,
                   help="minutes: the most seeds (down to 5), then the 3 central grid values, then fewer "
                        "seeds, whose runs fit; says what it could not buy")
    p.add_argument("--out", default=None, help="the ablation's folder (default ablations/KEY-A-B)")
    p.add_argument("--plan-only", action="store_true", help="print the runs and the time they take, then stop")
    p.add_argument("--allow-dirty", action="store_true",
                   help="accept runs trained from uncommitted code (the verdict says so)")
    p.add_argument("--no-report", action="store_true", help="skip report/report.html (every run's curves, the "
                                                            "decision on top)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_intermixed_args(argv)


def spec_of(args: argparse.Namespace) -> Spec:
    problems = []
    if args.jobs is not None and args.jobs < 1:
        problems.append(f"--jobs {args.jobs}: give at least 1")
    if args.budget is not None and not args.budget > 0:
        problems.append(f"--budget {args.budget}: minutes, more than 0")
    return parse(Asked(list(args.overrides), args.tune, args.grid, args.seeds, args.baseline, args.margin,
                       args.alpha, args.max_extensions, problems))


def claim_folder(out: Path, spec: Spec, dry: bool, command: str = PROG) -> None:
    """One ablation per folder: a folder that holds another (by its spec.json) is refused, listing the
    differences; an empty or new one is claimed (unless ``dry``)."""
    from normtrain.util.atomic import write_json

    recorded = out / SPEC_JSON
    if recorded.is_file():
        try:
            other = json.loads(recorded.read_text())
        except (OSError, ValueError) as err:
            raise StudyError(f"{recorded}: unreadable ({err}); it is not this ablation's: use another --out") from None
        differ = spec.same_question(other)
        if differ:
            raise StudyError(f"{out} holds another ablation (it differs in {', '.join(differ)}); nothing was "
                              f"trained or overwritten. Use another --out, or continue that one with its own command: "
                              f"{other.get('command', '(see ' + str(recorded) + ')')}")
    elif out.is_dir() and any(out.iterdir()):
        raise StudyError(f"{out} is not empty and holds no ablation ({SPEC_JSON} missing); use another --out")
    if not dry:
        out.mkdir(parents=True, exist_ok=True)
        write_json(recorded, {**spec.as_dict(), "command": command})


def ablate(spec: Spec, out: Path, jobs: int, progress: bool = True, allow_dirty: bool = False,
           command: str = PROG, with_report: bool = True) -> dict[str, Any]:
    """Train (or reuse) every run, decide, write the record: the API behind the command."""
    from normtrain.ablate.runs import train_all
    from normtrain.study import report
    from normtrain.study.best_against_best import analyse
    from normtrain.study.provenance import refuse_mixed

    t0 = time.time()
    grids, rows = train_all(spec, out, jobs, progress)
    provenance = refuse_mixed(rows, allow_dirty, str(out))
    analysis = analyse(rows, spec.arm_key, spec.arms, spec.baseline, spec.tune, spec.steps, spec.half_steps,
                       spec.protocol, extensions_left=False)
    grown = {"values": grids.values, "extensions": grids.extensions}
    rec = report.record(spec, analysis, grown, rows, provenance, command, time.time() - t0)
    report.draw(out, spec, analysis)
    verdict = report.write_verdict(out, spec, analysis, grown, rec, command)
    record_path = report.write_record(out, rec)
    if with_report:
        write_report(spec, out, analysis)
    log_group(spec, out, rec)
    return {"record": rec, "verdict_md": verdict, "ablation_json": record_path, "analysis": analysis}


def write_report(spec: Spec, out: Path, analysis) -> None:
    """normtrain-compare's page of every run (``report/report.html``) with the best-against-best section on top; a
    report that cannot be drawn costs a warning, never the decision already written."""
    from normtrain.compare.cli import CompareError, compare
    from normtrain.study.report import section_html
    from normtrain.util.runlog import say

    try:
        compare([str(out / "runs"), str(out / "runs_half")], out=out / "report",
                by=[spec.arm_key, spec.tune, "train.max_steps"], section=section_html(spec, analysis, out),
                title=f"normtrain-ablate: {spec.arm_key} = {', '.join(spec.arms)}")
    except (CompareError, OSError, ValueError) as err:
        say(f"{PROG}: warning: the report was not written ({err}); verdict.md and ablation.json were")


def log_group(spec: Spec, out: Path, rec: dict[str, Any]) -> None:
    """One W&B run for the ablation in its runs' group, with the decisions and the table in its summary (offline
    without an API key; nothing with logger=none)."""
    from normtrain.config import compose

    cfg = compose([*spec.shared, f"{spec.arm_key}={spec.baseline}"])
    if not (cfg.logger.backends or {}).get("wandb"):
        return
    from normtrain.loggers.wandb import ablation_summary

    ablation_summary(cfg, group_of(spec, cfg), out, {a: d["decision"] for a, d in rec["decisions"].items()},
                     (out / "verdict.md").read_text())


def group_of(spec: Spec, cfg) -> str:
    return cfg.logger.group or f"ablate_{spec.name}"


def with_group(spec: Spec) -> Spec:
    """The runs share one W&B group: the user's ``logger.group``, else ``ablate_<name>``."""
    from dataclasses import replace

    if any(o.startswith("logger.group=") for o in spec.shared):
        return spec
    return replace(spec, shared=(*spec.shared, f"logger.group=ablate_{spec.name}"))


def main(argv: Sequence[str] | None = None) -> int:
    from normtrain.data.tokenizer import workers

    args = parse_args(argv)
    command = shlex.join([PROG, *(argv if argv is not None else sys.argv[1:])])
    try:
        spec = with_group(spec_of(args))
        out = Path(args.out or Path("ablations") / spec.name)
        jobs = args.jobs or default_jobs(spec, workers())
        claim_folder(out, spec, dry=True)
        if args.plan_only or args.budget is not None:
            spec = plan(spec, out, jobs, args.budget, args.plan_only)
            if args.plan_only:
                return 0
        claim_folder(out, spec, dry=False, command=command)
        result = ablate(spec, out, jobs, not args.no_progress, args.allow_dirty, command, not args.no_report)
    except (StudyError, ConfigError, DataError) as err:  # the user's to fix: one message, exit 2
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the finished runs stay in the folder: run the same command again to go on",
              file=sys.stderr)
        return 130
    from normtrain.study.report import sentence

    for d in result["analysis"].decisions.values():
        print(sentence(spec, d).replace("**", ""))
    print(f"  written: {result['verdict_md']}, {result['ablation_json']}")
    return 0


def default_jobs(spec: Spec, cores: int) -> int:
    """One run per core on a CPU; on a GPU as many as fit its free memory (normtrain/ablate/estimate.py)."""
    from normtrain.ablate.estimate import gpu_jobs

    return gpu_jobs(spec, cores) or cores


def plan(spec: Spec, out: Path, jobs: int, budget: float | None, show: bool) -> Spec:
    """Measure the runs' time here, print the plan, and with ``budget`` cut seeds and grid to what fits (saying
    what it could not buy)."""
    from normtrain.ablate.estimate import calibrate, estimate, fit_budget

    print(f"{PROG}: timing two short runs of the baseline on this machine ...", file=sys.stderr)
    timing = calibrate(spec, jobs)
    found = estimate(spec, out, jobs, timing)
    if budget is not None:
        fitted = fit_budget(spec, out, jobs, timing, budget)
        if fitted is None:
            raise StudyError(f"--budget {budget:g}: even 2 seeds at 3 values of {spec.tune} take more at --jobs "
                             f"{jobs} (the full plan: about {found.elapsed_s / 60:.1f} min); give a larger budget "
                             "or fewer steps")
        if fitted.missed:
            print(f"{PROG}: --budget {budget:g} min could not buy " + "; nor ".join(fitted.missed) + ". A later "
                  "invocation with a larger budget adds them (finished runs reused)", file=sys.stderr)
        spec, found = fitted.spec, fitted.found
    print(f"{PROG}: {spec.name}: {found.text(spec)}")
    if show:
        for arm in spec.arms:
            print(f"  {spec.arm_key}={arm}: {spec.tune} {', '.join(f'{v:g}' for v in spec.grid)}; seeds "
                  f"{', '.join(map(str, spec.seeds))}")
    return spec
