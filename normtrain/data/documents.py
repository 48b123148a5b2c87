"""What ``normtrain-prepare`` reads: a source named on its command line, as a stream of document pieces.

A source is local text (a file, a folder, a glob, or ``python_stdlib``: read as raw bytes, split into train and
val by file exactly as ``data=local_text`` splits them), local parquet/json/arrow/csv files (read through
``datasets``' own builders, streamed, so nothing is converted or cached), a Hugging Face hub dataset id, or a
local copy of one (a folder with its dataset card, read by ``datasets`` as it reads the hub).
Documents come out as pieces (``normtrain.data.pieces``), which the ``datasets`` sources (``hub``) share.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator

from normtrain.data import hub, sources
from normtrain.data.corpus import split_by_file
from normtrain.data.pieces import Documents, Piece, file_pieces
from normtrain.errors import DataError

# File extensions read through a datasets builder rather than as text.
BUILDERS = {".parquet": "parquet", ".arrow": "arrow", ".jsonl": "json", ".json": "json", ".csv": "csv",
            ".jsonl.gz": "json", ".json.gz": "json"}
STDLIB = "python_stdlib"


def open_documents(source: str, val_fraction: float, text_field: str = "text", config: str | None = None,
                   split: str = "train", revision: str | None = None, streaming: bool = False) -> Documents:
    """Resolve ``source`` (see the module docstring) into :class:`Documents`; DataError if it names nothing."""
    if not 0 < val_fraction < 1:
        raise DataError(f"--val-fraction {val_fraction}: must lie in (0, 1)")
    if source == STDLIB:
        return local_text(sources.python_stdlib(), STDLIB, val_fraction)
    files = _local_files(source)
    if files is None or _dataset_card(source, files):
        return hub.hub_documents(source, config, split, revision, streaming, text_field, val_fraction,
                                 local_files=files)
    builders = {_builder(path) for path in files}
    if builders == {None}:
        return local_text(sources.local_text(source), "local_text", val_fraction)
    if len(builders) > 1:
        kinds = ", ".join(sorted(b or "text" for b in builders))
        raise DataError(f"{source!r} mixes files of several kinds ({kinds}); name one kind with a glob, "
                        f"e.g. '{source.rstrip('/')}/**/*.parquet'")
    return hub.file_documents(source, sorted(files), builders.pop(), text_field, val_fraction)


def local_text(source: sources.Source, kind: str, val_fraction: float) -> Documents:
    """Text files as raw bytes, split into train and val by file (by bytes when too few files), as
    ``normtrain.data.corpus`` splits them: prepared with ``--tokenizer bytes`` they give the same tokens."""
    by_file = split_by_file(source.files, val_fraction)
    record = {"kind": kind, "root": source.root, "n_files": len(source.files),
              "split": "by_file" if by_file else "by_bytes", "val_fraction": val_fraction}
    sizes = [os.path.getsize(path) for _, path in source.files]
    if by_file:
        val = set(by_file["val"])
        stream = lambda: _by_file(source.files, val)  # noqa: E731
    else:
        stream = lambda: _by_bytes([path for _, path in source.files], sizes, val_fraction)  # noqa: E731
    return Documents(record=record, stream=stream, files=source.files, total_bytes=sum(sizes))


def _local_files(source: str) -> list[str] | None:
    """The files ``source`` names on this machine, or None when it names none (then it may be a hub id)."""
    full = os.path.abspath(os.path.expanduser(source))
    if os.path.isfile(full):
        return [full]
    if os.path.isdir(full):
        return [path for path in _visible_files(full)]
    if glob.has_magic(source):
        matches = [p for p in glob.glob(full, recursive=True) if os.path.isfile(p)]
        if not matches:
            raise DataError(f"{source!r} is a glob that matches no file")
        return matches
    return None


def _dataset_card(source: str, files: list[str]) -> bool:
    """A folder with a dataset card (README.md opening with YAML) and data files: a copy of a hub dataset
    (``hf download --repo-type dataset``), read like the hub id it came from, with its configs and splits."""
    card = os.path.join(os.path.abspath(os.path.expanduser(source)), "README.md")
    if not os.path.isfile(card) or not any(_builder(path) for path in files):
        return False
    with open(card, "rb") as f:
        return f.read(4) == b"---\n"


def _visible_files(root: str) -> list[str]:
    paths = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        paths += [os.path.join(folder, n) for n in names if not n.startswith(".")]
    if not paths:
        raise DataError(f"the folder {root} holds no file")
    return paths


def _builder(path: str) -> str | None:
    name = path.lower()
    return next((b for ext, b in BUILDERS.items() if name.endswith(ext)), None)


def _by_file(files: tuple[tuple[str, str], ...], val: set[str]) -> Iterator[Piece]:
    for _, path in files:
        yield from file_pieces(path, "val" if path in val else "train")


def _by_bytes(paths: list[str], sizes: list[int], val_fraction: float) -> Iterator[Piece]:
    """The files joined by separators, cut where ``corpus`` cuts a single-file corpus: the last
    ``val_fraction`` of the bytes is val. The file the cut falls in becomes two documents (one may be empty,
    which keeps a separator that sits at the cut on the side ``corpus`` puts it)."""
    total = sum(sizes) + len(sizes) - 1
    cut = total - max(1, round(total * val_fraction))
    offset = 0
    for path, size in zip(paths, sizes, strict=True):
        if offset > cut:
            yield from file_pieces(path, "val")
        elif cut <= offset + size:
            yield from file_pieces(path, "train", end=cut - offset)
            yield from file_pieces(path, "val", start=cut - offset)
        else:
            yield from file_pieces(path, "train")
        offset += size + 1
