"""Fixtures of the data tests: count the corpus builds."""

from __future__ import annotations

import pytest

import normtrain.data.corpus as corpus_module


@pytest.fixture
def builds(monkeypatch):
    """Counts the builds: each one reads the files once, through encode_splits."""
    calls = []
    real = corpus_module.encode_splits
    monkeypatch.setattr(corpus_module, "encode_splits", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    return calls
