"""Which files make up a corpus: the interpreter's standard library, or the user's own text.

Each finder returns a :class:`Source`: the files sorted by their path relative to a root, because
that relative path (not the absolute one) is what the train/val split and the fingerprint hash, so
the same corpus copied elsewhere splits and caches the same way.
"""

from __future__ import annotations

import glob
import os
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from normtrain.util.errors import DataError

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
    return _source(root, root, _walk(root, lambda d: d not in STDLIB_SKIP, lambda name: name.endswith(".py")))


def local_text(path: str) -> Source:
    """Text files named by ``path`` (see :func:`local_files`), minus binary files (a NUL byte in the first
    8 KB) and empty ones."""
    full = os.path.abspath(os.path.expanduser(path))
    paths = local_files(path)
    if paths is None:
        raise DataError(f"data.path={path!r} does not exist; give {ALLOWED}")
    base = os.path.dirname(full) if os.path.isfile(full) else full if os.path.isdir(full) else _glob_base(full)
    return _source(full, base, paths, given=path)


def local_files(path: str) -> list[str] | None:
    """The files ``path`` names here: one file, every file under a folder, or a recursive glob's matches; None
    when it names nothing here (normtrain-prepare then tries it as a hub id).

    Folders skip hidden entries (``.git``, ``.venv``), as a glob does. The one walk of every local corpus.
    """
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(full):
        return [full]
    if os.path.isdir(full):
        if not (paths := _walk(full, _visible, _visible)):
            raise DataError(f"{path!r} is a folder that holds no file; give {ALLOWED}")
        return paths
    if not glob.has_magic(path):
        return None
    if not (matches := [p for p in glob.glob(full, recursive=True) if os.path.isfile(p)]):
        raise DataError(f"{path!r} is a glob that matches no file; give {ALLOWED}")
    return matches


def is_binary(path: str) -> bool:
    """A NUL byte in the first 8 KB, the test git and grep use."""
    with open(path, "rb") as f:
        return b"\0" in f.read(BINARY_SNIFF)


def _walk(root: str, keep_folder: Callable[[str], bool], keep_file: Callable[[str], bool]) -> list[str]:
    """Every file under ``root`` whose name ``keep_file`` keeps, in folders whose names ``keep_folder`` keeps."""
    paths = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if keep_folder(d)]
        paths += [os.path.join(folder, n) for n in names if keep_file(n)]
    return paths


def _visible(name: str) -> bool:
    return not name.startswith(".")


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
