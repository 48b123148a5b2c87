"""How fast normtrain-prepare turns text into token shards: MB of text per second, bytes and a trained BPE.

Prepares one source (default: the Python standard library, ~11 MB) with ``--tokenizer bytes`` and with a
byte-level BPE of ``--vocab-size`` tokens (trained on the training split, then applied), each ``--repeats``
times into fresh folders, and reports the median wall time of the whole command (finding and hashing the
files, BPE training, tokenizing on every core, writing and checksumming the shards) as MB of text per second,
with the BPE's training and tokenizing times apart. Usage:

    python scripts/bench_prepare.py [--source python_stdlib] [--vocab-size 4096] [--repeats 3] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
from pathlib import Path

import numpy as np

from normtrain.data.tokenizer import workers
from normtrain.prepare import PrepareRequest, prepare


def measure(source: str, options: dict, repeats: int) -> dict:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            result = prepare(PrepareRequest(source, str(Path(tmp) / str(i)), progress=False, **options))
            text = sum(s["bytes"] for s in result["splits"].values())
            runs.append({**result["timing"], "mb": text / 1e6,
                         "tokens": sum(s["tokens"] for s in result["splits"].values())})
            print(f"  {options.get('tokenizer', 'bytes'):5s} run {i}: {runs[-1]['total_s']:6.2f} s "
                  f"({runs[-1]['mb'] / runs[-1]['total_s']:.2f} MB/s)", flush=True)
    median = {key: statistics.median(r[key] for r in runs) for key in ("total_s", "bpe_s", "tokenize_s")}
    mb = runs[0]["mb"]
    return {**median, "mb_of_text": mb, "tokens": runs[0]["tokens"], "mb_per_s": mb / median["total_s"],
            "tokenize_mb_per_s": mb / median["tokenize_s"], "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default="python_stdlib")
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args()

    results = {"bytes": measure(args.source, {}, args.repeats),
               f"bpe-{args.vocab_size}": measure(args.source, {"tokenizer": "bpe", "vocab_size": args.vocab_size},
                                                 args.repeats)}
    for name, r in results.items():
        bpe = f"; BPE training {r['bpe_s']:.1f} s, tokenizing {r['tokenize_mb_per_s']:.2f} MB/s" if r["bpe_s"] > 0.05 \
            else ""
        print(f"{name:9s} {r['mb_of_text']:.1f} MB of text -> {r['tokens']:,} tokens in {r['total_s']:.2f} s: "
              f"{r['mb_per_s']:.2f} MB/s{bpe}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    record = {"source": args.source, "repeats": args.repeats, "results": results, "workers": workers(),
              "load_average_1min": round(load, 2), "numpy": np.__version__,
              "device": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores"}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
