"""Which files make up a corpus: the interpreter's standard library, or the user's own text.

Each finder returns a :class:`Source`: the files sorted by their path relative to a root, because
that relative path (not the absolute one) is what the train/val split and the fingerprint hash, so
the same corpus copied elsewhere splits and caches the same way.
"""

from __future__ import annotations

import glob
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from normtrain.errors import DataError

# Whole folders of the stdlib that are not "the library": test suites, the IDLE app, third-party
# packages and bytecode. ``lib2to3/tests`` is covered by "tests".
STDLIB_SKIP = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__"})
BINARY_SNIFF = 8192
ALLOWED = "a file, a folder (read recursively) or a glob such as 'texts/**/*.txt'"


@dataclass(frozen=True)
class Source:
    root: str  # what the user named: the stdlib folder, a file, a folder or a glob pattern
    files: tuple[tuple[str, str], ...]  # (path relative to the corpus root, absolute path), sorted


def python_stdlib() -> Source:
    """The running interpreter's own ``.py`` standard library, minus tests, IDLE and site-packages."""
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in STDLIB_SKIP]
        paths += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    return _source(root, root, paths)


def local_text(path: str) -> Source:
    """Text files named by ``path``: one file, every text file under a folder, or a recursive glob.

    Folders skip hidden entries (``.git``, ``.venv``), as a glob does; both skip binary files
    (a NUL byte in the first 8 KB) and empty ones.
    """
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(full):
        return _source(full, os.path.dirname(full), [full], given=path)
    if os.path.isdir(full):
        return _source(full, full, _walk_visible(full), given=path)
    if not glob.has_magic(path):
        raise DataError(f"data.path={path!r} does not exist; give {ALLOWED}")
    matches = [p for p in glob.glob(full, recursive=True) if os.path.isfile(p)]
    if not matches:
        raise DataError(f"data.path={path!r} is a glob that matches no file; give {ALLOWED}")
    return _source(full, _glob_base(full), matches, given=path)


def is_binary(path: str) -> bool:
    """A NUL byte in the first 8 KB, the test git and grep use."""
    with open(path, "rb") as f:
        return b"\0" in f.read(BINARY_SNIFF)


def _walk_visible(root: str) -> list[str]:
    paths = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        paths += [os.path.join(folder, n) for n in names if not n.startswith(".")]
    return paths


def _glob_base(pattern: str) -> str:
    """The folder before the first wildcard: the glob's matches are named relative to it."""
    parts = Path(pattern).parts
    first_wild = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    return str(Path(*parts[:first_wild]))


def _source(root: str, base: str, paths: list[str], given: str | None = None) -> Source:
    files = sorted(
        (Path(os.path.relpath(p, base)).as_posix(), os.path.abspath(p))
        for p in paths
        if os.path.isfile(p) and os.path.getsize(p) > 0 and not is_binary(p)
    )
    if not files:
        raise DataError(f"data.path={given or root!r} holds no non-empty text file; give {ALLOWED}")
    return Source(root=root, files=tuple(files))
