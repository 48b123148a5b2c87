"""What a misspelt name on the command line probably meant: a key no schema defines (``model.n_layer``), or an
option no config group holds (``norm=groupnorm``). One sentence each, with the suggestion and what is allowed, so
that Hydra's own answers never reach the user alone: for a misspelt key it suggests ``+model.n_layer=3``, which
would add the key and train the default depth; for an unknown option it lists the group's options after its
config search path, with no suggestion."""

from __future__ import annotations

import difflib
from typing import Any

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


def unknown_option_problem(group: str, option: str, options: list[str]) -> str:
    """``norm=groupnorm is not an option of norm; did you mean layernorm? allowed, closest first: ...``: the
    options of a config group (a folder of YAML files) ordered by how close each is to the one asked for."""
    ranked = closest_first(option, options)
    close = difflib.get_close_matches(option, options, n=1, cutoff=0.6)
    hint = f"did you mean {group}={close[0]}? " if close else ""
    return f"{group}={option} is not an option of {group}; {hint}allowed, closest first: {', '.join(ranked)}"


def closest_first(word: str, options: list[str]) -> list[str]:
    """``options`` from the most to the least similar to ``word`` (difflib's ratio; ties alphabetically)."""
    def distance(option: str) -> tuple[float, str]:
        return -difflib.SequenceMatcher(None, word, option).ratio(), option

    return sorted(options, key=distance)


def composition_problem(err: BaseException) -> str | None:
    """normtrain's sentence for what Hydra stopped at while composing (``err`` or its causes): an unknown group
    option, or a key no schema defines; None for anything else (bad syntax, a wrong type: Hydra's message says it
    well enough)."""
    from hydra.errors import MissingConfigException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, MissingConfigException) and err.options and err.missing_cfg_file:
            group, _, option = str(err.missing_cfg_file).rpartition("/")
            return unknown_option_problem(group, option, list(err.options)) if group else None
        if isinstance(err, (ConfigAttributeError, ConfigKeyError)) and err.full_key:
            return unknown_key_problem(str(err.full_key))
        err = err.__cause__ or err.__context__
    return None


def override_problems(overrides: list[str], groups: dict[str, list[str]]) -> list[str]:
    """Every misspelt key and unknown group option among command-line ``overrides`` at once (Hydra stops at the
    first); ``groups``: each config group's options. Keys forced in with ``+`` are ``validate``'s to refuse;
    ``hydra.*`` and its groups are Hydra's."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return []  # bad syntax: Hydra's message names it
    problems = []
    for o in parsed:
        key = o.key_or_group
        if o.is_add() or o.is_force_add() or o.is_delete() or key.split("/")[0].split(".")[0] == "hydra":
            continue
        if key in groups:
            problems += [unknown_option_problem(key, v, groups[key]) for v in _values(o) if v not in groups[key]]
        elif problem := unknown_key_problem(key):
            problems.append(problem)
    return problems


def _values(override: Any) -> list[str]:
    """The option(s) a group override picks: one, a list (``logger=[wandb,csv]``) or a sweep's."""
    if override.is_sweep_override():
        return [str(v) for v in override.sweep_string_iterator()] if override.is_discrete_sweep() else []
    value = override.value()
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]
