"""Bytes are bytes: a byte corpus is its files' raw bytes, whatever their encoding or line ends."""

from __future__ import annotations

import pytest

from normtrain.data import load_corpus
from normtrain.data.documents import split_by_file
from normtrain.data.sources import local_text
from normtrain.data.tokenizer import SEPARATOR

# Every byte but NUL (the separator; a NUL in the first 8 KB would make the file "binary"), then text.
LATIN1 = bytes(range(1, 256)) * 40 + "café, naïve, Grüße\r\nsecond line\r\n".encode("latin-1")
UTF8 = "café, naïve, Grüße, 東京, 😀\r\nsecond line\n".encode() * 200
CP1252 = "“quotes” – dash € sign\r\n".encode("cp1252") * 100


def _load(path, tmp_path):
    return load_corpus("local_text", str(path), cache_dir=str(tmp_path / "cache"), progress=False)


@pytest.mark.parametrize("data", [LATIN1, UTF8], ids=["latin-1", "utf-8"])
def test_one_file_is_exactly_its_bytes(tmp_path, data):
    path = tmp_path / "one.txt"
    path.write_bytes(data)
    corpus = _load(path, tmp_path)
    assert corpus.describe()["split"] == "by_bytes"  # a single file: the tokens are the file, cut in two
    assert corpus.describe()["n_bytes"] == len(data) == path.stat().st_size
    assert corpus.train.tobytes() + corpus.val.tobytes() == data


def test_a_folder_of_mixed_encodings_is_its_files_bytes_joined(tmp_path):
    root = tmp_path / "mixed"
    root.mkdir()
    for i in range(30):
        (root / f"f{i:02d}.txt").write_bytes((LATIN1, UTF8, CP1252)[i % 3][: 2000 + i])
    corpus = _load(root, tmp_path)
    split = split_by_file(local_text(str(root)).files, 0.05)
    assert corpus.describe()["split"] == "by_file"
    sizes = sum(p.stat().st_size for p in root.iterdir())
    separators = len(split["train"]) - 1 + len(split["val"]) - 1
    assert corpus.describe()["n_bytes"] == sizes + separators
    for name in ("train", "val"):
        assert getattr(corpus, name).tobytes() == SEPARATOR.join(open(p, "rb").read() for p in split[name])


def test_a_build_shows_its_progress_in_bytes_and_a_cache_hit_nothing(tmp_path, capfd):
    """Outside a terminal (here) the progress is a plain line of normtrain.util.progress, not tqdm's frames."""
    path = tmp_path / "one.txt"
    path.write_bytes(UTF8)
    load_corpus("local_text", str(path), cache_dir=str(tmp_path / "cache"), progress=True)
    err = capfd.readouterr().err
    assert "normtrain: reading corpus: 0.0/0.0 MB (100%)" in err and "\r" not in err
    load_corpus("local_text", str(path), cache_dir=str(tmp_path / "other"), progress=False)
    load_corpus("local_text", str(path), cache_dir=str(tmp_path / "cache"), progress=True)
    assert capfd.readouterr() == ("", "")
