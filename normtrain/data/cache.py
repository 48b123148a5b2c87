"""The on-disk token cache: one folder per corpus fingerprint, so a second load is just ``np.load``.

Every file is written to a temporary name and moved into place with ``os.replace``, and
``meta.json`` is written last: a folder with ``meta.json`` is complete, whatever crashed before it.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

META = "meta.json"


def cache_root(cache_dir: str | None = None) -> Path:
    """``cache_dir``, else ``$NORMTRAIN_CACHE``, else ``~/.cache/normtrain``."""
    return Path(cache_dir or os.environ.get("NORMTRAIN_CACHE") or "~/.cache/normtrain").expanduser()


def fingerprint(files: Iterable[tuple[str, str]], settings: dict) -> str:
    """A digest of the settings, every relative path and every file's bytes (no datasets needed).

    Contents, not mtimes, so a touched but unchanged file still hits the cache; the stdlib's
    contents differ between Python versions, so each interpreter gets its own cache entry.
    """
    h = hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=16)
    for rel, path in files:
        data = Path(path).read_bytes()
        h.update(b"\0%b\0%d\0" % (os.fsencode(rel), len(data)))
        h.update(data)
    return h.hexdigest()


def load(folder: Path) -> tuple[dict[str, np.ndarray], dict] | None:
    """The arrays (memory-mapped, read-only) and metadata of a complete entry, or None."""
    try:
        meta = json.loads((folder / META).read_text())
    except FileNotFoundError:
        return None
    arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in meta["arrays"]}
    return arrays, meta


def save(folder: Path, arrays: dict[str, np.ndarray], meta: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        _atomic_write(folder / f"{name}.npy", lambda f, a=array: np.save(f, a))
    meta = {**meta, "arrays": sorted(arrays)}
    _atomic_write(folder / META, lambda f: f.write(json.dumps(meta, indent=2).encode()))


def _atomic_write(path: Path, write: Callable) -> None:
    # A name unique to this process and call: concurrent builders never share a temporary file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
