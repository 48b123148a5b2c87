"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one.

The one helper every writer of normtrain uses (checkpoints, summaries, metrics, exports, the token cache and
the shards). Temporary files are named ``.<name>.<tag><random>.tmp`` beside their target (``TMP_GLOB``), so a
folder's owner can sweep the ones a killed process left (the token cache tags them with its writer's pid);
they are created with ``open(..., "x")``, so the finished file gets the permissions the user's umask gives.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

TMP_GLOB = ".*.tmp"


def temp_path(path: str | os.PathLike, tag: str = "") -> Path:
    """A fresh temporary name beside ``path``: ``.<name>.<tag><8 random hex>.tmp``."""
    path = Path(path)
    return path.with_name(f".{path.name}.{tag}{uuid.uuid4().hex[:8]}.tmp")


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, tag: str = "", fsync: bool = True) -> Iterator[IO[bytes]]:
    """An open temporary file beside ``path``, renamed over it when the block ends (after an fsync unless
    ``fsync`` is False: a writer that checksums what it reads back can skip it) and removed if the block raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path, tag)
    try:
        with open(tmp, "xb") as f:  # "x": a new file, with the mode the user's umask gives (mkstemp's is 0600)
            yield f
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any], **options: Any) -> None:
    """Write through ``write(file)`` into ``atomic_file(path, **options)``."""
    with atomic_file(path, **options) as f:
        write(f)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def write_text(path: str | os.PathLike, text: str) -> None:
    """``text`` in UTF-8, atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_csv(path: str | os.PathLike, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A CSV file (a header row, then ``rows``; None as an empty cell), atomically."""
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    write_text(path, text.getvalue())


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
    write_text(path, json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n")
