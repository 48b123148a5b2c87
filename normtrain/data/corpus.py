"""``load_corpus``: the byte corpora (``python_stdlib``, ``local_text``) through the pipeline of ``normtrain-prepare``.

Their files are found (``sources``), split and streamed (``documents.local_text``) and encoded into shards
(``encode.write_shards``, the byte tokenizer, uint8) once, into ``<cache>/corpora/<fingerprint>/``; every later
load of the same files and settings only hashes the files, memory-maps those shards and checks them against
their recorded checksums (``shards.load_shards``). An entry that is damaged is named in a warning and rebuilt.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from normtrain.data import cache, documents, sources
from normtrain.data.encode import write_shards
from normtrain.data.shards import META, TokenCorpus, load_shards
from normtrain.data.tokenizer import SEPARATOR, ByteTokenizer
from normtrain.util.errors import DataError
from normtrain.util.runlog import say

CORPORA = ("python_stdlib", "local_text", "tokens")
# Bump when the tokens change (separator, decoding, split rule) so old caches are not reused; not for the layout
# on disk: the fingerprint is also the corpus's identity in run records and checkpoints (resume compares it).
# 2: raw bytes (1 decoded UTF-8 with replacement and translated newlines); meta.json holds checksums.
FORMAT_VERSION = 2
OLD_LAYOUT = ("train.npy", "val.npy")  # entries written before the byte corpora were shards


class Corpus(TokenCorpus):
    """Byte tokens of one corpus (vocab 256), split into train and val: a cache entry's shards, as uint8."""

    def describe(self) -> dict:
        """The corpus as a run's summary records it; ``n_bytes``: tokens in train + val, document separators
        included; ``split``: ``by_file`` or ``by_bytes``."""
        source = self.meta["source"]
        return {"name": self.name, "root": self.root, "n_files": source["n_files"],
                "n_bytes": len(self.train) + len(self.val), "n_train_bytes": len(self.train),
                "n_val_bytes": len(self.val), "fingerprint": self.fingerprint, "split": source["split"]}


def load_corpus(
    name: str,
    path: str | None = None,
    val_fraction: float = 0.05,
    cache_dir: str | None = None,
    progress: bool = True,
) -> Corpus | TokenCorpus:
    """Load a corpus by name, building its cache entry the first time (``tokens``: prepared shards, mapped)."""
    if name == "tokens":
        return load_shards(path)
    if not 0 < val_fraction < 1:
        raise DataError(f"data.val_fraction={val_fraction}: must lie in (0, 1)")
    source = _find(name, path)
    settings = {"format": FORMAT_VERSION, "separator": SEPARATOR.hex(), "val_fraction": val_fraction}
    fp = cache.fingerprint(source.files, settings)
    folder = cache.cache_root(cache_dir) / "corpora" / fp
    shards = _cached(folder)
    if shards is None:
        folder.mkdir(parents=True, exist_ok=True)
        docs = documents.local_text(source, name, val_fraction)
        write_shards(folder, docs, ByteTokenizer(), fp, dtype=np.uint8, progress=progress, desc="reading corpus")
        shards = load_shards(folder, remedy="check the disk, or point data.cache_dir elsewhere")
    return Corpus(**{**vars(shards), "name": name, "fingerprint": fp, "root": source.root})


def _cached(folder: Path) -> TokenCorpus | None:
    """The entry's verified shards; None if it has none yet (or its builder was killed), or they are damaged."""
    cache.sweep(folder)
    if any((folder / old).exists() for old in OLD_LAYOUT):
        say(f"normtrain: the token cache entry {folder} is in the layout before shards ({', '.join(OLD_LAYOUT)}): "
            "rebuilding it as shards (the same tokens, the same fingerprint)")
        for stale in (*OLD_LAYOUT, META):
            (folder / stale).unlink(missing_ok=True)
        return None
    if not (folder / META).is_file():
        return None  # not damage: the entry was never finished
    try:
        return load_shards(folder, remedy="rebuilding it")
    except DataError as err:
        why = str(err)
    except (KeyError, TypeError, AttributeError, ValueError) as err:  # a meta.json of the right format, mangled
        why = f"{META} does not describe the shards ({type(err).__name__}: {err}); rebuilding it"
    warnings.warn(f"the token cache entry {folder} is unusable: {why}", stacklevel=3)
    return None


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
