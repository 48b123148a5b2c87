"""The table: its columns, their formatting, and its Markdown, CSV and terminal forms (the HTML one is in page.py).

Rows are sorted by the chosen metric, best first: completed runs, then runs that stopped early
(incomplete, interrupted), then diverged runs (the longest-lived first), then failed ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normtrain.compare.labels import format_value, short_names
from normtrain.compare.runs import Run, natural_key
from normtrain.util.atomic import write_csv as write_csv_file
from normtrain.util.dotted import flatten
from normtrain.util.markdown import table
from normtrain.util.numbers import number

STATUS_RANK = {"completed": 0, "diverged": 2, "failed": 3}  # anything else (running, incomplete, interrupted): 1

# --metric name -> (what it reads, higher is better, what it is)
SUMMARY_METRICS: dict[str, tuple[Callable[[Run], Any], bool, str]] = {
    "val/loss": (lambda r: r.summary.get("final_val_loss"), False, "final validation loss"),
    "val/best_loss": (lambda r: r.summary.get("best_val_loss"), False, "best validation loss"),
    "val/bpb": (lambda r: r.summary.get("final_val_bpb"), False, "final validation bits per byte"),
    "tokens_per_s": (Run.tokens_per_s, True, "median tokens/s"),
    "wall_time_s": (lambda r: r.summary.get("wall_time_s"), False, "wall time"),
}
ALIASES = {"final_val_loss": "val/loss", "best_val_loss": "val/best_loss", "final_val_bpb": "val/bpb",
           "bpb": "val/bpb", "loss": "val/loss"}


@dataclass
class Column:
    key: str  # CSV header
    title: str  # Markdown / HTML header
    value: Callable[[Run], Any]
    decimals: int | None = None  # floats through normtrain.util.numbers with these decimals; None: as labels show them


class MetricError(ValueError):
    """A ``--metric`` that no run recorded."""


def metric(name: str, runs: Sequence[Run]) -> tuple[Callable[[Run], float | None], bool, str]:
    """(value of a run, higher is better, description) for ``--metric``: a summary metric above, or any
    ``metrics.jsonl`` key (its last finite value, lower is better)."""
    name = ALIASES.get(name, name)
    if name in SUMMARY_METRICS:
        read, higher, what = SUMMARY_METRICS[name]
        return (lambda r: _num(read(r))), higher, f"{name} ({what})"
    if any(name in r.keys() for r in runs):
        return (lambda r: r.last(name)), False, f"{name} (last finite value logged)"
    known = sorted(set(SUMMARY_METRICS) | {k for r in runs for k in r.keys() if "/layer_" not in k} - {"step"})
    raise MetricError(f"--metric {name!r} is not recorded by any run; choose from: {', '.join(known)}")


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def sort_runs(runs: Sequence[Run], value: Callable[[Run], float | None], higher: bool) -> list[Run]:
    def key(run: Run):
        rank = STATUS_RANK.get(run.status, 1)
        if rank == 2:  # diverged: the one that lasted longest first
            lasted = run.diverged_at if run.diverged_at is not None else run.summary.get("steps") or 0
            return rank, 0, -lasted, natural_key(run.label)
        v = value(run)
        return rank, v is None, 0 if v is None else (-v if higher else v), natural_key(run.label)

    return sorted(runs, key=key)


# summary keys that only some runs record (issue 11's collapse check, issue 12's spike score): a column when present
OPTIONAL: tuple[tuple[str, str, int | None], ...] = (
    ("collapsed", "collapsed", None),
    ("undertrained", "undertrained", None),
    ("unigram_val_loss", "unigram loss", 4),
    ("spike_score", "spike score", 3),
)


def columns(keys: Sequence[str], runs: Sequence[Run] = ()) -> list[Column]:
    """The run label, the config ``keys``, the results; and each optional summary value any of ``runs`` has."""
    names = short_names(list(keys))
    config_cols = [Column(k, names[k], lambda r, k=k: flatten(r.config).get(k)) for k in keys]
    summary = lambda key: (lambda r: r.summary.get(key))
    return [
        Column("label", "run", lambda r: r.label),
        *config_cols,
        Column("status", "status", lambda r: r.status),
        Column("diverged_at_step", "diverged at", summary("diverged_at_step")),
        Column("steps", "steps", summary("steps")),
        Column("final_val_loss", "final val loss", summary("final_val_loss"), 4),
        Column("best_val_loss", "best val loss", summary("best_val_loss"), 4),
        Column("final_val_bpb", "val bpb", summary("final_val_bpb"), 3),
        Column("tokens_per_s", "tokens/s", Run.tokens_per_s, 0),
        Column("wall_time_s", "wall time (s)", summary("wall_time_s"), 1),
        Column("n_params", "params", summary("n_params")),
        *[Column(key, title, summary(key), decimals) for key, title, decimals in OPTIONAL
          if any(key in r.summary for r in runs)],
    ]


def cell(value: Any, decimals: int | None) -> str:
    """A table cell: a result as every normtrain table shows numbers (normtrain.util.numbers), a config value as its
    label shows it."""
    if isinstance(value, float) and decimals is not None:
        return number(value, decimals, missing="—")
    return format_value(value)


def markdown(runs: Sequence[Run], cols: Sequence[Column]) -> str:
    """A Markdown table padded so that it also reads as a plain table in a terminal."""
    numeric = [i > 0 and all(is_number(c.value(r)) or c.value(r) is None for r in runs) for i, c in enumerate(cols)]
    return table([c.title for c in cols], [[cell(c.value(r), c.decimals) for c in cols] for r in runs], numeric) + "\n"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def shown_path(path: Path, root: Path | None = None) -> str:
    """A run folder as the user would type it: relative to the working directory when it is below it, as named
    (through a symlink) or as resolved. With ``root`` (a page to be committed), a folder below it is named from
    root's own name on, so no machine's absolute path lands in the page."""
    if root is not None and Path(path).resolve().is_relative_to(Path(root).resolve()):
        return str(Path(Path(root).name) / Path(path).resolve().relative_to(Path(root).resolve()))
    for named, cwd in ((path, Path.cwd()), (path.resolve(), Path.cwd().resolve())):
        if named.is_relative_to(cwd):
            return str(named.relative_to(cwd))
    return str(path)


def write_csv(runs: Sequence[Run], cols: Sequence[Column], path: Path) -> None:
    """Full-precision values, empty cells for missing ones, and each run's folder."""
    cells = [[format_value(v) if isinstance(v, tuple) else v for v in (c.value(run) for c in cols)]
             for run in runs]
    write_csv_file(path, [c.key for c in cols] + ["path"],
                   [row + [shown_path(run.path)] for row, run in zip(cells, runs, strict=True)])
