"""Nested configs as flat ``{"model.n_layers": 6}`` dicts: how resume checks and compare's labels name keys."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def flatten(config: dict[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """``{"model": {"n_layers": 6}}`` -> ``{"model.n_layers": 6}``; lists become tuples (hashable)."""
    flat: dict[str, Any] = {}
    for key, value in (config or {}).items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = tuple(value) if isinstance(value, list) else value
    return flat


def under(key: str, prefixes: Iterable[str]) -> bool:
    """``key`` is one of ``prefixes`` or inside one of them (``optim.lr`` is under ``optim``)."""
    return any(key == p or key.startswith(f"{p}.") for p in prefixes)
