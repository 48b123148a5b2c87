"""Build a corpus's token cache in a subprocess, with a fault injected, for tests/data/test_cache.py.

    python builder.py CORPUS_FOLDER CACHE_DIR [--kill-in NAME] [--slow-replace SECONDS] [--start FILE]

--kill-in train.npy|val.npy  SIGKILL once half of that array's temporary file is written
--kill-in meta.json          SIGKILL once meta.json's temporary file is complete, before it is moved into place
--slow-replace S             sleep S seconds before each os.replace, so two concurrent builders interleave
--start FILE                 create FILE.<pid>.ready, then wait for FILE: a start line for several builders
Prints {"train": sha256, "val": sha256, "datasets_imported": bool} as JSON; any warning is an error.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def inject(kill_in: str | None, slow_replace: float) -> None:
    """Patch the two steps of a cache write every entry file goes through: np.save, then os.replace."""
    real_save, real_replace = np.save, os.replace

    def save(f, array, *args, **kwargs):
        if kill_in and os.path.basename(f.name).startswith(f".{kill_in}."):
            buffer = io.BytesIO()
            real_save(buffer, array)
            f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return real_save(f, array, *args, **kwargs)

    def replace(src, dst):
        if kill_in and Path(dst).name == kill_in:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(slow_replace)
        return real_replace(src, dst)

    np.save, os.replace = save, replace


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
