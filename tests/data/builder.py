"""Build a corpus's token cache in a subprocess, with a fault injected, for tests/data/test_cache.py.

    python builder.py CORPUS_FOLDER CACHE_DIR [--kill-in NAME] [--slow-replace SECONDS] [--start FILE]

--kill-in train.bin|val.bin  SIGKILL once half of that shard's temporary file is written
--kill-in meta.json          SIGKILL once meta.json's temporary file is complete, before it is moved into place
--slow-replace S             sleep S seconds before each os.replace, so two concurrent builders interleave
--start FILE                 create FILE.<pid>.ready, then wait for FILE: a start line for several builders
Prints {"train": sha256, "val": sha256, "datasets_imported": bool} as JSON; any warning is an error.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path


class HalfThenDie:
    """A file that writes half of what it is given, then kills its process: a builder killed mid-write."""

    def __init__(self, file):
        self.file = file

    def write(self, data):
        self.file.write(data[: len(data) // 2])
        self.file.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def inject(kill_in: str | None, slow_replace: float) -> None:
    """Patch the two steps of a cache write every entry file goes through: the write, then os.replace."""
    from normtrain.data import cache

    real_writing, real_replace = cache.writing, os.replace

    @contextlib.contextmanager
    def writing(path):
        with real_writing(path) as f:
            yield HalfThenDie(f) if kill_in == Path(path).name != "meta.json" else f

    def replace(src, dst):
        if kill_in and Path(dst).name == kill_in:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(slow_replace)
        return real_replace(src, dst)

    cache.writing, os.replace = writing, replace


def wait_for_start(start: Path) -> None:
    Path(f"{start}.{os.getpid()}.ready").touch()
    deadline = time.monotonic() + 60
    while not start.exists():
        if time.monotonic() > deadline:
            sys.exit("no start signal within 60 s")
        time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus")
    parser.add_argument("cache_dir")
    parser.add_argument("--kill-in")
    parser.add_argument("--slow-replace", type=float, default=0.0)
    parser.add_argument("--start", type=Path)
    args = parser.parse_args()
    warnings.simplefilter("error")
    from normtrain.data import load_corpus

    inject(args.kill_in, args.slow_replace)
    if args.start:
        wait_for_start(args.start)
    corpus = load_corpus("local_text", args.corpus, cache_dir=args.cache_dir, progress=False)
    digests = {name: hashlib.sha256(getattr(corpus, name).tobytes()).hexdigest() for name in ("train", "val")}
    print(json.dumps({**digests, "datasets_imported": "datasets" in sys.modules}))


if __name__ == "__main__":
    main()
