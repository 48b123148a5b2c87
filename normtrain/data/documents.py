"""What a corpus is read from, as a stream of document pieces: ``normtrain-prepare``'s source, and the byte corpora.

A source is local text (a file, a folder, a glob, or ``python_stdlib``: read as raw bytes, split into train and
val by file; the byte corpora are ``local_text`` sources), local parquet/json/arrow/csv files (read through
``datasets``' own builders, streamed, so nothing is converted or cached), a Hugging Face hub dataset id, or a
local copy of one (a folder with its dataset card, read by ``datasets`` as it reads the hub).
Documents come out as pieces (``normtrain.data.pieces``), which the ``datasets`` sources (``hub``) share.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from normtrain.data import hub, sources
from normtrain.data.pieces import Documents, Piece, file_pieces, in_val
from normtrain.util.errors import DataError

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
    files = sources.local_files(source)
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
    """Text files as raw bytes, split into train and val by file (by bytes when too few files): what both
    ``normtrain-prepare`` and the byte corpora of ``data=python_stdlib|local_text`` read."""
    by_file = split_by_file(source.files, val_fraction)
    record = {"kind": kind, "root": source.root, "n_files": len(source.files),
              "split": "by_file" if by_file else "by_bytes", "val_fraction": val_fraction}
    sizes = [os.path.getsize(path) for _, path in source.files]
    if by_file:
        val = set(by_file["val"])
        stream = lambda: _by_file(source.files, val)  # noqa: E731
    else:
        stream = lambda: _by_bytes([path for _, path in source.files], sizes, val_fraction)  # noqa: E731
    return Documents(record=record, pieces=stream, files=source.files, total_bytes=sum(sizes))


def split_by_file(files: tuple[tuple[str, str], ...], val_fraction: float) -> dict[str, list[str]] | None:
    """Absolute paths per split, or None when hashing leaves a split empty (then split by bytes).

    A file goes to val iff its relative path does (``in_val``): the choice survives moving the corpus, adding
    other files, and even a larger ``val_fraction`` only moves more files into val, never back.
    """
    split: dict[str, list[str]] = {"train": [], "val": []}
    for rel, path in files:
        split["val" if in_val(os.fsencode(rel), val_fraction) else "train"].append(path)
    return split if split["train"] and split["val"] else None


def _dataset_card(source: str, files: list[str]) -> bool:
    """A folder with a dataset card (README.md opening with YAML) and data files: a copy of a hub dataset
    (``hf download --repo-type dataset``), read like the hub id it came from, with its configs and splits."""
    card = os.path.join(os.path.abspath(os.path.expanduser(source)), "README.md")
    if not os.path.isfile(card) or not any(_builder(path) for path in files):
        return False
    with open(card, "rb") as f:
        return f.read(4) == b"---\n"


def _builder(path: str) -> str | None:
    name = path.lower()
    return next((b for ext, b in BUILDERS.items() if name.endswith(ext)), None)


def _by_file(files: tuple[tuple[str, str], ...], val: set[str]) -> Iterator[Piece]:
    for _, path in files:
        yield from file_pieces(path, "val" if path in val else "train")


def _by_bytes(paths: list[str], sizes: list[int], val_fraction: float) -> Iterator[Piece]:
    """The files joined by separators, cut so that the last ``val_fraction`` of those bytes is val. The file the
    cut falls in becomes two documents (one may be empty, so that a separator next to the cut stays on its side)."""
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
