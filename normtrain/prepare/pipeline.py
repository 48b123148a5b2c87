"""``prepare``: a source, a tokenizer and a folder in; token shards, their counts and meta.json out.

The steps: check the output folder, open the source, name the inputs (a fingerprint of the settings and every
local file's bytes: the same inputs again are a no-op), train the BPE if one is asked for (on the training
split only, so no validation text shapes the vocabulary), then encode the documents into the shards
(``normtrain.data.encode``, the step the byte corpora's cache shares), meta.json last.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normtrain.data import cache, shards
from normtrain.data.documents import open_documents
from normtrain.data.encode import write_shards
from normtrain.data.pieces import Documents
from normtrain.data.tokenizer import Tokenizer, load_tokenizer, train_bpe
from normtrain.util.errors import DataError

BPE_TRAIN_BYTES = 1 << 30  # the BPE learns from at most this much of the training split
DEFAULT_BPE_VOCAB = 4096


@dataclass
class PrepareRequest:
    """The command line of normtrain-prepare, as values."""

    source: str
    out_dir: str
    tokenizer: str = "bytes"
    vocab_size: int | None = None  # bpe only; default DEFAULT_BPE_VOCAB
    val_fraction: float = 0.05
    text_field: str = "text"
    config: str | None = None
    split: str = "train"
    revision: str | None = None
    streaming: bool = False
    max_tokens: int | None = None
    progress: bool = True


def prepare(request: PrepareRequest) -> dict[str, Any]:
    """Write the shards of ``request`` (or find them up to date); returns meta.json plus ``up_to_date`` and
    ``timing`` (seconds: total from the start, of which BPE training, and tokenizing with writing)."""
    started = time.perf_counter()
    out = Path(request.out_dir).expanduser().resolve()
    _check_request(request)
    docs = open_documents(request.source, request.val_fraction, request.text_field, request.config,
                          request.split, request.revision, request.streaming)
    _check_out_dir(out, docs)
    tokenizer = None if request.tokenizer == "bpe" else load_tokenizer(request.tokenizer)
    inputs = docs.fingerprint(_settings(request, tokenizer))
    if (meta := _up_to_date(out, inputs)) is not None:
        return {**meta, "up_to_date": True}
    out.mkdir(parents=True, exist_ok=True)
    cache.sweep(out)
    (out / shards.META).unlink(missing_ok=True)  # from here the folder reads "not prepared", never half-updated
    learning = time.perf_counter()
    if tokenizer is None:
        tokenizer = train_bpe(_training_texts(docs), request.vocab_size or DEFAULT_BPE_VOCAB)
    trained = time.perf_counter()
    meta = write_shards(out, docs, tokenizer, inputs, max_tokens=request.max_tokens, progress=request.progress)
    done = time.perf_counter()
    timing = {"total_s": done - started, "bpe_s": trained - learning, "tokenize_s": done - trained}
    return {**meta, "up_to_date": False, "timing": timing}


def _check_request(r: PrepareRequest) -> None:
    if r.vocab_size is not None and r.tokenizer != "bpe":
        raise DataError(f"--vocab-size sets the size of a BPE trained here (--tokenizer bpe); the tokenizer "
                        f"{r.tokenizer!r} has its own")
    if r.max_tokens is not None and r.max_tokens < 1:
        raise DataError(f"--max-tokens {r.max_tokens}: must be at least 1")


def _check_out_dir(out: Path, docs: Documents) -> None:
    """Refuse a folder that holds other files (a typo must not mix shards into someone's data), and one inside
    the local text being read (a second run would read the first one's output)."""
    if out.is_file():
        raise DataError(f"OUT_DIR {out} is a file; give a new or empty folder, or one normtrain-prepare wrote")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in shards.FILES and not cache.is_temp(p.name))
        if foreign:
            raise DataError(f"OUT_DIR {out} holds files normtrain-prepare did not write ({', '.join(foreign[:5])}"
                            f"{', ...' if len(foreign) > 5 else ''}); give a new or empty folder")
    root = docs.record.get("root")
    if docs.files and root and Path(root).expanduser().resolve().is_dir():
        if out == Path(root).resolve() or Path(root).resolve() in out.parents:
            raise DataError(f"OUT_DIR {out} lies inside the source {root}: a later run would read the shards as "
                            "text; write them elsewhere")


def _settings(r: PrepareRequest, tokenizer: Tokenizer | None) -> dict[str, Any]:
    """What, besides the source, decides the shards' bytes (a tokenizer file by its contents, not its path)."""
    return {"format": shards.FORMAT, "tokenizer": r.tokenizer if tokenizer is None or tokenizer.sha256 is None
            else tokenizer.sha256, "vocab_size": r.vocab_size, "val_fraction": r.val_fraction,
            "max_tokens": r.max_tokens, "piece_rule": 1}


def _up_to_date(out: Path, inputs: str) -> dict[str, Any] | None:
    if not (out / shards.META).is_file():
        return None
    try:
        meta = shards.load_shards(str(out)).meta  # every file hashed against meta.json
    except DataError as err:
        warnings.warn(f"{err}; preparing it again", stacklevel=3)
        return None
    return meta if meta.get("inputs") == inputs else None


def _training_texts(docs: Documents) -> Iterator[str]:
    """The training split's text, up to BPE_TRAIN_BYTES."""
    seen = 0
    for piece in docs.pieces():
        if piece.split == "train":
            yield piece.data.decode("utf-8", errors="replace")
            seen += len(piece.data)
            if seen >= BPE_TRAIN_BYTES:
                return
