"""The table (Markdown, CSV, terminal) and the self-contained HTML report.

Rows are sorted by the chosen metric, best first: completed runs, then runs that stopped early
(incomplete, interrupted), then diverged runs (the longest-lived first), then failed ones.
"""

from __future__ import annotations

import base64
import csv
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normtrain.compare.labels import format_value, short_names
from normtrain.compare.runs import Run, natural_key

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
    fmt: str = ""  # format spec for floats in Markdown and HTML


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


def columns(keys: Sequence[str]) -> list[Column]:
    names = short_names(list(keys))
    config_cols = [Column(k, names[k], lambda r, k=k: _config_value(r, k)) for k in keys]
    summary = lambda key: (lambda r: r.summary.get(key))
    return [
        Column("label", "run", lambda r: r.label),
        *config_cols,
        Column("status", "status", lambda r: r.status),
        Column("diverged_at_step", "diverged at", summary("diverged_at_step")),
        Column("steps", "steps", summary("steps")),
        Column("final_val_loss", "final val loss", summary("final_val_loss"), ".4f"),
        Column("best_val_loss", "best val loss", summary("best_val_loss"), ".4f"),
        Column("final_val_bpb", "val bpb", summary("final_val_bpb"), ".3f"),
        Column("tokens_per_s", "tokens/s", Run.tokens_per_s, ".0f"),
        Column("wall_time_s", "wall time (s)", summary("wall_time_s"), ".1f"),
        Column("n_params", "params", summary("n_params")),
    ]


def _config_value(run: Run, dotted: str) -> Any:
    node: Any = run.config or {}
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return tuple(node) if isinstance(node, list) else node


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and fmt:
        return format(value, fmt) if math.isfinite(value) else str(value)
    return format_value(value)


def markdown(runs: Sequence[Run], cols: Sequence[Column]) -> str:
    """A Markdown table padded so that it also reads as a plain table in a terminal."""
    cells = [[c.title for c in cols]] + [[_cell(c.value(r), c.fmt).replace("|", "\\|") for c in cols] for r in runs]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    numeric = [i > 0 and all(_is_number(c.value(r)) or c.value(r) is None for r in runs) for i, c in enumerate(cols)]
    aligned = list(zip(widths, numeric, strict=True))

    def line(row: list[str]) -> str:
        padded = (v.rjust(w) if num else v.ljust(w) for v, (w, num) in zip(row, aligned, strict=True))
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in aligned) + "|"
    return "\n".join([line(cells[0]), rule, *map(line, cells[1:])]) + "\n"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def shown_path(path: Path) -> str:
    """A run folder as the user would type it: relative to the working directory when it is below it."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def write_csv(runs: Sequence[Run], cols: Sequence[Column], path: Path) -> None:
    """Full-precision values, empty cells for missing ones, and each run's folder."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([c.key for c in cols] + ["path"])
        for run in runs:
            values = [c.value(run) for c in cols]
            writer.writerow(["" if v is None else format_value(v) if isinstance(v, tuple) else v for v in values]
                            + [shown_path(run.path)])


# (file or glob, heading, caption) in the order the report shows them
FIGURES = (
    ("loss.png", "Loss",
     "Training loss (solid) and validation loss (dashed, dots) against step, one colour per run, log scale. "
     "A cross marks where a diverged run stopped (at its last finite training loss)."),
    ("grad_norm_by_layer.png", "Gradient norm per layer",
     "L2 norm of each block's gradient (before clipping) against layer index, at the first logged step (left; "
     "Xiong et al. 2020, Fig. 3, found Post-LN's gradients at initialization largest near the output and "
     "Pre-LN's about equal across layers) and at the last logged step whose values are all finite (right)."),
    ("activations.png", "Activations per layer",
     "Per-block statistics against layer index, one row per statistic the runs recorded (output std and mean, "
     "the norm of the residual stream entering the block, the mean attention entropy: a collapse toward 0 is "
     "an instability signal) and one column per chosen step: each run's first, middle and last logged step "
     "whose values are all finite."),
    ("update.png", "Model update",
     "Left: ‖F(x,θt) − F(x,θ0)‖, the change of the final hidden state on a fixed probe batch since "
     "initialization (the DeepNet measure; step 0 is 0 and left off the log axis). Right: the relative "
     "parameter update ‖Δθ‖/‖θ‖ per optimizer step, averaged over blocks."),
    ("grad_norm_heatmap_*.png", "Gradient norm by layer and step",
     "One map per run: block (row) × logged step (column), log colour on one scale shared by all runs "
     "(1st to 99th percentile; grey = not finite). A red dashed line marks divergence."),
)

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 0.9em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.diverged td, tr.failed td { background: #fde8e8; }
tr.incomplete td, tr.running td, tr.interrupted td { background: #fff7e0; }
img { max-width: 100%; border: 1px solid #eee; }
.heatmaps { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 0.5em; }
figure { margin: 0; } figcaption { font-size: 0.85em; color: #555; }
"""


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}">'


def write_html(runs: Sequence[Run], cols: Sequence[Column], *, sorted_by: str, sources: Sequence[str],
               notes: Sequence[str], images: dict[str, list[Path]], path: Path) -> None:
    """One page with the table, the notes and every figure embedded as a data: URI (no external files)."""
    e = html.escape
    head = "".join(f"<th>{e(c.title)}</th>" for c in cols)
    body = []
    for run in runs:
        cells = "".join(
            f'<td class="num">{e(_cell(v, c.fmt))}</td>' if _is_number(v) else f"<td>{e(_cell(v, c.fmt))}</td>"
            for c in cols for v in [c.value(run)])
        body.append(f'<tr class="{e(run.status)}" title="{e(shown_path(run.path))}">{cells}</tr>')
    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>normtrain-compare: {len(runs)} runs</title><style>{CSS}</style></head><body>",
        f"<h1>Comparison of {len(runs)} runs</h1>",
        f"<p>From {e(', '.join(sources))}. Sorted by {e(sorted_by)}; runs that stopped early, diverged "
        "(highlighted) and failed come last.</p>",
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>",
    ]
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    for pattern, heading, caption in FIGURES:
        files = images.get(pattern, [])
        if not files:
            continue
        parts.append(f"<h2>{e(heading)}</h2><p>{e(caption)}</p>")
        if len(files) == 1 and "*" not in pattern:
            parts.append(_img(files[0]))
        else:
            parts.append('<div class="heatmaps">' + "".join(
                f"<figure>{_img(f)}<figcaption>{e(f.name)}</figcaption></figure>" for f in files) + "</div>")
    parts.append("</body></html>\n")
    path.write_text("\n".join(parts), encoding="utf-8")
