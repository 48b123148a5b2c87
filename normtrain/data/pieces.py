"""Document pieces: what a source of ``normtrain-prepare`` streams, and how one document is cut into them.

A :class:`Piece` holds at most ``PIECE_BYTES`` of one document, cut after a newline where there is one (else on
a UTF-8 character boundary): a 1 GB single-file corpus then streams in small parts, and a tokenizer's worker
threads share the work of one long document. A piece that starts a document is marked, so the shard writer knows
where separators go. Dataset rows become documents split by a hash of their text (``in_val``), so an exact
duplicate never lands in both splits. Both the local sources (``documents``) and the ``datasets`` ones (``hub``)
build on this module.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from normtrain.data import cache
from normtrain.util.errors import DataError

PIECE_BYTES = 1 << 20


@dataclass(frozen=True)
class Piece:
    split: str  # "train" | "val"
    data: bytes
    starts_doc: bool


@dataclass
class Documents:
    """A source ready to stream: what meta.json records about it, and its pieces (read anew on every call)."""

    record: dict[str, Any]  # kind, where from, and how it was split
    pieces: Callable[[], Iterator[Piece]]
    files: tuple[tuple[str, str], ...] = ()  # local files whose bytes the input fingerprint hashes
    total_bytes: int | None = None  # for the progress bar, when known in advance

    def fingerprint(self, settings: dict[str, Any]) -> str:
        """What a re-run with the same inputs compares: the settings, the source and every local file's bytes."""
        return cache.fingerprint(self.files, {**settings, "source": self.record})


def row_pieces(rows: Iterable[dict], text_field: str, where: str, val_fraction: float) -> Iterator[Piece]:
    """Dataset rows -> pieces: each row's ``text_field`` is one document (empty ones are skipped), in val iff
    its hash says so."""
    for i, row in enumerate(rows):
        if i == 0 and text_field not in row:
            raise DataError(f"--text-field {text_field!r} is not a column of {where}; its columns: "
                            f"{', '.join(map(str, row))}")
        text = row[text_field]
        if not text:  # no text (None, or an empty row such as WikiText's blank lines): no document
            continue
        if not isinstance(text, str):
            raise DataError(f"--text-field {text_field!r} of {where} holds {type(text).__name__}, not text")
        data = text.encode("utf-8")
        yield from memory_pieces(data, "val" if in_val(data, val_fraction) else "train")


def in_val(key: bytes, val_fraction: float) -> bool:
    """The one split rule: ``key`` (a file's relative path, a row's text) goes to val iff its hash falls below
    ``val_fraction``. Python's ``hash()`` is salted per process, so blake2b."""
    h = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
    return h < val_fraction * 2**64


def file_pieces(path: str, split: str, start: int = 0, end: int | None = None) -> Iterator[Piece]:
    """Bytes ``[start, end)`` of one file as one document (one empty piece if the range is), read block by block."""
    with open(path, "rb") as f:
        left = (os.fstat(f.fileno()).st_size if end is None else end) - start
        f.seek(start)
        carry, first = b"", True
        while True:
            block = f.read(min(PIECE_BYTES, left)) if left > 0 else b""
            left = left - len(block) if block else 0  # a file cut short while read ends here
            data = carry + block
            cut = _cut(data) if left > 0 else len(data)
            yield Piece(split, data[:cut], first)
            carry, first = data[cut:], False
            if left <= 0 and not carry:
                return


def memory_pieces(data: bytes, split: str) -> Iterator[Piece]:
    """One document already in memory, in pieces of about PIECE_BYTES."""
    start, first = 0, True
    while first or start < len(data):
        end = len(data) if len(data) - start <= PIECE_BYTES else start + _cut(data[start:start + PIECE_BYTES])
        yield Piece(split, data[start:end], first)
        start, first = end, False


def _cut(data: bytes) -> int:
    """Where to end a piece of ``data``: after its last newline, else on a UTF-8 character boundary."""
    newline = data.rfind(b"\n")
    if newline >= 0:
        return newline + 1
    end = len(data)
    while end > 1 and data[end - 1] & 0xC0 == 0x80:  # a continuation byte: back off to the character start
        end -= 1
    if end > 1 and data[end - 1] >= 0xC0:
        end -= 1  # the lead byte of a character cut short
    return end if end > 0 else len(data)
