"""normtrain-prepare on local files: what the shards hold, what meta.json records, re-runs, damage, datasets."""

import json
import subprocess
import sys

import numpy as np
import pytest
from prepare_helpers import prepare_quietly, run_prepare_cli

from normtrain.data import load_corpus
from normtrain.data.pieces import in_val
from normtrain.data.shards import load_shards
from normtrain.util.errors import DataError


def test_byte_shards_are_the_byte_corpus(shard_dirs, text_corpus, tmp_path):
    shards = load_shards(shard_dirs["bytes"])
    corpus = load_corpus("local_text", str(text_corpus), 0.1, str(tmp_path / "cache"), progress=False)
    assert shards.train.dtype == np.uint16 and isinstance(shards.train, np.memmap)
    assert np.array_equal(shards.train, corpus.train) and np.array_equal(shards.val, corpus.val)
    assert shards.vocab_size == 256 and shards.val_bytes_per_token == 1.0
    assert np.array_equal(shards.counts, np.bincount(corpus.train, minlength=256))
    meta = shards.meta
    assert meta["splits"]["train"]["tokens"] == meta["splits"]["train"]["bytes"] == len(corpus.train)
    assert meta["source"]["split"] == "by_file" and meta["tokenizer"]["kind"] == "bytes"
    assert set(meta["files"]) == {"train.bin", "val.bin", "train_counts.npy"}


def test_a_bpe_reads_the_same_bytes_in_fewer_tokens_and_decodes_back(shard_dirs):
    from tokenizers import Tokenizer

    byte, bpe = load_shards(shard_dirs["bytes"]), load_shards(shard_dirs["bpe"])
    for split in ("train", "val"):  # the same files per split, the same bytes of text, fewer tokens
        assert bpe.meta["splits"][split]["bytes"] == byte.meta["splits"][split]["bytes"]
        assert bpe.meta["splits"][split]["tokens"] < byte.meta["splits"][split]["tokens"] / 2
    assert bpe.vocab_size == 320 and bpe.meta["tokenizer"]["eot"] == 0
    assert bpe.val_bytes_per_token == len(byte.val) / len(bpe.val)
    tokenizer = Tokenizer.from_file(str(shard_dirs["bpe"] / "tokenizer.json"))
    text = tokenizer.decode(bpe.val.tolist(), skip_special_tokens=False)
    assert text.encode() == byte.val.astype(np.uint8).tobytes().replace(b"\0", b"<|endoftext|>")
    assert np.array_equal(bpe.counts, np.bincount(bpe.train, minlength=320))


def test_a_tokenizer_json_by_path(shard_dirs, wordpiece_json):
    shards = load_shards(shard_dirs["file"])
    record = shards.meta["tokenizer"]
    assert record["kind"] == "file" and record["name"] == str(wordpiece_json)
    from tokenizers import Tokenizer

    copied = (shard_dirs["file"] / "tokenizer.json").read_text()
    assert copied == Tokenizer.from_file(str(wordpiece_json)).to_str()  # the same tokenizer, stored compactly
    assert shards.val[:1].tolist() == Tokenizer.from_file(str(wordpiece_json)).encode("def").ids[:1]
    assert record["eot"] == Tokenizer.from_file(str(wordpiece_json)).token_to_id("</s>")


def test_a_rerun_with_the_same_inputs_is_a_no_op(text_corpus, tmp_path):
    out = tmp_path / "shards"
    first = prepare_quietly(text_corpus, out)
    stamps = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.iterdir()}
    again = prepare_quietly(text_corpus, out)
    assert again["up_to_date"] and not first["up_to_date"]
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.iterdir()} == stamps
    assert prepare_quietly(text_corpus, out, val_fraction=0.2)["up_to_date"] is False  # other inputs: rebuilt


def test_damaged_shards_are_reported_never_trained_on_and_a_rerun_heals_them(text_corpus, tmp_path):
    out = tmp_path / "shards"
    prepare_quietly(text_corpus, out)
    val = bytearray((out / "val.bin").read_bytes())
    val[100] ^= 1
    (out / "val.bin").write_bytes(val)
    with pytest.raises(DataError, match="val.bin does not match its sha256.*rerun normtrain-prepare"):
        load_shards(out)
    with pytest.warns(UserWarning, match="does not match its sha256"):
        assert not prepare_quietly(text_corpus, out)["up_to_date"]
    load_shards(out)
    with open(out / "train.bin", "r+b") as f:
        f.truncate(10)
    with pytest.raises(DataError, match="train.bin has 10 bytes, its record in meta.json says"):
        load_shards(out)
    (out / "meta.json").unlink()
    with pytest.raises(DataError, match="holds no prepared token shards.*normtrain-prepare SOURCE"):
        load_shards(out)


def test_out_dir_is_never_mixed_into_other_files(text_corpus, tmp_path):
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match="holds files normtrain-prepare did not write.*notes.txt"):
        prepare_quietly(text_corpus, tmp_path / "theirs")
    with pytest.raises(DataError, match="lies inside the source"):
        prepare_quietly(text_corpus, text_corpus / "shards")
    with pytest.raises(DataError, match="--vocab-size sets the size of a BPE"):
        prepare_quietly(text_corpus, tmp_path / "x", vocab_size=1000)


def write_rows(folder, n=300):
    """The same rows as parquet (two files) and as JSON lines."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    texts = [f"row {i}: " + "naïve text ✓ " * (i % 5 + 1) for i in range(n)]
    pq.write_table(pa.table({"content": texts[: n // 2], "id": list(range(n // 2))}), folder / "a.parquet")
    pq.write_table(pa.table({"content": texts[n // 2:], "id": list(range(n // 2, n))}), folder / "b.parquet")
    with open(folder / "rows.jsonl", "w") as f:
        f.writelines(json.dumps({"content": t}) + "\n" for t in texts)
    return texts


def test_local_parquet_and_json_through_datasets(tmp_path):
    texts = write_rows(tmp_path / "rows")
    meta = prepare_quietly(tmp_path / "rows" / "*.parquet", tmp_path / "pq", text_field="content", val_fraction=0.2)
    assert meta["source"]["builder"] == "parquet" and meta["source"]["n_files"] == 2
    shards = load_shards(tmp_path / "pq")
    val = [t for t in texts if in_val(t.encode(), 0.2)]
    assert shards.val.astype(np.uint8).tobytes() == "\0".join(val).encode()  # UTF-8 bytes, NUL between rows
    assert meta["splits"]["train"]["documents"] + meta["splits"]["val"]["documents"] == len(texts)
    jsonl = prepare_quietly(tmp_path / "rows" / "rows.jsonl", tmp_path / "js", text_field="content",
                            val_fraction=0.2)
    assert jsonl["files"]["train.bin"] == meta["files"]["train.bin"]  # same rows, same tokens
    with pytest.raises(DataError, match="'text' is not a column of the parquet files.*content, id"):
        prepare_quietly(tmp_path / "rows" / "*.parquet", tmp_path / "bad")


def test_max_tokens_stops_early(text_corpus, tmp_path):
    meta = prepare_quietly(text_corpus, tmp_path / "s", max_tokens=20_000)
    total = meta["splits"]["train"]["tokens"] + meta["splits"]["val"]["tokens"]
    assert meta["truncated"] and 20_000 <= total < 20_000 + 8 << 20


@pytest.mark.slow
def test_cli_quiet_for_local_parquet_and_no_datasets_for_local_text(tmp_path):
    write_rows(tmp_path / "rows")
    proc = run_prepare_cli(tmp_path / "rows" / "*.parquet", tmp_path / "pq", "--text-field", "content",
                           "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "MB/s" in proc.stdout
    for noise in ("Downloading", "Generating", "Resolving", "it/s"):
        assert noise not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.txt").write_text("plain text, read as bytes\n" * 300)
    (tmp_path / "text" / "b.txt").write_text("more of it, decoded for the BPE\n" * 300)
    code = ("import sys\nfrom normtrain.prepare.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit as e:\n    print('exit', e.code, sorted(m for m in ('datasets', 'pyarrow', 'pandas',"
            " 'torch') if m in sys.modules))")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "text"), str(tmp_path / "t"), "--tokenizer", "bpe",
         "--vocab-size", "300", "--val-fraction", "0.5"], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().endswith("exit 0 []"), proc.stdout + proc.stderr


@pytest.mark.slow
def test_cli_a_hub_dataset_offline_and_not_cached_exits_2_with_what_to_do(tmp_path):
    proc = run_prepare_cli("someone/a-corpus-never-downloaded", tmp_path / "out", "--config", "en",
                           env={"HF_HOME": str(tmp_path / "hf")})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in ("normtrain-prepare: the dataset 'someone/a-corpus-never-downloaded' is not in the local Hugging "
                   "Face cache", "HF_HUB_OFFLINE and HF_DATASETS_OFFLINE are set", "machine with network"):
        assert needle in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.extras("tiktoken")
def test_cli_an_unknown_tiktoken_encoding_exits_2(tmp_path):
    bad = run_prepare_cli("python_stdlib", tmp_path / "out", "--tokenizer", "tiktoken:nope")
    assert bad.returncode == 2 and "no such encoding" in bad.stderr and "Traceback" not in bad.stderr


CARD = """---
configs:
- config_name: small
  data_files:
  - split: train
    path: small/train-*.parquet
  - split: validation
    path: small/validation-*.parquet
- config_name: large
  data_files:
  - split: train
    path: large/train-*.parquet
---
# a dataset card
"""


def dataset_repo(root):
    """A local copy of a hub dataset: a dataset card with two configs, parquet files per split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "small").mkdir(parents=True)
    (root / "large").mkdir()
    (root / "README.md").write_text(CARD)
    tables = {"small/train": 100, "small/validation": 20, "large/train": 300}
    for name, n in tables.items():
        texts = [f"{name} row {i} " * 3 for i in range(n)]
        pq.write_table(pa.table({"text": texts}), root / f"{name}-00000-of-00001.parquet")
    return tables


@pytest.mark.parametrize("streaming", [True, False])
def test_a_local_copy_of_a_hub_dataset_reads_like_the_hub(tmp_path, monkeypatch, streaming):  # HF_HOME: conftest
    """The hub code path (load_dataset with an id, a config, a split and streaming) on a local dataset repo."""
    monkeypatch.chdir(tmp_path)
    tables = dataset_repo(tmp_path / "org" / "corpus")
    for config, split in (("small", "validation"), ("large", "train")):
        out = tmp_path / f"{config}-{split}-{streaming}"
        meta = prepare_quietly("org/corpus", out, config=config, split=split, streaming=streaming, val_fraction=0.3)
        assert meta["source"]["kind"] == "dataset_folder" and meta["source"]["config"] == config
        docs = meta["splits"]["train"]["documents"] + meta["splits"]["val"]["documents"]
        assert docs == tables[f"{config}/{split}"]
        assert bytes(load_shards(out).train[:5].astype(np.uint8)) == f"{config}/{split}".encode()[:5]
    with pytest.raises(DataError, match="datasets could not load the local dataset 'org/corpus' .*nope"):
        prepare_quietly("org/corpus", tmp_path / "x", config="nope")
