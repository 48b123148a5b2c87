"""What a misspelt key probably meant: a key no schema defines (``model.n_layer``), in one sentence with the
suggestion and what is allowed."""

from __future__ import annotations

import difflib

from normtrain.config.schema import GROUP_SCHEMAS, schema_keys


def unknown_key_problem(dotted: str) -> str | None:
    """``model.n_layer is not a key of model; did you mean model.n_layers? allowed: ...`` for a key no schema
    defines (a misplaced one, ``model.lr``, is pointed to ``optim.lr``); None for a known key or one outside
    the typed groups (``hydra.*``)."""
    group, _, key = dotted.rpartition(".")
    if group and group not in GROUP_SCHEMAS:
        return None
    allowed = schema_keys(GROUP_SCHEMAS[group]) if group else list(GROUP_SCHEMAS)
    if key in allowed or dotted == "hydra":
        return None
    prefix = f"{group}." if group else ""
    close = [f"{g}.{key}" for g, schema in GROUP_SCHEMAS.items() if key in schema_keys(schema)]  # misplaced
    close = close or [f"{prefix}{k}" for k in difflib.get_close_matches(key, allowed, n=1)]  # misspelt
    close = close or [f"{g}.{k}" for g, schema in GROUP_SCHEMAS.items()  # both
                      for k in difflib.get_close_matches(key, schema_keys(schema), n=1)][:3]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return f"{dotted} is not a key of {group or 'the config'}; {hint}allowed: {', '.join(allowed)}"
