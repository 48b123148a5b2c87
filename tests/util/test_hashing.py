"""One block reader behind three hashes whose values old caches and checkpoints are keyed by: the corpus cache's
fingerprint, a shard's sha256 and a checkpoint file's CRC-32. The values are pinned (computed before the readers
were folded into normtrain.util.hashing) and must not change with the block size."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from normtrain.checkpoint.sharded import file_crc
from normtrain.data import cache, shards
from normtrain.util import hashing

TEXT, BYTES = b"hello world\n" * 1000, bytes(range(256)) * 400
PINNED = {"fingerprint": "b713d233c9aae6bd5c1c49c42eb72a20", "crc": (2854719547, 2584611980),
          "sha256": "27783e87963a4efb6829b531c9ba57b44f45797f6770bd637fbf0d807cbdbae0"}


@pytest.mark.parametrize("block", [hashing.BLOCK, 4096, 7])  # one block, many, and a size that divides nothing
def test_hashes_keep_their_values_whatever_the_block(tmp_path, monkeypatch, block):
    monkeypatch.setattr(hashing, "BLOCK", block)
    (tmp_path / "a.txt").write_bytes(TEXT)
    (tmp_path / "big.bin").write_bytes(BYTES)
    files = [("a.txt", str(tmp_path / "a.txt")), ("sub/big.bin", str(tmp_path / "big.bin"))]

    assert cache.fingerprint(files, {"x": 1}) == PINNED["fingerprint"]
    assert (file_crc(tmp_path / "a.txt"), file_crc(tmp_path / "big.bin")) == PINNED["crc"]
    assert shards.file_record(tmp_path / "big.bin") == {"size": len(BYTES), "sha256": PINNED["sha256"]}
    assert PINNED["crc"] == (zlib.crc32(TEXT), zlib.crc32(BYTES))  # the pins are the plain whole-file values
    assert PINNED["sha256"] == hashlib.sha256(BYTES).hexdigest()


def test_the_buffer_is_no_larger_than_what_is_left_of_the_file(tmp_path):
    """A small file gets a small buffer (671 source files once cost 0.3 s of 16 MiB allocations); the bytes read are
    the same from a file part read, an empty one, and a stream that is no file."""
    import io

    (tmp_path / "small").write_bytes(TEXT)
    (tmp_path / "empty").write_bytes(b"")
    with open(tmp_path / "small", "rb") as f:
        first = next(hashing.blocks(f))
        assert len(first) == len(TEXT) and first.obj.__len__() == len(TEXT) + 1  # not 16 MiB
    with open(tmp_path / "small", "rb") as f:
        f.seek(100)
        assert b"".join(bytes(b) for b in hashing.blocks(f)) == TEXT[100:]
    with open(tmp_path / "empty", "rb") as f:
        assert list(hashing.blocks(f)) == []
    stream = io.BytesIO(BYTES)
    assert hashing.feed(hashlib.sha256(), stream).hexdigest() == PINNED["sha256"]
