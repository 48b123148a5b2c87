"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one.

Temporary files are named ``.<name>.<random>.tmp`` beside their target (``TMP_GLOB``), so a folder's owner
can sweep the ones a killed process left; the finished file gets the permissions the user's umask gives.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

TMP_GLOB = ".*.tmp"


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Write through ``write(file)`` into a temp file beside ``path``, fsync, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a user expects what open() would give
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o22)  # the only way to read it is to set it; put it straight back
    os.umask(mask)
    return mask


def json_safe(value: Any) -> Any:
    """Non-finite floats become null (strict JSON has no NaN or Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: str | os.PathLike, obj: Any) -> None:
    text = json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n"
    atomic_write(path, lambda f: f.write(text.encode()))
