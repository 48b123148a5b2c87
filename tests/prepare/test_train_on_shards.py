"""data=tokens end to end: each tokenizer's shards train, the vocabulary comes from meta.json, val/bpb is per
byte of text, a resume refuses another vocabulary, and a corpus larger than the process's memory budget trains
with no more memory than a small one."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import normtrain
from normtrain.data import shards as shard_format
from normtrain.util.errors import CheckpointError, ConfigError

pytestmark = pytest.mark.slow


def metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("kind", ["bytes", "bpe", "file"])
def test_each_tokenizer_prepares_and_trains_50_steps(kind, shard_dirs, tiny, tmp_path):
    meta = json.loads((shard_dirs[kind] / "meta.json").read_text())
    cfg = normtrain.compose([*tiny, "data=tokens", f"data.path={shard_dirs[kind]}", "train.max_steps=50",
                             "train.eval_every=25", "optim.lr=3e-3"])
    summary = normtrain.train(cfg, run_dir=tmp_path)
    assert summary["status"] == "completed" and summary["steps"] == 50
    assert summary["vocab_size"] == meta["vocab_size"] == normtrain.build_model(cfg).cfg.vocab_size
    assert summary["corpus"]["tokenizer"]["kind"] == kind and summary["corpus"]["n_val_bytes"] == meta["splits"][
        "val"]["bytes"]
    vals = [r for r in metrics(tmp_path) if "val/loss" in r]
    assert vals[-1]["val/loss"] < vals[0]["val/loss"] - 0.5  # it learns
    val = meta["splits"]["val"]
    for row in vals:  # bits per byte of text: loss per token × tokens / bytes / ln 2
        assert row["val/bpb"] == pytest.approx(row["val/loss"] * val["tokens"] / val["bytes"] / math.log(2))
    assert summary["final_val_bpb"] == pytest.approx(vals[-1]["val/bpb"])


def test_byte_shards_train_exactly_as_the_byte_corpus(shard_dirs, text_corpus, tiny, tmp_path):
    """Same tokens, same seed: the same losses to the last bit, and val/bpb = val/loss / ln 2."""
    runs = {}
    for name, data in {"tokens": ["data=tokens", f"data.path={shard_dirs['bytes']}"],
                       "text": ["data=local_text", f"data.path={text_corpus}", "data.val_fraction=0.1"]}.items():
        normtrain.train(normtrain.compose([*tiny, *data, "train.max_steps=10"]), run_dir=tmp_path / name)
        runs[name] = [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in metrics(tmp_path / name)]
    assert runs["tokens"] == runs["text"]
    assert runs["tokens"][-1]["val/bpb"] == runs["tokens"][-1]["val/loss"] / math.log(2)


def test_a_resume_refuses_another_vocabulary(shard_dirs, tiny, tmp_path):
    base = [*tiny, "train.max_steps=4"]
    normtrain.train(normtrain.compose([*base, "data=tokens", f"data.path={shard_dirs['bytes']}"]), run_dir=tmp_path)
    other = normtrain.compose([*base, "train.max_steps=8", "data=tokens", f"data.path={shard_dirs['bpe']}",
                               "train.allow_changes=[data]"])
    with pytest.raises(CheckpointError, match=r"vocab_size: 256 → 320") as refused:
        normtrain.train(other, run_dir=tmp_path)
    assert "allow_changes=[KEY]" in str(refused.value)  # no key of the config could allow it
    padded = normtrain.compose([*base, "data=tokens", f"data.path={shard_dirs['bpe']}", "model.vocab_size=384"])
    assert normtrain.train(padded, run_dir=tmp_path / "padded")["vocab_size"] == 384
    with pytest.raises(ConfigError, match="model.vocab_size=300 is smaller than the corpus's vocabulary"):
        normtrain.train(normtrain.compose([*base, "data=tokens", f"data.path={shard_dirs['bpe']}",
                                           "model.vocab_size=300"]), run_dir=tmp_path / "cut")


def sparse_shards(folder, size):
    """Byte-token shards whose train.bin is ``size`` bytes but mostly a hole: real tokens every 64 MB, zeros
    between, so the test writes a few MB to disk while the process must still map the whole file."""
    folder.mkdir()
    real = np.frombuffer(b"def f(x):\n    return x + 1\n" * 2000, dtype=np.uint8).astype("<u2")
    blocks = range(0, size, 64 << 20)
    with open(folder / "train.bin", "wb") as f:
        f.truncate(size)
        for offset in blocks:
            f.seek(offset)
            f.write(real.tobytes())
    (folder / "val.bin").write_bytes(real.tobytes())
    counts = np.bincount(real, minlength=256) * len(blocks)
    counts[0] += size // 2 - len(real) * len(blocks)
    np.save(folder / "train_counts.npy", counts)
    n = {"train": size // 2, "val": len(real)}
    meta = {"format": shard_format.FORMAT, "inputs": "test", "source": {"kind": "test"}, "vocab_size": 256,
            "tokenizer": {"kind": "bytes", "name": "bytes", "vocab_size": 256, "eot": 0, "sha256": None},
            "dtype": "uint16", "splits": {s: {"tokens": t, "bytes": t, "documents": 1} for s, t in n.items()},
            "files": {name: shard_format.file_record(folder / name)
                      for name in ("train.bin", "val.bin", "train_counts.npy")}}
    (folder / "meta.json").write_text(json.dumps(meta))


TRAIN_UNDER_A_MEMORY_LIMIT = """
import json, resource, sys, threading
import numpy as np
shards, limit, run_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))  # the process's private memory: malloc, numpy, torch
try:
    np.fromfile(shards + "/train.bin", dtype="<u2")
    full_read = "fits"
except MemoryError:
    full_read = "refused"

def private_bytes():  # resident anonymous memory: what the process holds itself, not the file pages of a map
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("RssAnon"))

peak, done = [0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], private_bytes())
        done.wait(0.005)
sampler = threading.Thread(target=sample)
sampler.start()
import normtrain
overrides = json.loads(sys.argv[4]) + ["data=tokens", "data.path=" + shards, "train.max_steps=50"]
summary = normtrain.train(normtrain.compose(overrides), run_dir=run_dir)
done.set()
sampler.join()
print(json.dumps({"full_read": full_read, "status": summary["status"], "peak_private": max(peak[0], private_bytes())}))
"""


def train_under_a_memory_limit(folder, limit, run_dir, tiny) -> dict:
    proc = subprocess.run([sys.executable, "-c", TRAIN_UNDER_A_MEMORY_LIMIT, str(folder), str(limit), str(run_dir),
                           json.dumps(tiny)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_DATA and /proc are Linux's")
def test_a_corpus_larger_than_the_memory_budget_trains_and_memory_does_not_grow_with_it(tiny, tmp_path):
    """What data=tokens promises (normtrain/data/shards.py): shards are checked with plain reads and trained on
    through a memory map, never read into memory, so a corpus 8× larger costs the process no more memory. What
    is compared is the peak of the memory the process holds itself (resident anonymous pages, sampled while it
    trains), between the two corpora, not against a number: its size (the interpreter, torch, the model) depends
    on the machine's libraries. Total RSS is no measure of it: it also counts the file pages of the map that the
    kernel chose to map (a whole large folio per fault on recent kernels: tens of MB for 200 windows), which are
    page cache it can drop, and which grow with how spread out the windows read are, not with what we keep."""
    limit, small, large = 1 << 30, 192 << 20, 1536 << 20  # a 1 GB budget; shards of 192 MB and 1.5 GB
    peaks = {}
    for size in (small, large):
        sparse_shards(tmp_path / f"shards{size}", size)
        result = train_under_a_memory_limit(tmp_path / f"shards{size}", limit, tmp_path / f"run{size}", tiny)
        assert result["status"] == "completed", result
        peaks[size] = result["peak_private"]
    assert result["full_read"] == "refused"  # the large shard read into memory does not fit the budget...
    # ...and training on it holds what training on 1/8 of it does: a copy of even 1/20 of the 1.3 GB more would
    # show (two identical runs differ by about 1 MB)
    assert peaks[large] - peaks[small] < 32 << 20, peaks


def test_a_checkpoint_from_before_token_shards_still_resumes(tiny, tmp_path):
    """Its config lacks model.vocab_size and data.prepare, its record the vocabulary: neither is a change."""
    from normtrain.checkpoint import CKPT_NAME, load_checkpoint, save_checkpoint

    normtrain.train(normtrain.compose([*tiny, "train.max_steps=4"]), run_dir=tmp_path)
    state = load_checkpoint(tmp_path / CKPT_NAME)
    del state["config"]["model"]["vocab_size"], state["config"]["data"]["prepare"], state["vocab_size"]
    save_checkpoint(tmp_path, {k: v for k, v in state.items() if k not in ("digest", "rng")})
    summary = normtrain.train(normtrain.compose([*tiny, "train.max_steps=8"]), run_dir=tmp_path)
    assert summary["status"] == "completed" and summary["resumed_from_step"] == 4 and summary["steps"] == 8
