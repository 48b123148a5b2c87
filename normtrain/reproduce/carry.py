"""Finished runs carried to the next machine in git, for a CPU reproduction longer than one session.

A session's machine is wiped when it ends, and with it ``multirun/``: an experiment that needs more than the
session's hours would start again from nothing. ``normtrain-reproduce NAME --pack`` writes the finished runs'
summaries and logs (never checkpoints) into ``experiments/NAME/unfinished_runs/``, one ``.tar.xz`` per grid point
(its T run and T/2 run, about 0.1 MB: each file far under the repository's 2 MiB limit); committed, the
next invocation on a fresh machine restores them into its runs folder before it trains, reuses them like any
finished run (the config and the training code are checked as always: normtrain/study/grid.py, provenance.py),
and deletes the pack when the experiment's result is written. A probe of a run (``probe/probe.json``) travels with it:
an experiment that probes its trained models (curse_of_depth) probes every T run it packs, since the checkpoint
stays behind (``Experiment.checkpoint_stand_in``); batchnorm_leak's scores (``scores.json``) stand in for the
checkpoints of both budgets, made pair by pair as the runs finish. A T run goes into the pack only with its T/2 branch
finished, because the branch leaves from a checkpoint that stays behind; the runner trains the T runs a few at a
time with their branches right after (``Experiment.train_in_pairs``), so a session's end leaves finished pairs.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

from normtrain.compare.runs import PROBE_DIR
from normtrain.study.branches import half_runs_dir
from normtrain.study.plan import Plan

PACK = "unfinished_runs"  # the folder in the results folder: one FOLDER.tar.xz per grid point
LEFT_BEHIND = (".pt", ".lock")  # checkpoints (too large for git; a restored run is reused, not resumed) and locks
CARRIED_FOLDERS = (PROBE_DIR,)  # a run folder's subfolders that travel with it: what a probe measured


class PackError(ValueError):
    """The experiment or the request cannot be packed: said in one message (exit 2)."""


def status_of(folder: Path) -> dict | None:
    """A run folder's summary when the run finished (completed or diverged), else None."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return summary if summary.get("status") in ("completed", "diverged") else None


def packable(plan: Plan, half_budget: bool, branch_step: int | None) -> list[tuple[str, Path]]:
    """The finished run folders worth carrying, as (part, folder): every finished T/2 run, and each finished T run
    whose T/2 branch no longer needs its checkpoint (the branch finished, or the T run diverged at or before the
    branch step, so that it has none). Without a branch (T/2 runs trained whole, or no T/2 at all) every finished
    run."""
    found = []
    for combo in plan.combos():
        t_dir = plan.run_dir(combo)
        h_dir = half_runs_dir(plan.runs_dir) / t_dir.name
        t, h = status_of(t_dir), status_of(h_dir) if half_budget else None
        gone_early = t is not None and t.get("status") == "diverged" and (
            t.get("diverged_at_step") or 0) <= (branch_step or 0)
        if t is not None and (not half_budget or branch_step is None or h is not None or gone_early):
            found.append(("T", t_dir))
        if h is not None:
            found.append(("half", h_dir))
    return found


def packable_t_runs(plan: Plan, half_budget: bool, branch_step: int | None) -> list[dict[str, str]]:
    """The combos of the T runs ``packable`` would carry."""
    folders = {folder for part, folder in packable(plan, half_budget, branch_step) if part == "T"}
    return [c for c in plan.combos() if plan.run_dir(c) in folders]


def run_files(folder: Path) -> list[tuple[Path, str]]:
    """The run folder's files a pack carries, with their names inside the folder: its own files and those of
    ``CARRIED_FOLDERS``, never a checkpoint or a lock."""
    found = [(f, f.name) for f in sorted(folder.iterdir()) if f.is_file()]
    for sub in CARRIED_FOLDERS:
        if (folder / sub).is_dir():
            found += [(f, f"{sub}/{f.name}") for f in sorted((folder / sub).iterdir()) if f.is_file()]
    return [(f, name) for f, name in found if f.suffix not in LEFT_BEHIND]


def pack(plan: Plan, half_budget: bool, branch_step: int | None) -> str:
    """Write ``PACK`` in the results folder from ``plan``'s finished runs, one archive per grid point (an earlier
    pack's archives are replaced); the line to print."""
    found = packable(plan, half_budget, branch_step)
    if not found:
        raise PackError(f"{plan.runs_dir} holds no finished run of {plan.name} to pack (a T run counts once its T/2 "
                        "branch has finished); --runs-dir names another runs folder")
    target = plan.out / PACK
    partial = plan.out / (PACK + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    by_point: dict[str, list[tuple[str, Path]]] = {}
    for part, folder in found:
        by_point.setdefault(folder.name, []).append((part, folder))
    for name, folders in by_point.items():
        with tarfile.open(partial / f"{name}.tar.xz", "w:xz") as tar:
            for part, folder in folders:
                for file, name in run_files(folder):
                    tar.add(file, arcname=f"{part}/{folder.name}/{name}")
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)  # a pack half written is never the one committed
    size = sum(f.stat().st_size for f in target.iterdir())
    runs = len(plan.combos()) * (2 if half_budget else 1)
    return (f"{plan.name}: {len(found)} of {runs} runs packed into {target}/ ({len(by_point)} files, "
            f"{size / 1e6:.1f} MB, no checkpoints): commit it, and the next invocation restores them before it trains")


def restore(plan: Plan) -> int:
    """Unpack ``PACK`` from the results folder into the runs folders, where a run's folder holds no finished run
    already (a finished run is never overwritten; an unfinished one's leftovers are); how many runs were restored."""
    source = plan.out / PACK
    if plan.fresh or not source.is_dir():
        return 0
    places = {"T": plan.runs_dir, "half": half_runs_dir(plan.runs_dir)}
    restored = there = 0
    for archive in sorted(source.glob("*.tar.xz")):
        with tarfile.open(archive, "r:xz") as tar:
            runs = members(tar, archive, places)
            todo = [(part, folder) for part, folder in sorted(runs) if status_of(places[part] / folder) is None]
            for part, folder in todo:
                shutil.rmtree(places[part] / folder, ignore_errors=True)
                for m in runs[part, folder]:
                    m.name = m.name.split("/", 1)[1]  # FOLDER/FILE, under the part's runs folder
                    tar.extract(m, places[part], filter="data")
            restored, there = restored + len(todo), there + len(runs) - len(todo)
    plan.phase(f"{restored} finished run(s) restored from {source}/, {there} already here")
    return restored


def members(tar: tarfile.TarFile, archive: Path, places: dict[str, Path]) -> dict[tuple[str, str], list]:
    """The archive's files by run (part, folder); anything else in it is refused."""
    runs: dict[tuple[str, str], list[tarfile.TarInfo]] = {}
    for m in tar.getmembers():
        part, *rest = m.name.split("/")
        inside = len(rest) == 2 or (len(rest) == 3 and rest[1] in CARRIED_FOLDERS)
        if part not in places or not inside or not m.isfile() or {rest[0], rest[-1]} & {"", ".", ".."}:
            raise PackError(f"{archive}: {m.name!r} is not a run file that --pack writes; delete the pack, or pack "
                            "the runs again with --pack")
        runs.setdefault((part, rest[0]), []).append(m)
    return runs


def drop(out: Path) -> None:
    """The experiment's result is written: its runs.csv holds every run, so the pack goes (its commit removes it)."""
    shutil.rmtree(out / PACK, ignore_errors=True)
