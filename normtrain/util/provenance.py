"""Which code produced a result: the git commit of the checkout normtrain runs from, and whether it was clean.

A run's summary and an experiment's ``result.json`` record it, so a number can be traced to the exact code that
made it. "Dirty" means a tracked file differs from the commit, or an untracked file sits among the sources
(``normtrain/``, ``configs/``, ``scripts/``); results and run folders (``experiments/``, ignored outputs) do not
count: writing a result must not make the code that wrote it look modified. Outside a git checkout (an installed
wheel) the commit is unknown and says why.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

SOURCES = ("normtrain", "configs", "scripts", "pyproject.toml")
NOT_CODE = ("experiments",)


def git(args: list[str], cwd: Path) -> str | None:
    """``git ARGS`` in ``cwd``: its output, or None when git or the checkout is missing."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def code_state(root: Path | None = None) -> dict[str, Any]:
    """``{"code_commit": 40 hex or None, "code_dirty": bool or None}`` (and ``why_unknown`` without git)."""
    here = root or Path(__file__).resolve().parent
    top = git(["rev-parse", "--show-toplevel"], here)
    if top is None:
        return {"code_commit": None, "code_dirty": None, "why_unknown": "not a git checkout"}
    return {"code_commit": git(["rev-parse", "HEAD"], Path(top)), "code_dirty": _dirty(Path(top))}


def _dirty(top: Path) -> bool:
    excluded = [f":(exclude){p}" for p in NOT_CODE]
    tracked = git(["status", "--porcelain", "--untracked-files=no", "--", ".", *excluded], top)
    untracked = git(["status", "--porcelain", "--untracked-files=all", "--", *SOURCES], top)
    new_sources = [line for line in (untracked or "").splitlines() if line.startswith("??")
                   and "__pycache__" not in line]
    return bool(tracked) or bool(new_sources) or tracked is None


@lru_cache(maxsize=1)
def code_state_at_start() -> dict[str, Any]:
    """The code state read once per process: what every run this process trains ran on."""
    return code_state()
