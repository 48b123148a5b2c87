"""Fixtures of the data tests: count the corpus builds."""

from __future__ import annotations

import pytest

import normtrain.data.corpus as corpus_module


@pytest.fixture
def builds(monkeypatch):
    """Counts the builds: each one reads the files once, through write_shards."""
    calls = []
    real = corpus_module.write_shards
    monkeypatch.setattr(corpus_module, "write_shards", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    return calls
