"""Byte-level corpora (vocab 256) and the batches cut from them.

``load_corpus`` finds the files, splits them into train/val by file and caches their raw bytes on
disk, checksummed; ``BatchSampler`` draws random training windows and ``eval_batches`` the fixed val
windows. Reading a byte corpus needs no ``datasets``: the files are read as bytes, never decoded.
"""

from __future__ import annotations

from normtrain.data.batches import BatchSampler, eval_batches, eval_starts, window_batches
from normtrain.data.corpus import CORPORA, Corpus, load_corpus

__all__ = ["CORPORA", "Corpus", "load_corpus", "BatchSampler", "eval_batches", "eval_starts", "window_batches"]
