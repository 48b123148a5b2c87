"""Fixtures of the prepare tests: shard folders of the tiny text corpus, prepared once per session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from prepare_helpers import prepare_quietly

# datasets keeps lock files (and, for non-streamed datasets, Arrow files) under HF_HOME: never the real one here.
# Set before any test imports datasets, which reads it once.
os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="normtrain-tests-hf-"))

@pytest.fixture(scope="session")
def wordpiece_json(tmp_path_factory) -> Path:
    """A tokenizer.json that is not byte-level (WordPiece, whitespace pre-tokenizer, a </s> token)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    texts = [f"def function_{i}(x):\n    return x * {i} + {i % 7}  # line {i}\n" for i in range(300)]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[UNK]", "</s>"]))
    path = tmp_path_factory.mktemp("wordpiece") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


@pytest.fixture(scope="session")
def shard_dirs(text_corpus, wordpiece_json, tmp_path_factory) -> dict[str, Path]:
    """The tiny corpus prepared with bytes, a 320-token BPE and a WordPiece tokenizer.json."""
    root = tmp_path_factory.mktemp("shards")
    specs = {"bytes": {}, "bpe": {"tokenizer": "bpe", "vocab_size": 320},
             "file": {"tokenizer": str(wordpiece_json)}}
    for name, options in specs.items():
        prepare_quietly(text_corpus, root / name, val_fraction=0.1, **options)
    return {name: root / name for name in specs}
