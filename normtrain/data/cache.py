"""The on-disk token cache: one folder per corpus fingerprint, so a second load is ``np.load`` and a checksum.

An entry is ``<fingerprint>/{train,val}.npy`` plus ``meta.json``, which records each array's dtype,
length and sha256 and is written last; every file is written atomically (``normtrain.atomic``: a temporary
name first, moved into place with ``os.replace``). A load uses nothing it has not checked against that record:
an entry with bytes flipped by a bad disk, a file cut short, or a header numpy cannot read is reported and rebuilt.

Temporary names carry their writer's pid and a tag of the pid namespace it lives in, so the next load
can sweep what a killed builder left without touching the files of a builder that is still running.
Concurrent builders of one corpus need no lock: their bytes are identical, so whichever
``os.replace`` lands last, the entry verifies.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import numpy as np

from normtrain.atomic import atomic_file, temp_path
from normtrain.errors import DataError

META = "meta.json"


def cache_root(cache_dir: str | None = None) -> Path:
    """``cache_dir``, else ``$NORMTRAIN_CACHE``, else ``~/.cache/normtrain``."""
    return Path(cache_dir or os.environ.get("NORMTRAIN_CACHE") or "~/.cache/normtrain").expanduser()


def fingerprint(files: Iterable[tuple[str, str]], settings: dict) -> str:
    """A digest of the settings, every relative path and every file's bytes.

    Contents, not mtimes, so a touched but unchanged file still hits the cache; the stdlib's
    contents differ between Python versions, so each interpreter gets its own cache entry.
    """
    h = hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=16)
    for rel, path in files:
        with open(path, "rb") as f:  # in blocks: a corpus may be one file larger than memory
            h.update(b"\0%b\0%d\0" % (os.fsencode(rel), os.fstat(f.fileno()).st_size))
            while block := f.read(1 << 24):
                h.update(block)
    return h.hexdigest()


def load_or_build(folder: Path, build: Callable[[], dict[str, np.ndarray]], meta: dict) -> dict[str, np.ndarray]:
    """The entry's verified arrays (read-only memory maps), built and saved first if it has none."""
    sweep(folder)
    if (arrays := load(folder)) is None:
        save(folder, build(), meta)
        if (arrays := load(folder)) is None:
            raise DataError(f"the token cache entry {folder} does not verify right after it was written: "
                            f"check the disk, or point data.cache_dir elsewhere")
    return arrays


def load(folder: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a complete entry that matches its record; else None, with a warning if damaged.

    No meta.json is not damage: the entry was never finished (not built yet, or its builder was killed).
    """
    try:
        meta = json.loads((folder / META).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        return _unusable(folder, f"{META} cannot be read ({err})")
    try:
        return {name: _checked(folder / f"{name}.npy", record) for name, record in meta["arrays"].items()}
    except _Damaged as err:
        return _unusable(folder, str(err))
    except (KeyError, TypeError, AttributeError) as err:
        return _unusable(folder, f"{META} does not describe the arrays ({type(err).__name__}: {err})")


def save(folder: Path, arrays: dict[str, np.ndarray], meta: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        _atomic_write(folder / f"{name}.npy", lambda f, a=array: np.save(f, a))
    records = {name: {"dtype": str(a.dtype), "length": len(a), "sha256": _digest(a)} for name, a in arrays.items()}
    text = json.dumps({**meta, "arrays": records}, indent=2)
    _atomic_write(folder / META, lambda f: f.write(text.encode()))


def sweep(folder: Path) -> None:
    """Remove the temporary files of builders that died here before finishing (kill -9, OOM killer).

    Only a file whose writer shares our pid namespace can be judged; one whose pid is still alive
    is left, even if that pid was reused, because removing a live builder's file would break its build.
    """
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        owner = _TEMP.fullmatch(name)
        if owner and owner["scope"] == _SCOPE and not _alive(int(owner["pid"])):
            (folder / name).unlink(missing_ok=True)


def is_temp(name: str) -> bool:
    """Whether ``name`` is a temporary file of one of our writers (finished or not)."""
    return _TEMP.fullmatch(name) is not None


class _Damaged(Exception):
    """What is wrong with one array of an entry."""


def _checked(path: Path, record: dict) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise _Damaged(f"{path.name} cannot be read ({type(err).__name__}: {err})") from err
    if str(array.dtype) != record["dtype"] or array.shape != (record["length"],):
        raise _Damaged(f"{path.name} holds {array.dtype} x {array.shape}, "
                       f"its record says {record['dtype']} x ({record['length']},)")
    # Hash the very map that is returned: a file replaced after this check cannot slip in unverified.
    if _digest(array) != record["sha256"]:
        raise _Damaged(f"{path.name} does not match its sha256 (its bytes changed on disk)")
    return array


def _digest(array: np.ndarray) -> str:
    # sha256 runs on the CPU's SHA instructions (~1.8 GB/s here, blake2b 0.75): 6 ms for the stdlib corpus.
    return hashlib.sha256(memoryview(np.ascontiguousarray(array))).hexdigest()


def _unusable(folder: Path, why: str) -> None:
    warnings.warn(f"the token cache entry {folder} is unusable: {why}; rebuilding it", stacklevel=2)
    return None


def _alive(pid: int) -> bool:
    if os.name != "posix":
        return True  # os.kill(pid, 0) would terminate the process on Windows: never sweep there
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _pid_scope() -> str:
    """A tag for "pids mean the same process here": the host name and this pid namespace.

    A cache on a shared file system is seen by other hosts and containers, whose pids say nothing here.
    """
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return hashlib.blake2b(f"{socket.gethostname()}/{namespace}".encode(), digest_size=4).hexdigest()


_SCOPE = _pid_scope()
_TEMP = re.compile(r"\..+\.(?P<scope>[0-9a-f]{8})\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp")


def _temp_path(path: Path, pid: int | None = None) -> Path:
    """``.<name>.<scope>.<pid>.<random>.tmp``: unique to this call, so builders never share one."""
    return temp_path(path, _tag(pid))


def _tag(pid: int | None = None) -> str:
    return f"{_SCOPE}.{pid or os.getpid()}."


def writing(path: Path) -> contextlib.AbstractContextManager[IO[bytes]]:
    """An open temporary file beside ``path`` (named so that ``sweep`` can clear it if its writer dies),
    moved into place when the block ends, removed if it raises."""
    # No fsync: a file lost to a power cut fails its checksum on the next load and is rebuilt.
    return atomic_file(path, tag=_tag(), fsync=False)


def _atomic_write(path: Path, write: Callable) -> None:
    with writing(path) as f:
        write(f)
