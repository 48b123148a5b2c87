"""Token shards: the writer's layout (separators, dtype, counts) and what loading them checks."""

import io

import numpy as np
import pytest

from normtrain.data import shards
from normtrain.data.encode import ShardWriter
from normtrain.data.shards import token_dtype
from normtrain.util.errors import DataError


def test_the_writer_puts_separators_between_documents_only():
    f = io.BytesIO()
    writer = ShardWriter(f, vocab_size=10, eot=9, count=True)
    writer.add(np.array([1, 2]), 5, starts_doc=True)
    writer.add(np.array([3]), 2, starts_doc=False)  # the same document, continued
    writer.add(np.array([4, 5]), 3, starts_doc=True)
    writer.add(np.array([], dtype=np.int64), 0, starts_doc=True)  # an empty document still gets its separator
    assert writer.close() == {"tokens": 7, "bytes": 12, "documents": 3}
    tokens = np.frombuffer(f.getvalue(), dtype="<u2")
    assert tokens.tolist() == [1, 2, 3, 9, 4, 5, 9]
    assert writer.counts.tolist() == np.bincount(tokens, minlength=10).tolist()


def test_counts_and_tokens_hold_across_flushes(monkeypatch):
    """The train counts (the unigram baseline's) are kept block by block: many blocks, the last one short."""
    monkeypatch.setattr("normtrain.data.encode.FLUSH_TOKENS", 997)
    tokens = np.random.default_rng(0).integers(0, 300, 10_001)
    f = io.BytesIO()
    writer = ShardWriter(f, vocab_size=300, eot=0, count=True)
    for piece in np.array_split(tokens, 7):
        writer.add(piece, len(piece), starts_doc=False)
    writer.close()
    assert writer.counts.dtype == np.int64 and writer.counts.sum() == len(tokens)
    np.testing.assert_array_equal(writer.counts, np.bincount(tokens, minlength=300))
    np.testing.assert_array_equal(np.frombuffer(f.getvalue(), dtype="<u2"), tokens)


def test_large_vocabularies_take_uint32_and_ids_are_checked():
    assert token_dtype(65536) == np.dtype("<u2") and token_dtype(65537) == np.dtype("<u4")
    f = io.BytesIO()
    writer = ShardWriter(f, vocab_size=100_000, eot=99_999, count=False)
    writer.add(np.array([70_000, 5]), 8, starts_doc=True)
    writer.close()
    assert np.frombuffer(f.getvalue(), dtype="<u4").tolist() == [70_000, 5]
    bad = ShardWriter(io.BytesIO(), vocab_size=100, eot=0, count=False)
    bad.add(np.array([100]), 1, starts_doc=True)
    with pytest.raises(DataError, match="outside \\[0, 100\\)"):
        bad.close()


def test_a_folder_that_is_not_a_shard_folder(tmp_path):
    with pytest.raises(DataError, match="needs data.path"):
        shards.load_shards(None)
    (tmp_path / "meta.json").write_text('{"format": 99}')
    with pytest.raises(DataError, match="not a normtrain-prepare record of format 1"):
        shards.load_shards(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(DataError, match="cannot be read"):
        shards.read_meta(tmp_path)
