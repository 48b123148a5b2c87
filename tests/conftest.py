"""Shared fixtures: tiny configs, a tiny local corpus, and a private cache so tests never touch ~/.cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Triton's CPU interpreter for the kernel tests (tests/ops): triton reads this when it is first imported,
# which importing torch._dynamo already does, so it must be set before any test module imports torch.
os.environ.setdefault("TRITON_INTERPRET", "1")
# Runs here must never reach the network or a login prompt.
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

TINY = [
    "model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.seq_len=32",
    "train.max_steps=20", "train.batch_size=4", "train.eval_every=10", "train.eval_batches=2",
    "monitor.every=5", "optim.warmup_steps=5", "logger=none", "train.progress=false",
]


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory) -> Path:
    """Tokenized corpora are cached once per test session, in a temp folder."""
    cache = tmp_path_factory.mktemp("normtrain-cache")
    os.environ["NORMTRAIN_CACHE"] = str(cache)
    return cache


@pytest.fixture(scope="session")
def text_corpus(tmp_path_factory) -> Path:
    """A small folder of text files (about 60 KB) for fast end-to-end runs."""
    root = tmp_path_factory.mktemp("corpus")
    for i in range(40):
        lines = [f"def function_{i}_{j}(x):\n    return x * {j} + {i}  # line {j}\n" for j in range(40)]
        (root / f"file_{i:02d}.py").write_text("".join(lines))
    return root


@pytest.fixture
def tiny_base() -> list[str]:
    """Overrides that shrink the default model and run (the corpus stays the default)."""
    return list(TINY)


@pytest.fixture
def tiny(text_corpus) -> list[str]:
    """Overrides that shrink the default config to a run of a few seconds on the tiny corpus."""
    return [*TINY, "data=local_text", f"data.path={text_corpus}"]


def toy_encoding() -> dict:
    """A tiktoken encoding built in memory: the byte alphabet, two merges and an end-of-text token."""
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"re": 256, b"return": 257})
    return {"name": "toy", "pat_str": r"\w+|\s+|[^\w\s]+", "mergeable_ranks": ranks,
            "special_tokens": {"<|endoftext|>": 258}}


@pytest.fixture
def toy_tiktoken(monkeypatch):
    """``tiktoken:toy`` registered the way a tiktoken plugin registers an encoding (no files, no network)."""
    pytest.importorskip("tiktoken")
    from tiktoken import list_encoding_names, registry

    list_encoding_names()  # fills the registry
    monkeypatch.setitem(registry.ENCODING_CONSTRUCTORS, "toy", toy_encoding)
    monkeypatch.setattr(registry, "ENCODINGS", {})
