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
    """``{"code_commit": 40 hex or None, "code_dirty": bool or None, "training_code_digest": 16 hex}`` (and
    ``why_unknown`` without git)."""
    here = root or Path(__file__).resolve().parent
    top = git(["rev-parse", "--show-toplevel"], here)
    digest = training_code_digest()
    if top is None:
        return {"code_commit": None, "code_dirty": None, "training_code_digest": digest,
                "why_unknown": "not a git checkout"}
    return {"code_commit": git(["rev-parse", "HEAD"], Path(top)), "code_dirty": _dirty(Path(top)),
            "training_code_digest": digest}


# What a run's numbers depend on: the packages that build, train and evaluate it. The analysis around it (studies,
# reproductions, the report, export, the catalog) can change without changing a run.
TRAINING_CODE = ("__init__.py", "checkpoint", "config", "data", "loggers", "model", "norms", "ops", "training", "util")


@lru_cache(maxsize=1)
def training_code_digest() -> str:
    """A digest of the training code's source files (the same in a checkout and an installed wheel): a study
    refuses to compare runs whose digests differ (normtrain/study/provenance.py)."""
    return source_digest(TRAINING_CODE)


def source_digest(parts: tuple[str, ...]) -> str:
    """sha256 (16 hex) over the paths and bytes of the ``.py`` files of ``parts`` (packages or files of normtrain)."""
    import hashlib

    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for part in parts:
        root = package / part
        for f in sorted([root] if root.is_file() else root.rglob("*.py")):
            h.update(str(f.relative_to(package)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


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


def execution_state(device: Any = "cpu") -> dict[str, Any]:
    """How a run's arithmetic was executed, beyond its code and config: torch's thread counts (a different count
    can reorder a reduction and move an unstable run's last bits), the determinism switches, whether subnormal CPU
    floats are flushed to zero (read back from the arithmetic itself), and the device by name. Read when the run
    starts; a rerun of the same config that moves a number is compared against it."""
    import os
    import platform

    import torch

    device = torch.device(device)
    cuda = device.type == "cuda" and torch.cuda.is_available()
    name = torch.cuda.get_device_name(device) if cuda else (platform.processor() or platform.machine() or "cpu")
    return {"threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "device": str(device), "device_name": name,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "flush_denormal": bool((torch.tensor([1e-39]) * 1.0).item() == 0.0),  # subnormal CPU floats made 0
            "torch": torch.__version__}
