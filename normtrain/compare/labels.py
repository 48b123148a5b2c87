"""Short run labels from the config values that differ between runs, e.g. ``post · layernorm · L48``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from normtrain.compare.runs import Run
from normtrain.util.dotted import flatten, under
from normtrain.util.numbers import short_exponent

# Keys that say where or how verbosely a run wrote, never what it trained: left out of labels and tables.
IGNORED = ("logger", "data.cache_dir", "run_dir", "train.progress", "train.resume", "train.ckpt_every")
# Keys that lead a label, in this order; any other varied key follows in config order.
LEADING = ("placement.name", "norm.name", "model.n_layers")
# Keys shown by their value alone, or with a short prefix.
BARE = ("placement.name", "norm.name", "model.mlp", "model.pos", "data.name", "optim.schedule")
PREFIXED = {"model.n_layers": "L", "model.d_model": "d"}
SEP = " · "
SEED_KEYS = ("train.seed",)  # runs that differ only in these form one group (unless --by names them)
ALL_RUNS = "all runs"  # the group of runs that differ in their seed alone
MAX_SLUG, HASH_CHARS = 80, 8  # file names made of labels: grad_norm_heatmap_<slug>.png


class LabelError(ValueError):
    """A ``--by`` key that no run has."""


def varied_keys(configs: list[dict[str, Any]]) -> list[str]:
    """Dotted keys whose value differs between the configs (a key some configs lack counts as differing)."""
    if len(configs) < 2:
        return []
    order: dict[str, None] = {}
    for flat in configs:
        order.update(dict.fromkeys(flat))
    missing = object()
    varied = [k for k in order if not under(k, IGNORED) and len({repr(c.get(k, missing)) for c in configs}) > 1]
    return sorted(varied, key=lambda k: (LEADING.index(k) if k in LEADING else len(LEADING), list(order).index(k)))


def implied_keys(varied: list[str], configs: list[dict[str, Any]]) -> set[str]:
    """Varied keys that only follow a varied group choice, like ``norm.eps`` when every layernorm run has 1e-5
    and every rmsnorm run 1e-6 (each option's default): ``norm.name`` already tells them apart."""
    implied = set()
    for key in varied:
        choice = f"{key.split('.')[0]}.name"
        if key == choice or choice not in varied:
            continue
        value_of: dict[str, str] = {}
        if all(value_of.setdefault(repr(c.get(choice)), repr(c.get(key))) == repr(c.get(key)) for c in configs):
            implied.add(key)
    return implied


def resolve_keys(requested: Iterable[str], available: Iterable[str]) -> list[str]:
    """``--by`` keys as dotted config keys: ``norm`` -> ``norm.name``, ``n_layers`` -> ``model.n_layers``."""
    available = list(available)
    keys, unknown = [], []
    for key in (k.strip() for k in requested):
        if not key:
            continue
        matches = [key] if key in available else [k for k in available if k == f"{key}.name"]
        matches = matches or [k for k in available if k.endswith(f".{key}")]
        if len(matches) == 1:
            keys.append(matches[0])
        else:
            unknown.append(f"{key!r}" + (f" (ambiguous: {', '.join(matches)})" if matches else ""))
    if unknown:
        raise LabelError(f"--by: unknown config key {', '.join(unknown)}; keys are dotted, e.g. norm, placement, "
                         "model.n_layers, optim.lr, train.seed")
    return keys


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return short_exponent(f"{value:g}")
    if isinstance(value, tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return "—" if value is None else str(value)


def short_names(keys: list[str]) -> dict[str, str]:
    """The last part of each key (the group for ``<group>.name``), or the whole key where two keys would share
    a name (``optim.eps``, ``norm.eps``)."""
    last = [k.removesuffix(".name").rsplit(".", 1)[-1] for k in keys]
    return {k: (n if last.count(n) == 1 else k) for k, n in zip(keys, last, strict=True)}


def part(key: str, value: Any, short: str) -> str:
    if key in BARE or key.endswith(".name"):
        return format_value(value)
    if key in PREFIXED and isinstance(value, int):
        return f"{PREFIXED[key]}{value}"
    return f"{short}={format_value(value)}"


def label_runs(runs: list[Run], by: list[str] | None = None) -> list[str]:
    """Set ``run.label`` and ``run.group`` for every run; return the config keys for the table: the label's, then
    other varied ones.

    Labels are made of ``by`` (resolved) or else of every config value that differs between the runs, less
    those a varied group choice implies (``norm.eps`` follows ``norm.name``: each norm's own default, not a
    swept value); implied keys stay out of the table too. Runs whose labels would collide get, in parentheses,
    the other values that tell exactly those runs apart, then their folder name. A run's group is its label
    without the seed (with ``by``: exactly the ``by`` values), so the seeds of one configuration form one group.
    """
    flats = {id(r): flatten(r.config) for r in runs}
    configured = [flats[id(r)] for r in runs if r.config]
    varied = varied_keys(configured)
    implied = implied_keys(varied, configured)
    keys = resolve_keys(by, {k for flat in configured for k in flat}) if by else [k for k in varied if k not in implied]
    extra = [k for k in varied if k not in keys and k not in implied]
    parts = Parts(flats, short_names(list(dict.fromkeys([*keys, *varied]))))
    grouping = keys if by else [k for k in keys if k not in SEED_KEYS]
    for run in runs:
        run.label = parts.join(run, keys) or str(run.summary.get("name") or run.path.name)
        run.group = (parts.join(run, grouping) or (ALL_RUNS if len(runs) > 1 else "")) if run.config else ""
    _disambiguate(runs, lambda run, same: parts.join(run, parts.differing(extra, same)))
    _disambiguate(runs, lambda run, same: run.path.name)
    for run in runs:
        run.group = run.group or run.label  # a run without a config is a group of its own
    return [*keys, *extra]


@dataclass
class Parts:
    """The pieces of labels: each run's flattened config and each key's short name."""

    flats: dict[int, dict[str, Any]]  # by id(run)
    names: dict[str, str]

    def join(self, run: Run, keys: Iterable[str]) -> str:
        """``run``'s values of ``keys`` (those it has) as a label: ``post · layernorm · L48``; "" without a config."""
        flat = self.flats[id(run)] if run.config else {}
        return SEP.join(part(k, flat[k], self.names[k]) for k in keys if k in flat)

    def differing(self, keys: Iterable[str], runs: list[Run]) -> list[str]:
        """The ``keys`` whose value is not the same in all of ``runs``: what tells those runs apart."""
        missing = object()
        return [k for k in keys if len({repr(self.flats[id(r)].get(k, missing)) for r in runs}) > 1]


def _disambiguate(runs: list[Run], suffix: Callable[[Run, list[Run]], str]) -> None:
    """Runs that share a label get ``suffix(run, the runs sharing it)`` in parentheses."""
    seen: dict[str, list[Run]] = {}
    for run in runs:
        seen.setdefault(run.label, []).append(run)
    for same in seen.values():
        if len(same) > 1:
            for run in same:
                if extra := suffix(run, same):
                    run.label = f"{run.label} ({extra})"


def shortened(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, its middle left out: a title wider than its figure is cut off or
    squeezes the plot. Labels differ at their start (the leading keys) and end (the values that tell twins
    apart), so both stay; the table has every label in full."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head):]}"


def slug(label: str) -> str:
    """A file-name-safe form of a label: ``post · layernorm · L48`` -> ``post-layernorm-L48``.

    At most ``MAX_SLUG`` characters (ASCII, so bytes): a longer one is cut and ends in a short hash of the whole
    label, so that a file name stays far below the 255 bytes file systems allow, and two long labels that
    share a beginning still get different names.
    """
    s = re.sub(r"[^A-Za-z0-9_.=+]+", "-", label).strip("-").replace("=", "") or "run"
    if len(s) <= MAX_SLUG:
        return s
    digest = hashlib.sha1(label.encode("utf-8")).hexdigest()[:HASH_CHARS]
    return f"{s[:MAX_SLUG - HASH_CHARS - 1].rstrip('-')}-{digest}"


def unique_slugs(labels: list[str]) -> list[str]:
    out: list[str] = []
    for label in labels:
        base = s = slug(label)
        n = 2
        while s in out:
            s, n = f"{base}-{n}", n + 1
        out.append(s)
    return out
