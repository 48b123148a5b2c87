"""Sources of normtrain-prepare as document pieces: what is read, how it is split, and how it is cut."""

import os

import pytest

import normtrain.data.pieces as pieces_of
from normtrain.data.documents import open_documents
from normtrain.util.errors import DataError


def test_long_documents_stream_in_pieces_cut_after_a_newline(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces_of, "PIECE_BYTES", 64)
    text = ("α line of text\n" * 40 + "no newline for a long while " * 9 + "é" * 50).encode()
    (tmp_path / "one.txt").write_bytes(text)
    pieces = list(pieces_of.file_pieces(str(tmp_path / "one.txt"), "train"))
    assert b"".join(p.data for p in pieces) == text and len(pieces) > 10
    assert [p.starts_doc for p in pieces] == [True] + [False] * (len(pieces) - 1)
    for p in pieces[:-1]:
        p.data.decode("utf-8")  # never cut inside a character
    assert all(p.data.endswith(b"\n") for p in pieces[:5])
    in_memory = list(pieces_of.memory_pieces(text, "val"))
    assert b"".join(p.data for p in in_memory) == text and len(in_memory) > 10


def test_rows_split_by_a_hash_of_their_text():
    rows = [{"text": f"document {i}"} for i in range(400)] + [{"text": "document 7"}, {"text": ""}, {"text": None}]
    pieces = list(pieces_of.row_pieces(rows, "text", "rows", 0.2))
    val = [p.data for p in pieces if p.split == "val"]
    assert len(pieces) == 401 and 40 < len(val) < 130  # empty and missing texts are no documents
    assert len({p.split for p in pieces if p.data == b"document 7"}) == 1  # a duplicate stays on its side
    with pytest.raises(DataError, match="'body' is not a column of rows; its columns: text"):
        list(pieces_of.row_pieces(rows, "body", "rows", 0.2))


def test_sources_resolve_or_fail_with_what_to_give(tmp_path):
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "README.md").write_text("# data")
    (tmp_path / "mixed" / "part.parquet").write_bytes(b"PAR1")
    with pytest.raises(DataError, match=r"mixes files of several kinds \(parquet, text\).*\*\*/\*\.parquet"):
        open_documents(str(tmp_path / "mixed"), 0.05)
    with pytest.raises(DataError, match="glob that matches no file"):
        open_documents(str(tmp_path / "*.nothing"), 0.05)
    with pytest.raises(DataError, match="not a file, folder or glob here, nor a hub dataset id"):
        open_documents(str(tmp_path / "no such file.txt"), 0.05)
    stdlib = open_documents("python_stdlib", 0.05)
    assert stdlib.record["kind"] == "python_stdlib" and stdlib.record["split"] == "by_file"
    assert stdlib.total_bytes == sum(os.path.getsize(path) for _, path in stdlib.files) > 1_000_000
