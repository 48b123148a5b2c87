"""``load_corpus``: find the files, split them, and tokenize them once into the on-disk cache.

The first load reads the files' raw bytes and saves one uint8 array per split under
``<cache>/corpora/<fingerprint>/``; every later load of the same files and settings only hashes the
files, memory-maps those arrays and checks them against their recorded checksums.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

from normtrain.data import cache, sources
from normtrain.data.encode import SEPARATOR, encode_splits
from normtrain.data.shards import TokenCorpus, load_shards
from normtrain.data.unigram import token_counts
from normtrain.errors import DataError

CORPORA = ("python_stdlib", "local_text", "tokens")
# Bump when the token layout changes (separator, decoding, split rule) so old caches are not reused.
# 2: raw bytes (1 decoded UTF-8 with replacement and translated newlines); meta.json holds checksums.
FORMAT_VERSION = 2


@dataclass
class Corpus:
    """Byte tokens of one corpus, split into train and val."""

    name: str  # "python_stdlib" | "local_text"
    train: np.ndarray  # uint8 tokens (read-only memory map of the cache)
    val: np.ndarray
    fingerprint: str
    n_files: int
    n_bytes: int  # tokens in train + val, document separators included
    split: str  # "by_file" | "by_bytes"
    root: str  # the stdlib folder, or the file / folder / glob the user gave
    vocab_size: int = 256

    def token_counts(self) -> np.ndarray:
        """Occurrences of each token id in the train split (for the unigram baseline)."""
        return token_counts(self.train, self.vocab_size)

    @property
    def val_bytes_per_token(self) -> float:
        return 1.0  # a byte token is one byte: val/bpb = val/loss / ln 2

    def describe(self) -> dict:
        return {
            "name": self.name,
            "root": self.root,
            "n_files": self.n_files,
            "n_bytes": self.n_bytes,
            "n_train_bytes": len(self.train),
            "n_val_bytes": len(self.val),
            "fingerprint": self.fingerprint,
            "split": self.split,
        }


def load_corpus(
    name: str,
    path: str | None = None,
    val_fraction: float = 0.05,
    cache_dir: str | None = None,
    progress: bool = True,
) -> Corpus | TokenCorpus:
    """Load a corpus by name, building its token cache the first time (``tokens``: prepared shards, mapped)."""
    if name == "tokens":
        return load_shards(path)
    if not 0 < val_fraction < 1:
        raise DataError(f"data.val_fraction={val_fraction}: must lie in (0, 1)")
    source = _find(name, path)
    by_file = split_by_file(source.files, val_fraction)
    settings = {"format": FORMAT_VERSION, "separator": SEPARATOR.hex(), "val_fraction": val_fraction}
    fp = cache.fingerprint(source.files, settings)
    folder = cache.cache_root(cache_dir) / "corpora" / fp
    arrays = cache.load_or_build(folder, lambda: _tokenize(source, by_file, val_fraction, progress),
                                 {"name": name, "root": source.root, "settings": settings})
    return Corpus(
        name=name,
        train=arrays["train"],
        val=arrays["val"],
        fingerprint=fp,
        n_files=len(source.files),
        n_bytes=len(arrays["train"]) + len(arrays["val"]),
        split="by_file" if by_file else "by_bytes",
        root=source.root,
    )


def split_by_file(files: tuple[tuple[str, str], ...], val_fraction: float) -> dict[str, list[str]] | None:
    """Absolute paths per split, or None when hashing leaves a split empty (then split by bytes).

    A file goes to val iff the hash of its relative path falls below ``val_fraction``: the choice
    survives moving the corpus, adding other files, and even a larger ``val_fraction`` only moves
    more files into val, never back. Python's ``hash()`` is salted per process, so blake2b.
    """
    split: dict[str, list[str]] = {"train": [], "val": []}
    for rel, path in files:
        h = int.from_bytes(hashlib.blake2b(os.fsencode(rel), digest_size=8).digest(), "big")
        split["val" if h < val_fraction * 2**64 else "train"].append(path)
    return split if split["train"] and split["val"] else None


def _find(name: str, path: str | None) -> sources.Source:
    if name == "python_stdlib":
        if path:
            raise DataError(f"data=python_stdlib reads this interpreter's library and takes no path: "
                            f"drop data.path={path!r}")
        return sources.python_stdlib()
    if name == "local_text":
        if not path:
            raise DataError(f"data=local_text needs data.path: {sources.ALLOWED}")
        return sources.local_text(path)
    raise DataError(f"unknown corpus data.name={name!r}; choose one of: {', '.join(CORPORA)}")


def _tokenize(source: sources.Source, by_file: dict | None, val_fraction: float,
              progress: bool) -> dict[str, np.ndarray]:
    if by_file:
        return encode_splits(by_file, progress)
    # Too few files to split by file (a single file, say): the last val_fraction of the bytes is val.
    tokens = encode_splits({"train": [p for _, p in source.files]}, progress)["train"]
    cut = len(tokens) - max(1, round(len(tokens) * val_fraction))
    return {"train": tokens[:cut], "val": tokens[cut:]}
