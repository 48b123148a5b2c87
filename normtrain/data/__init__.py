"""Corpora and the batches cut from them: byte-level text (vocab 256) and token shards.

``load_corpus`` finds the files, splits them into train/val by file and encodes their raw bytes once into
shards in the on-disk cache, checksummed, as ``normtrain-prepare`` does; or (``tokens``) memory-maps the shards
``normtrain-prepare`` wrote (``shards``);
``BatchSampler`` draws random training windows and ``window_batches`` the fixed val windows (``eval_starts``).
Reading a byte corpus needs no ``datasets``: the files are read as bytes, never decoded.
"""

from __future__ import annotations

from typing import Any

from normtrain.data.corpus import CORPORA, Corpus, load_corpus
from normtrain.data.shards import TokenCorpus

__all__ = ["CORPORA", "Corpus", "TokenCorpus", "load_corpus", "BatchSampler", "eval_starts", "eval_window_count",
           "select_starts", "window_batches"]


def __getattr__(name: str) -> Any:
    """The batch makers import torch: only when asked for, so normtrain-prepare (numpy only) starts fast."""
    if name in ("BatchSampler", "eval_starts", "eval_window_count", "select_starts", "window_batches"):
        from normtrain.data import batches

        return getattr(batches, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
