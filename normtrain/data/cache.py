"""Where tokens are kept: the cache folder, the fingerprint that names an entry, and the temporary files of writers.

A byte corpus's entry is ``<cache>/corpora/<fingerprint>/``, a shard folder (``normtrain.data.shards``) that
``normtrain.data.corpus`` builds and checks; ``normtrain-prepare`` writes its folders the same way. Every file is
written atomically (``normtrain.util.atomic``: a temporary name first, moved into place with ``os.replace``).

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
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from normtrain.util.atomic import atomic_file
from normtrain.util.hashing import feed


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
            feed(h, f)
    return h.hexdigest()


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


def _tag(pid: int | None = None) -> str:
    """The tag of a builder's temporary files, ``.<name>.<scope>.<pid>.<random>.tmp`` (normtrain.util.atomic): whose
    they are, so that ``sweep`` removes only those of dead builders in this pid namespace."""
    return f"{_SCOPE}.{pid or os.getpid()}."


def writing(path: Path) -> contextlib.AbstractContextManager[IO[bytes]]:
    """An open temporary file beside ``path`` (named so that ``sweep`` can clear it if its writer dies),
    moved into place when the block ends, removed if it raises."""
    # No fsync: a file lost to a power cut fails its checksum on the next load and is rebuilt.
    return atomic_file(path, tag=_tag(), fsync=False)
