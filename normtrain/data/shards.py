"""Token shards: what ``normtrain.data.encode`` writes (for ``normtrain-prepare``, and the byte corpora's cache
entries) and what ``data=tokens`` memory-maps.

A shard folder holds ``train.bin`` and ``val.bin`` (the tokens, no header, little-endian uint16 when the vocabulary
fits, uint32 otherwise: the layout nanoGPT and llm.c use; the byte corpora's cache stores uint8, meta.json's
``dtype``), ``train_counts.npy`` (how often each token occurs in train), ``tokenizer.json`` when the tokenizer
has one, and ``meta.json``: the source, the tokenizer and its hash, the vocabulary, token, byte and document
counts per split, and every file's size and sha256. Each file is written under a temporary name and moved into
place, meta.json last, and nothing is used before it matches its record: a damaged shard is reported, never
trained on.

Verifying reads the files once (sha256, about 1.8 GB/s) with plain reads, not through the map, so a shard much
larger than memory is checked without ever being resident; training then memory-maps the very file it checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from normtrain.util.errors import DataError
from normtrain.util.hashing import feed

FORMAT = 1
META = "meta.json"
SPLITS = {"train": "train.bin", "val": "val.bin"}
COUNTS = "train_counts.npy"
TOKENIZER = "tokenizer.json"
FILES = (*SPLITS.values(), COUNTS, TOKENIZER, META)


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def vocab_size_of(name: str, path: str | None) -> int:
    """The vocabulary of a corpus without loading it: 256 for byte corpora, meta.json's for shards."""
    return read_meta(path)["vocab_size"] if name == "tokens" else 256


def prepare_command(prepare: Any, out_dir: str, val_fraction: float) -> str:
    """The normtrain-prepare command line that writes ``out_dir`` as a preset's ``data.prepare`` describes."""
    args = [prepare.source, out_dir, "--tokenizer", prepare.tokenizer]
    options = {"--vocab-size": prepare.vocab_size, "--config": prepare.config, "--revision": prepare.revision,
               "--max-tokens": prepare.max_tokens}
    if prepare.split != "train":
        options["--split"] = prepare.split
    if prepare.text_field != "text":
        options["--text-field"] = prepare.text_field
    if val_fraction != 0.05:
        options["--val-fraction"] = val_fraction
    for flag, value in options.items():
        if value is not None:
            args += [flag, str(value)]
    if prepare.streaming:
        args.append("--streaming")
    return "normtrain-prepare " + " ".join(shlex.quote(a) for a in args)


def file_record(path: Path) -> dict[str, Any]:
    """Size and sha256 of a file, read in blocks (never mapped)."""
    with open(path, "rb") as f:
        return {"size": os.fstat(f.fileno()).st_size, "sha256": _sha256(f)}


def read_meta(folder: str | Path, remedy: str | None = None) -> dict[str, Any]:
    """meta.json of a shard folder, unverified (the vocabulary of a model to build); DataError if there is none."""
    path = Path(folder).expanduser() / META
    remedy = remedy or f"rerun normtrain-prepare into {path.parent}"
    try:
        meta = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise DataError(f"{path.parent} holds no prepared token shards (no {META}): write them with "
                        f"normtrain-prepare SOURCE {path.parent}") from None
    except (OSError, ValueError) as err:
        raise DataError(f"{path} cannot be read ({err}): {remedy}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DataError(f"{path} is not a normtrain-prepare record of format {FORMAT}: {remedy}")
    return meta


def verify(folder: str | Path, remedy: str | None = None) -> dict[str, Any]:
    """meta.json, once every file it lists matches its size and sha256; DataError naming what does not and
    ``remedy``."""
    folder = Path(folder).expanduser()
    remedy = remedy or f"rerun normtrain-prepare into {folder}"
    meta = read_meta(folder, remedy)
    for name, record in meta["files"].items():
        if name not in SPLITS.values():  # the shards are checked as they are mapped (load_shards)
            _check(folder / name, record, lambda f: (_sha256(f), None), remedy)
    return meta


@dataclass
class TokenCorpus:
    """Token shards, split into train and val, as training reads them (the interface of ``Corpus``)."""

    train: np.ndarray  # read-only memory map of train.bin
    val: np.ndarray
    fingerprint: str  # the shards' own digest
    vocab_size: int
    root: str
    meta: dict[str, Any] = field(repr=False)
    counts: np.ndarray = field(repr=False)  # int64, every token id's count in train (vocab_size long)
    name: str = "tokens"

    @property
    def val_bytes_per_token(self) -> float:
        """Bytes of text per validation token, so that val/bpb = loss / ln 2 / this (1.0 for bytes)."""
        val = self.meta["splits"]["val"]
        return val["bytes"] / val["tokens"]

    def describe(self) -> dict[str, Any]:
        splits = self.meta["splits"]
        return {
            "name": self.name, "root": self.root, "source": self.meta["source"], "tokenizer": self.meta["tokenizer"],
            "vocab_size": self.vocab_size, "n_bytes": splits["train"]["bytes"] + splits["val"]["bytes"],
            "n_train_tokens": len(self.train), "n_val_tokens": len(self.val), "n_val_bytes": splits["val"]["bytes"],
            "fingerprint": self.fingerprint, "split": self.meta["source"].get("split", "by_hash"),
        }


def load_shards(path: str | None, remedy: str | None = None) -> TokenCorpus:
    """The shard folder ``path``, verified, its two splits memory-mapped (nothing of them read into memory)."""
    if not path:
        raise DataError("data=tokens needs data.path: a folder written by normtrain-prepare")
    folder = Path(path).expanduser()
    remedy = remedy or f"rerun normtrain-prepare into {folder}"
    meta = verify(folder, remedy)
    dtype = np.dtype(meta["dtype"]).newbyteorder("<")  # shards are little-endian; the byte corpora's are uint8
    maps = {split: _check(folder / name, meta["files"][name], lambda f, d=dtype: _mapped(f, d), remedy)
            for split, name in SPLITS.items()}
    counts = np.load(folder / COUNTS, allow_pickle=False)
    digest = hashlib.blake2b("".join(meta["files"][n]["sha256"] for n in SPLITS.values()).encode(), digest_size=16)
    return TokenCorpus(train=maps["train"], val=maps["val"], fingerprint=digest.hexdigest(),
                       vocab_size=meta["vocab_size"], root=str(folder), meta=meta, counts=counts)


def _mapped(f: IO[bytes], dtype: np.dtype) -> tuple[str, np.ndarray]:
    """(sha256 of the open file, a read-only map of that very file)."""
    digest = _sha256(f)
    n = os.fstat(f.fileno()).st_size // dtype.itemsize
    array = np.memmap(f, dtype=dtype, mode="r", shape=(n,)) if n else np.zeros(0, dtype=dtype)
    return digest, array


def _check(path: Path, record: dict[str, Any], read: Callable[[IO[bytes]], tuple[str, Any]], remedy: str) -> Any:
    """Open ``path``, compare its size, and let ``read`` hash it (and map it): what ``read`` made of it once the
    hash matches the record, else DataError."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size != record["size"]:
                raise DataError(f"{path} has {size} bytes, its record in {META} says {record['size']}: it is "
                                f"damaged or was replaced; {remedy}")
            digest, value = read(f)
    except FileNotFoundError:
        raise DataError(f"{path} is missing (listed in {META}): {remedy}") from None
    except OSError as err:
        raise DataError(f"{path} cannot be read ({err}): {remedy}") from None
    if digest != record["sha256"]:
        raise DataError(f"{path} does not match its sha256 in {META} (its bytes changed on disk): {remedy}")
    return value


def _sha256(f: IO[bytes]) -> str:
    f.seek(0)
    return feed(hashlib.sha256(), f).hexdigest()
