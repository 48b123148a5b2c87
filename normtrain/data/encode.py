"""Documents to token shards: the one encode step of every corpus, ``normtrain-prepare``'s and the byte corpora's.

The pieces of a source (``normtrain.data.pieces``) go through a tokenizer in batches (its own threads run on every
core) into one :class:`ShardWriter` per split; the train split's token counts, the tokenizer's own file and
meta.json follow, meta.json last (``normtrain.data.shards`` describes the folder and reads it back). Every file is
written under a temporary name that ``cache.sweep`` can clear if its writer dies, and moved into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from normtrain.data import cache
from normtrain.data.pieces import Documents, Piece
from normtrain.data.shards import COUNTS, FORMAT, META, SPLITS, TOKENIZER, token_dtype
from normtrain.data.tokenizer import HFTokenizer, Tokenizer
from normtrain.util.errors import DataError
from normtrain.util.progress import make_progress
from normtrain.util.version import __version__

BATCH_BYTES = 8 << 20  # text per tokenizer call: enough documents to keep every core busy
FLUSH_TOKENS = 1 << 22
PROGRESS_EVERY_S = 10.0  # a line this often in a batch job's log (a bar on a terminal)


class ShardWriter:
    """One split's tokens streamed into an open file, a separator between documents; its sha256, token
    counts, byte and document counts kept on the way (one pass over the tokens, in blocks)."""

    def __init__(self, file: IO[bytes], vocab_size: int, eot: int, count: bool, dtype: np.dtype | None = None):
        self.file, self.vocab_size = file, vocab_size
        self.dtype = token_dtype(vocab_size) if dtype is None else np.dtype(dtype)
        self.eot = np.array([eot], dtype=np.int64)
        self.sha256 = hashlib.sha256()
        self.counts = np.zeros(vocab_size, dtype=np.int64) if count else None
        self.tokens = self.bytes = self.documents = 0
        self.pending: list[np.ndarray] = []
        self.pending_tokens = 0

    def add(self, tokens: np.ndarray, n_bytes: int, starts_doc: bool) -> None:
        """Append one piece of a document (``n_bytes`` of text); a separator first if it starts one that is
        not the split's first (the separator counts as one byte: the NUL a byte corpus has there)."""
        if starts_doc:
            if self.documents:
                self._append(self.eot, 1)
            self.documents += 1
        self._append(tokens, n_bytes)

    def close(self) -> dict[str, int]:
        self._flush()
        return {"tokens": self.tokens, "bytes": self.bytes, "documents": self.documents}

    def _append(self, tokens: np.ndarray, n_bytes: int) -> None:
        self.pending.append(tokens)
        self.pending_tokens += len(tokens)
        self.tokens, self.bytes = self.tokens + len(tokens), self.bytes + n_bytes
        if self.pending_tokens >= FLUSH_TOKENS:
            self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        block = np.concatenate(self.pending)
        self.pending, self.pending_tokens = [], 0
        if len(block) and (block.min() < 0 or block.max() >= self.vocab_size):
            raise DataError(f"the tokenizer produced token ids outside [0, {self.vocab_size}): its vocabulary size "
                            "is wrong")
        data = block.astype(self.dtype).tobytes()
        self.file.write(data)
        self.sha256.update(data)
        if self.counts is not None:
            self.counts += np.bincount(block, minlength=self.vocab_size)


def write_shards(out: Path, docs: Documents, tokenizer: Tokenizer, inputs: str, *, dtype: np.dtype | None = None,
                 max_tokens: int | None = None, progress: bool = True, desc: str = "tokenizing") -> dict[str, Any]:
    """Tokenize every piece of ``docs`` into its split's shard (``dtype``: the shards' own, by default), then
    write the counts, the tokenizer and meta.json (recording ``inputs``, what a re-run compares); meta.json."""
    dtype = token_dtype(tokenizer.vocab_size) if dtype is None else np.dtype(dtype)
    with contextlib.ExitStack() as stack:
        writers = {split: ShardWriter(stack.enter_context(cache.writing(out / name)), tokenizer.vocab_size,
                                      tokenizer.eot, count=split == "train", dtype=dtype)
                   for split, name in SPLITS.items()}
        bar = make_progress(docs.total_bytes, 0, desc, progress, PROGRESS_EVERY_S, unit="B")
        stack.callback(bar.close)
        truncated = _encode(docs, tokenizer, writers, bar, max_tokens)
        splits = {split: writer.close() for split, writer in writers.items()}
        _check_splits(splits, docs.record.get("val_fraction"))
    files = {name: {"size": writers[split].tokens * dtype.itemsize, "sha256": writers[split].sha256.hexdigest()}
             for split, name in SPLITS.items()}
    files[COUNTS] = write_file(out / COUNTS, _npy(writers["train"].counts))
    if isinstance(tokenizer, HFTokenizer):
        files[TOKENIZER] = write_file(out / TOKENIZER, tokenizer.json.encode())
    else:
        (out / TOKENIZER).unlink(missing_ok=True)
    meta = {"format": FORMAT, "normtrain_version": __version__, "inputs": inputs, "source": docs.record,
            "tokenizer": tokenizer.describe(), "vocab_size": tokenizer.vocab_size, "dtype": dtype.name,
            "splits": splits, "max_tokens": max_tokens, "truncated": truncated, "files": files}
    write_file(out / META, json.dumps(meta, indent=2).encode())
    return meta


def write_file(path: Path, data: bytes) -> dict[str, Any]:
    """``data`` into ``path``, atomically; its record (size, sha256) for meta.json."""
    with cache.writing(path) as f:
        f.write(data)
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _encode(docs: Documents, tokenizer: Tokenizer, writers: dict[str, ShardWriter], bar,
            max_tokens: int | None) -> bool:
    """Every piece through the tokenizer into its split's writer; whether it stopped at ``max_tokens``."""
    for batch in _batches(docs.pieces()):
        for piece, tokens in zip(batch, tokenizer.encode_batch([p.data for p in batch]), strict=True):
            writers[piece.split].add(tokens, len(piece.data), piece.starts_doc)
        bar.update(sum(len(p.data) for p in batch))
        if max_tokens and sum(w.tokens for w in writers.values()) >= max_tokens:
            return True
    return False


def _batches(pieces: Iterator[Piece]) -> Iterator[list[Piece]]:
    batch, size = [], 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece.data)
        if size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _check_splits(splits: dict[str, dict[str, int]], val_fraction: float | None) -> None:
    empty = [split for split, counts in splits.items() if counts["tokens"] == 0]
    if empty:
        raise DataError(f"the {' and '.join(empty)} split{'s are' if len(empty) > 1 else ' is'} empty: the source "
                        f"has too few documents for a val fraction of {val_fraction} (documents go to val by a "
                        "hash of their path or text); raise the val fraction or add documents")


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()
