"""A measurement of a trained model kept in its run folder: a rerun re-reads it instead of measuring again, and it
stands in for the checkpoint a pack leaves behind (normtrain/reproduce/carry.py).

The file holds the measurement under two keys: the checkpoint's (its size and modification time: a retrained run
writes a new one) joined with the measuring code's, and the code's alone. Beside the checkpoint both must match; a
run restored from a pack has no checkpoint, and the file counts while the code is the same and the file is no older
than the run's summary (a retrained run measures again).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from normtrain.study.grid import made_after_run
from normtrain.util.atomic import write_json
from normtrain.util.errors import StudyError


def kept_measurement(run_dir: Path, name: str, code: str, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The measurement kept in ``run_dir / name`` when it is the one ``measure`` would make now (``code``: the
    measuring code's source and constants), else ``measure()``, kept for next time."""
    path, checkpoint, code_key = run_dir / name, run_dir / "ckpt.pt", digest(code)
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {}
    if not checkpoint.is_file():
        if kept.get("code") == code_key and made_after_run(run_dir, name):
            return kept["scores"]
        raise StudyError(f"{run_dir}: its checkpoint is gone (a run restored from a pack) and {name} is missing, "
                         "older than the run or made by other code: train the run again (delete its folder)")
    stat = checkpoint.stat()
    key = digest(f"{stat.st_size}:{stat.st_mtime_ns}\n{code}")
    if kept.get("key") == key and kept.get("code") == code_key:
        return kept["scores"]
    found = kept["scores"] if kept.get("key") == key else measure()  # a file kept without the code's own key: the same
    try:
        write_json(path, {"key": key, "code": code_key, "scores": found})
    except OSError:  # a read-only run folder: measured again next time
        pass
    return found


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
