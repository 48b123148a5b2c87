"""Files to byte tokens (vocab 256): each file's raw bytes, never decoded.

A byte-level model's tokens are the bytes on disk, so nothing is decoded or translated: a Latin-1
file, or one with ``\\r\\n`` line ends, gives exactly its bytes as tokens. (Decoding UTF-8 with
replacement, as before, turned every stray Latin-1 byte into the 3 bytes of U+FFFD.)
Each file is one document; the documents of a split are joined with :data:`SEPARATOR`.
"""

from __future__ import annotations

import os

import numpy as np

from normtrain.progress import make_progress

# Text files hold no NUL (a file with one in its first 8 KB is skipped as binary), so NUL is an
# unambiguous end-of-document token, where b"\n\n" would look like any blank line in the code.
SEPARATOR = b"\0"


def encode_splits(files: dict[str, list[str]], progress: bool) -> dict[str, np.ndarray]:
    """One uint8 array per split: that split's files, in the given order, joined by SEPARATOR."""
    total = sum(os.path.getsize(path) for paths in files.values() for path in paths)
    with make_progress(total, 0, "reading corpus", progress, unit="B") as bar:
        return {split: _join(paths, bar) for split, paths in files.items()}


def _join(paths: list[str], bar) -> np.ndarray:
    docs = []
    for path in paths:
        with open(path, "rb") as f:
            docs.append(f.read())
        bar.update(len(docs[-1]))
    return np.frombuffer(SEPARATOR.join(docs), dtype=np.uint8)
