"""Which code a study's result rests on, and the runs it refuses to mix.

Two digests: the **training code** of each run (``normtrain.util.provenance.training_code_digest``, recorded in its
summary: the packages that build, train and evaluate a model) and the **engine** that decided (this package, the
ablation command and the run labels' thresholds in training/outcome.py). A result whose runs were trained by
different training code, or by code that was not committed, is refused: its numbers could not be traced to one
program. The message says which runs differ and what to do; nothing is deleted.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from normtrain.util.errors import StudyError
from normtrain.util.provenance import source_digest

ENGINE = ("study", "ablate", "training/outcome.py")


def engine_digest() -> str:
    """A digest of the decision's own code (paths and bytes)."""
    return source_digest(ENGINE)


def runs_code(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the runs were trained by: their training-code digests, commits and how many were dirty."""
    trained = [r for r in rows if r.get("run_dir") or "status" in r]  # a forward-only row trained nothing
    digests = Counter(str(r.get("training_code_digest")) for r in trained)
    commits = Counter(str(r.get("code_commit")) for r in trained)
    dirty = [r.get("run_dir") or describe(r) for r in trained if r.get("code_dirty") is True]
    return {"training_code_digests": dict(digests), "code_commits": dict(commits), "dirty_runs": len(dirty),
            "dirty_examples": dirty[:3]}


def describe(row: dict[str, Any]) -> str:
    """A row without its folder, by its grid values."""
    return " ".join(f"{k}={v}" for k, v in row.items() if "." in k and not isinstance(v, float | dict))


def refuse_mixed(rows: list[dict[str, Any]], allow_dirty: bool, where: str) -> dict[str, Any]:
    """``runs_code``, or ``ConfigError`` (exit 2) when the runs' training code differs or was dirty (unless
    ``allow_dirty``, which the record then says)."""
    found = runs_code(rows)
    problems = []
    digests = found["training_code_digests"]
    if "None" in digests and len(digests) > 1:
        problems.append(f"{digests['None']} run(s) recorded no training-code digest (trained before it was recorded)"
                        ", so nothing asserts they ran the same training code as the others")
        digests = {d: n for d, n in digests.items() if d != "None"}
    if len(digests) > 1:
        listed = ", ".join(f"{d} ({n} runs)" for d, n in digests.items())
        problems.append(f"the runs were trained by different training code: digests {listed}. Train them "
                        f"again into a new folder (--out), or delete the runs of the old code from {where}")
    if found["dirty_runs"] and not allow_dirty:
        problems.append(f"{found['dirty_runs']} run(s) were trained from a checkout with uncommitted changes (e.g. "
                        f"{found['dirty_examples'][0]}): commit the code and train again into a new folder, or pass "
                        "--allow-dirty to accept it (the verdict then says so)")
    if problems:
        raise StudyError("refused: " + "; ".join(problems) + ". Nothing was deleted.")
    return {**found, "allow_dirty": allow_dirty, "engine_digest": engine_digest()}


def plan_folders(plan) -> list[Path]:
    """Every run folder of ``plan`` (a normtrain.study.plan.Plan), with its T/2 twin where ``half_budget`` puts one
    (normtrain/reproduce/runner.py)."""
    folders = [plan.run_dir(c) for c in plan.combos()]
    return folders + [plan.runs_dir.with_name(plan.runs_dir.name + "_half") / f.name for f in folders]


def refuse_stale(folders: list[Path], digest: str, remedy: str) -> None:
    """Before any run trains: finished runs in ``folders`` whose training code is not this checkout's (``digest``)
    would be mixed with the new ones into one result, which ``refuse_mixed`` refuses only after hours of training;
    ``StudyError`` now instead, naming them and ``remedy``. Nothing is deleted."""
    stale = []
    for folder in folders:
        try:
            summary = json.loads((folder / "summary.json").read_text())
        except (OSError, ValueError):
            continue  # not finished (or never started): it will be trained by this code
        if summary.get("status") != "running" and (summary.get("code") or {}).get("training_code_digest") != digest:
            stale.append(folder)
    if stale:
        raise StudyError(f"refused before training: {len(stale)} finished run(s) were trained by other training code "
                         f"than this checkout's (digest {digest}), e.g. {stale[0]}, and would be mixed with new "
                         f"ones; {remedy}. Nothing was deleted.")
