"""The normtrain-prepare command line: parse (without importing the data stack, so ``--help`` is instant),
prepare, print a summary. Exit codes as every normtrain command (``normtrain.commands``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

EPILOG = """examples:
  normtrain-prepare python_stdlib data/stdlib-bytes
  normtrain-prepare 'books/**/*.txt' data/books --tokenizer bpe --vocab-size 8192
  normtrain-prepare 'shards/*.parquet' data/mine --tokenizer path/to/tokenizer.json --text-field content
  normtrain-prepare roneneldan/TinyStories data/tinystories --tokenizer bpe --vocab-size 4096
  normtrain-prepare HuggingFaceFW/fineweb-edu data/fineweb_edu --config sample-10BT --streaming \\
      --max-tokens 1000000000 --tokenizer tiktoken:gpt2
then train on it:  normtrain data=tokens data.path=OUT_DIR"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="normtrain-prepare", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Tokenize a corpus once into train.bin / val.bin token shards and meta.json (checksums, "
                    "counts), which `normtrain data=tokens data.path=OUT_DIR` memory-maps. A re-run with the same "
                    "inputs does nothing.")
    p.add_argument("source", metavar="SOURCE",
                   help="python_stdlib, a text file, a folder or a glob (read as bytes, split by file); parquet/"
                        "json/jsonl/arrow/csv files (read through datasets); or a hub dataset id (owner/name)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="the folder to write (new, empty, or an earlier output)")
    p.add_argument("--tokenizer", default="bytes",
                   help="bytes (default), bpe (a byte-level BPE trained on the training split), "
                        "PATH/tokenizer.json, or tiktoken:NAME (its files must be in tiktoken's cache)")
    p.add_argument("--vocab-size", type=int, metavar="N", help="BPE vocabulary size (default 4096)")
    p.add_argument("--val-fraction", type=float, default=0.05, metavar="F",
                   help="share of files (local text) or documents (datasets) that go to val, by hash (default 0.05)")
    p.add_argument("--text-field", default="text", metavar="NAME", help="the column holding the text (datasets)")
    p.add_argument("--config", metavar="NAME", help="the dataset's config (subset), e.g. sample-10BT")
    p.add_argument("--split", default="train", metavar="S", help="the dataset split to read (default train)")
    p.add_argument("--revision", metavar="R", help="the dataset revision (commit, tag or branch) to pin")
    p.add_argument("--streaming", action="store_true", help="stream the hub dataset instead of downloading it")
    p.add_argument("--max-tokens", type=int, metavar="N", help="stop after about N tokens (train + val)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)

    def body() -> None:
        from normtrain.prepare.pipeline import PrepareRequest, prepare

        result = prepare(PrepareRequest(**vars(args)))
        print(summary(result, args.out_dir))

    from normtrain.commands import run_command

    run_command("normtrain-prepare", body)


def summary(result: dict[str, Any], out_dir: str) -> str:
    """What was written (or found up to date), per split, and how fast."""
    if result["up_to_date"]:
        return f"normtrain-prepare: {out_dir} is up to date (same inputs as its meta.json); nothing to do"
    tok, src, timing = result["tokenizer"], result["source"], result["timing"]
    where = src.get("id") or src.get("root")
    lines = [f"normtrain-prepare: wrote {out_dir}",
             f"  source     {src['kind']} {where}" + (f" ({src['n_files']} files)" if "n_files" in src else ""),
             f"  tokenizer  {tok['name']} (vocab {tok['vocab_size']}, {result['dtype']} shards)"]
    text = 0
    for split, c in result["splits"].items():
        text += c["bytes"]
        lines.append(f"  {split:<10} {c['tokens']:>14,} tokens  {c['bytes'] / 1e6:>10.2f} MB of text  "
                     f"{c['bytes'] / max(c['tokens'], 1):5.2f} bytes/token  {c['documents']:,} documents")
    if result["truncated"]:
        lines.append(f"  stopped at --max-tokens {result['max_tokens']:,}")
    rate = text / 1e6 / max(timing["total_s"], 1e-9)
    bpe = f" (BPE training {timing['bpe_s']:.1f} s)" if tok["kind"] == "bpe" else ""
    lines.append(f"  time       {timing['total_s']:.1f} s{bpe}: {rate:.2f} MB/s of text")
    lines.append(f"train on it: normtrain data=tokens data.path={out_dir}")
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
