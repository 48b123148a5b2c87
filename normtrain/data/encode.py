"""Files to byte tokens (vocab 256), read through datasets' "text" builder.

Each file is one document (``sample_by="document"``), decoded as UTF-8 with
``encoding_errors="replace"``: a stray Latin-1 byte becomes U+FFFD (3 bytes) instead of aborting
the whole corpus. The builder reads in text mode, so ``\\r\\n`` and ``\\r`` arrive as ``\\n``.
Documents are re-encoded to UTF-8 and joined with :data:`SEPARATOR`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from pathlib import Path

import numpy as np

# Text files hold no NUL (a file with one in its first 8 KB is skipped as binary), so NUL is an
# unambiguous end-of-document token, where b"\n\n" would look like any blank line in the code.
SEPARATOR = b"\0"


def encode_splits(files: dict[str, list[str]], work_dir: Path, progress: bool) -> dict[str, np.ndarray]:
    """One uint8 array per split: that split's files, in the given order, joined by SEPARATOR."""
    # Everything is local; never let datasets try the Hub (read when datasets is first imported).
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import datasets

    work_dir.mkdir(parents=True, exist_ok=True)
    # The builder's Arrow files are scratch: they live in a temporary folder under our cache (not
    # ~/.cache/huggingface) and go once the tokens are saved, so the corpus is not stored twice.
    with tempfile.TemporaryDirectory(dir=work_dir, prefix="hf-") as scratch, _progress_bars(progress):
        splits = datasets.load_dataset(
            "text",
            data_files={split: [_literal(p) for p in paths] for split, paths in files.items()},
            sample_by="document",
            encoding="utf-8",
            encoding_errors="replace",
            cache_dir=scratch,
            keep_in_memory=True,
        )
        return {split: _join(splits[split]["text"]) for split in files}


def _join(docs) -> np.ndarray:
    return np.frombuffer(SEPARATOR.join(doc.encode("utf-8") for doc in docs), dtype=np.uint8)


def _literal(path: str) -> str:
    """datasets treats data_files as glob patterns: escape a real file named like ``a[1].txt``."""
    return glob.escape(path) if glob.has_magic(path) else path


@contextlib.contextmanager
def _progress_bars(enabled: bool):
    """datasets' own bars (reading each split) are the progress shown; they are global, so restore."""
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_disabled = are_progress_bars_disabled()
    if not enabled:
        disable_progress_bars()
    try:
        yield
    finally:
        if not enabled and not was_disabled:
            enable_progress_bars()
