"""load_corpus: the tokens, the split, the fingerprint, the on-disk cache and the stdlib corpus end to end."""

import hashlib
import json
import time

import numpy as np
import pytest

import normtrain.data.corpus as corpus_module
from normtrain.data import CORPORA, load_corpus
from normtrain.data.documents import split_by_file
from normtrain.data.sources import local_text
from normtrain.data.tokenizer import SEPARATOR
from normtrain.util.errors import DataError


def _tree(root, n_files=40):
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n_files):
        (root / f"f{i:03d}.txt").write_text(f"file {i}\n" + "abc " * (i % 7 + 1))
    return root


def _load(path, tmp_path, **kw):
    return load_corpus("local_text", str(path), cache_dir=str(tmp_path / "cache"), progress=False, **kw)


def _in_val(rel: str, val_fraction: float) -> bool:
    """The split rule written out again, not imported: blake2b-64 of the relative path below the fraction."""
    return int.from_bytes(hashlib.blake2b(rel.encode(), digest_size=8).digest(), "big") < val_fraction * 2**64


def test_tokens_are_the_files_read_directly_and_joined_by_nul(tmp_path):
    """What a run trains on, built here without the library: every file under the folder (nested, odd bytes and
    line ends included), in the order of its relative path, each split's files joined by one NUL; uint8."""
    root = _tree(tmp_path / "c", 30)
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "x.txt").write_bytes(b"caf\xe9\r\nsecond\rline")
    (root / "sub" / "deep" / "y.md").write_bytes("東京 😀\n".encode() * 50)
    corpus = _load(root, tmp_path, val_fraction=0.2)
    rels = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    expected = {split: b"\0".join((root / rel).read_bytes() for rel in rels if _in_val(rel, 0.2) == (split == "val"))
                for split in ("train", "val")}
    assert expected["train"] and expected["val"]
    assert (corpus.describe()["split"], corpus.describe()["n_files"]) == ("by_file", 32)
    assert corpus.train.dtype == corpus.val.dtype == np.uint8
    assert corpus.train.tobytes() == expected["train"] and corpus.val.tobytes() == expected["val"]
    train = np.frombuffer(expected["train"], dtype=np.uint8)
    np.testing.assert_array_equal(corpus.counts, np.bincount(train, minlength=256))  # the unigram's counts


@pytest.mark.parametrize("sizes", [(500, 500), (950, 49), (949, 50)], ids=["inside", "before_nul", "after_nul"])
def test_too_few_files_to_split_by_file_cut_the_joined_bytes(tmp_path, sizes):
    """Both names hash into train: the last val_fraction of the files joined by NUL is val, also when the cut
    lands right before or after the separator."""
    root = tmp_path / "c"
    root.mkdir()
    for name, size in zip(("a.txt", "b.txt"), sizes, strict=True):
        (root / name).write_bytes(bytes(65 + i % 26 for i in range(size)))
    assert not _in_val("a.txt", 0.05) and not _in_val("b.txt", 0.05)
    corpus = _load(root, tmp_path, val_fraction=0.05)
    joined = (root / "a.txt").read_bytes() + b"\0" + (root / "b.txt").read_bytes()
    cut = len(joined) - max(1, round(len(joined) * 0.05))
    assert corpus.describe()["split"] == "by_bytes"
    assert corpus.train.tobytes() == joined[:cut] and corpus.val.tobytes() == joined[cut:]


def test_split_by_file_puts_each_file_in_exactly_one_split(tmp_path):
    corpus = _load(_tree(tmp_path / "c"), tmp_path, val_fraction=0.2)
    files = local_text(str(tmp_path / "c")).files
    split = split_by_file(files, 0.2)
    assert (corpus.describe()["split"], corpus.describe()["n_files"]) == ("by_file", 40)
    assert not set(split["train"]) & set(split["val"])
    assert sorted(split["train"] + split["val"]) == sorted(p for _, p in files)
    # The tokens are exactly each split's files, in path order, joined by the separator.
    for name in ("train", "val"):
        expected = SEPARATOR.join(open(p, "rb").read() for p in split[name])
        assert getattr(corpus, name).tobytes() == expected
    assert corpus.describe()["n_bytes"] == len(corpus.train) + len(corpus.val)


def test_split_is_stable_and_grows_monotonically_with_val_fraction(tmp_path):
    files = local_text(str(_tree(tmp_path / "c", 200))).files
    small, large = split_by_file(files, 0.05), split_by_file(files, 0.3)
    assert split_by_file(files, 0.05) == small
    assert set(small["val"]) < set(large["val"])
    assert 0.15 < len(large["val"]) / 200 < 0.45


def test_fingerprint_is_stable_and_follows_the_content(tmp_path, builds):
    root = _tree(tmp_path / "c")
    first, second = _load(root, tmp_path), _load(root, tmp_path)
    assert first.fingerprint == second.fingerprint and len(builds) == 1
    (root / "f005.txt").write_text((root / "f005.txt").read_text().replace("file", "FILE"))  # same size
    changed = _load(root, tmp_path)
    assert changed.fingerprint != first.fingerprint and len(builds) == 2
    assert _load(root, tmp_path, val_fraction=0.1).fingerprint != changed.fingerprint


def test_second_load_reads_the_cache_without_reading_the_files_again(tmp_path, monkeypatch, capfd, builds):
    root = _tree(tmp_path / "c")
    first = _load(root, tmp_path)
    assert len(builds) == 1
    monkeypatch.setattr(corpus_module, "write_shards", lambda *a, **kw: pytest.fail("tokenized on a cache hit"))
    capfd.readouterr()
    again = load_corpus("local_text", str(root), cache_dir=str(tmp_path / "cache"))  # progress on, yet quiet
    assert capfd.readouterr() == ("", "")
    assert np.array_equal(again.train, first.train) and np.array_equal(again.val, first.val)
    assert again.describe() == first.describe()
    corpora = tmp_path / "cache" / "corpora"
    assert [p.name for p in corpora.iterdir()] == [first.fingerprint]  # no scratch beside the entry
    entry = sorted(p.name for p in (corpora / first.fingerprint).iterdir())
    assert entry == ["meta.json", "train.bin", "train_counts.npy", "val.bin"]


def test_cache_dir_defaults_to_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NORMTRAIN_CACHE", str(tmp_path / "env-cache"))
    corpus = load_corpus("local_text", str(_tree(tmp_path / "c", 30)), progress=False)
    assert (tmp_path / "env-cache" / "corpora" / corpus.fingerprint / "meta.json").exists()


def test_single_file_falls_back_to_splitting_bytes(tmp_path):
    path = tmp_path / "one.txt"
    path.write_bytes(b"0123456789" * 100)
    corpus = _load(path, tmp_path, val_fraction=0.1)
    assert (corpus.describe()["split"], corpus.describe()["n_files"]) == ("by_bytes", 1)
    assert corpus.describe()["split"] == "by_bytes"
    assert corpus.val.tobytes() == path.read_bytes()[-100:]
    assert corpus.train.tobytes() + corpus.val.tobytes() == path.read_bytes()


def test_odd_bytes_and_newlines_are_kept_as_bytes(tmp_path):
    # This once asserted "caf\ufffd\nline two\nend": files went through UTF-8 decoding with replacement
    # and text-mode newlines. Byte-level tokens are now the file's raw bytes (FORMAT_VERSION 2).
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf\xe9\r\nline two\rend")
    corpus = _load(path, tmp_path)
    assert (corpus.train.tobytes() + corpus.val.tobytes()) == b"caf\xe9\r\nline two\rend"


def test_describe_is_json(tmp_path):
    corpus = _load(_tree(tmp_path / "c"), tmp_path)
    info = json.loads(json.dumps(corpus.describe()))
    assert set(info) == {"name", "root", "n_files", "n_bytes", "n_train_bytes", "n_val_bytes",
                         "fingerprint", "split"}
    assert info["n_train_bytes"] + info["n_val_bytes"] == info["n_bytes"] and corpus.vocab_size == 256


@pytest.mark.parametrize("name, path, val_fraction, says", [
    ("wikitext", None, 0.05, "python_stdlib, local_text"),
    ("local_text", None, 0.05, "needs data.path"),
    ("python_stdlib", "somewhere", 0.05, "takes no path"),
    ("python_stdlib", None, 1.0, "val_fraction"),
])
def test_bad_arguments_are_data_errors(tmp_path, name, path, val_fraction, says):
    with pytest.raises(DataError, match=says):
        load_corpus(name, path, val_fraction=val_fraction, cache_dir=str(tmp_path), progress=False)
    assert CORPORA == ("python_stdlib", "local_text", "tokens")


def test_python_stdlib_end_to_end(tmp_path, monkeypatch):
    t0 = time.perf_counter()
    first = load_corpus("python_stdlib", cache_dir=str(tmp_path), progress=False)
    t1 = time.perf_counter()
    # the second load reads the cache: encoding again would fail the test (a timing comparison was flaky on 2 cores)
    monkeypatch.setattr(corpus_module, "write_shards", lambda *a, **kw: pytest.fail("tokenized on a cache hit"))
    cached = load_corpus("python_stdlib", cache_dir=str(tmp_path), progress=False)
    t2 = time.perf_counter()
    print(f"\nstdlib: {first.describe()}\nfirst load {t1 - t0:.2f}s, cached load {t2 - t1:.3f}s")
    assert first.describe()["split"] == "by_file" and first.describe()["n_bytes"] > 1_000_000
    assert len(first.val) > 10_000
    assert first.train.dtype == np.uint8 and cached.fingerprint == first.fingerprint
    assert np.array_equal(cached.val, first.val) and len(cached.train) == len(first.train)
