"""Nested configs as flat ``{"model.n_layers": 6}`` dicts: how resume checks and compare's labels name keys."""

from __future__ import annotations

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
