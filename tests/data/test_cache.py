"""The token cache never serves damaged bytes, and a killed builder leaves nothing that lasts.

Damage (flipped bytes, a file cut short, an unreadable header or meta.json) is found on load, named
in a warning and rebuilt; builders killed with SIGKILL mid-write (a subprocess, tests/data/builder.py)
leave temporary files that the next load sweeps; concurrent builders both get a valid entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from normtrain.data import cache, load_corpus
from normtrain.util.atomic import temp_path

BUILDER = Path(__file__).with_name("builder.py")
ENTRY = ["meta.json", "train.bin", "train_counts.npy", "val.bin"]


def _load(text_corpus, cache_dir):
    return load_corpus("local_text", str(text_corpus), cache_dir=str(cache_dir), progress=False)


def _digests(corpus) -> dict[str, str]:
    return {name: hashlib.sha256(getattr(corpus, name).tobytes()).hexdigest() for name in ("train", "val")}


@pytest.fixture(scope="module")
def reference(text_corpus, tmp_path_factory) -> dict[str, str]:
    """The sha256 of each split of the tiny corpus, from a clean build in a cache of its own."""
    return _digests(_load(text_corpus, tmp_path_factory.mktemp("reference-cache")))


def _quiet_load(text_corpus, cache_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return _load(text_corpus, cache_dir)


def _flip_middle_of_val(folder: Path) -> None:
    path = folder / "val.bin"
    data = bytearray(path.read_bytes())
    middle = slice(len(data) // 2, len(data) // 2 + 16)
    data[middle] = bytes(255 - b for b in data[middle])
    path.write_bytes(bytes(data))


def _meta(folder: Path, text: str) -> None:
    (folder / "meta.json").write_text(text)


DAMAGE = {
    "flipped": (_flip_middle_of_val, r"val\.bin does not match its sha256"),
    "truncated": (lambda f: os.truncate(f / "train.bin", (f / "train.bin").stat().st_size // 2),
                  r"train\.bin has \d+ bytes, its record in meta\.json says"),
    "emptied": (lambda f: os.truncate(f / "val.bin", 0), r"val\.bin has 0 bytes"),
    "counts replaced": (lambda f: (f / "train_counts.npy").write_bytes(b"garbage" * 40), r"train_counts\.npy has 280"),
    "array gone": (lambda f: (f / "val.bin").unlink(), r"val\.bin is missing"),
    "meta not json": (lambda f: _meta(f, '{"files": {"tr'), r"meta\.json cannot be read"),
    "meta old format": (lambda f: _meta(f, '{"arrays": ["train", "val"]}'), r"meta\.json is not a normtrain-prepare"),
    "meta mangled": (lambda f: _meta(f, '{"format": 1, "files": ["train.bin"]}'), r"meta\.json does not describe"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_entry_is_named_in_a_warning_rebuilt_and_never_used(text_corpus, tmp_path, reference,
                                                                       builds, damage):
    folder = tmp_path / "cache" / "corpora" / _load(text_corpus, tmp_path / "cache").fingerprint
    damage_fn, says = DAMAGE[damage]
    damage_fn(folder)
    with pytest.warns(UserWarning, match=says) as caught:
        rebuilt = _load(text_corpus, tmp_path / "cache")
    assert str(folder) in str(caught[0].message) and "rebuilding" in str(caught[0].message)
    assert _digests(rebuilt) == reference and len(builds) == 2
    assert _digests(_quiet_load(text_corpus, tmp_path / "cache")) == reference and len(builds) == 2


def test_a_missing_meta_json_means_an_unfinished_entry_rebuilt_without_a_warning(text_corpus, tmp_path, reference,
                                                                                  builds):
    folder = tmp_path / "cache" / "corpora" / _load(text_corpus, tmp_path / "cache").fingerprint
    (folder / "meta.json").unlink()
    assert _digests(_quiet_load(text_corpus, tmp_path / "cache")) == reference and len(builds) == 2
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["dtype"] == "uint8" and len(meta["files"]["val.bin"]["sha256"]) == 64


def _run_builder(text_corpus, cache_dir, *flags) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(BUILDER), str(text_corpus), str(cache_dir), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("kill_in, left", [
    ("train.bin", []),  # half of train.bin's temp file written
    ("meta.json", ["train.bin", "train_counts.npy", "val.bin"]),  # the shards in place, meta.json's temp complete
])
def test_a_builder_killed_mid_write_leaves_nothing_the_next_load_keeps(text_corpus, tmp_path, reference,
                                                                       kill_in, left):
    killed = _run_builder(text_corpus, tmp_path / "cache", "--kill-in", kill_in)
    _, err = killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL, err
    (folder,) = (tmp_path / "cache" / "corpora").iterdir()
    names = sorted(os.listdir(folder))
    assert [n for n in names if not n.endswith(".tmp")] == left
    assert [n for n in names if n.endswith(".tmp")][0].startswith(f".{kill_in}.")

    corpus = _quiet_load(text_corpus, tmp_path / "cache")  # an unfinished build is not damage: no warning
    assert _digests(corpus) == reference
    assert sorted(os.listdir(folder)) == ENTRY  # the dead builder's temp file is gone


def test_only_temp_files_of_dead_builders_in_our_pid_namespace_are_swept(text_corpus, tmp_path, reference):
    folder = tmp_path / "cache" / "corpora" / _load(text_corpus, tmp_path / "cache").fingerprint
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = temp_path(folder / "train.npy", cache._tag(dead.pid))
    live = temp_path(folder / "train.npy", cache._tag(os.getpid()))  # a builder still writing: ours
    elsewhere = folder / f".val.npy.0badcafe.{dead.pid}.12345678.tmp"  # another host's: its pids mean nothing here
    unrelated = folder / ".notes.tmp"
    for path in (stale, live, elsewhere, unrelated):
        path.write_bytes(b"partial")
    assert _digests(_quiet_load(text_corpus, tmp_path / "cache")) == reference
    assert not stale.exists() and live.exists() and elsewhere.exists() and unrelated.exists()


def test_concurrent_builders_both_read_a_valid_entry(text_corpus, tmp_path, reference, builds):
    start = tmp_path / "start"
    # Each builder waits 0.1 s before every os.replace, so their writes interleave once both are off.
    builders = [_run_builder(text_corpus, tmp_path / "cache", "--slow-replace", "0.1", "--start", str(start))
                for _ in range(2)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("start.*.ready"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    start.touch()
    for builder in builders:
        out, err = builder.communicate(timeout=120)
        assert builder.returncode == 0, err  # the builder turns any warning into an error
        report = json.loads(out)
        assert {k: report[k] for k in reference} == reference
        assert not report["datasets_imported"]  # byte corpora never need datasets
    assert _digests(_quiet_load(text_corpus, tmp_path / "cache")) == reference and not builds
    (folder,) = (tmp_path / "cache" / "corpora").iterdir()
    assert sorted(os.listdir(folder)) == ENTRY


def test_cache_files_follow_the_umask(text_corpus, tmp_path):
    old = os.umask(0o027)
    try:
        folder = tmp_path / "cache" / "corpora" / _load(text_corpus, tmp_path / "cache").fingerprint
    finally:
        os.umask(old)
    assert {name: (folder / name).stat().st_mode & 0o777 for name in ENTRY} == dict.fromkeys(ENTRY, 0o640)
    assert folder.stat().st_mode & 0o777 == 0o750


def test_an_entry_in_the_layout_before_shards_is_rebuilt_with_one_line(text_corpus, tmp_path, reference, builds,
                                                                        capfd):
    """An entry as normtrain wrote it before the byte corpora were shards ({train,val}.npy and a meta.json of
    their checksums) sits under the same fingerprint: it is rebuilt in place, said in one line, not warned about."""
    folder = tmp_path / "cache" / "corpora" / _load(text_corpus, tmp_path / "cache").fingerprint
    for name in os.listdir(folder):
        (folder / name).unlink()
    for name in ("train", "val"):
        np.save(folder / f"{name}.npy", np.zeros(10, np.uint8))
    _meta(folder, json.dumps({"arrays": {"train": {"dtype": "uint8", "length": 10, "sha256": "0" * 64}}}))
    capfd.readouterr()
    corpus = _quiet_load(text_corpus, tmp_path / "cache")
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and str(folder) in err and "layout before shards" in err
    assert corpus.fingerprint == folder.name and _digests(corpus) == reference and len(builds) == 2
    assert sorted(os.listdir(folder)) == ENTRY
