"""The values a chart's scale spans, so that one diverged run cannot flatten every other.

A run that diverges can log a loss of 10⁴ while the others end at 3.1 and 3.4: on one axis over all of them the
result is a one-pixel sliver, and a colour scale stretched from 1e-10 to 1e5 paints every healthy map one flat
colour. So:

- a line chart's y axis spans the runs that did not diverge or fail (``YRange``): every finite value they logged,
  from their lowest to their highest, so no point of theirs is ever cut, and a few per cent of room. A diverged
  run leaves that range at the plot's edge, where a triangle marks the step it left (``edges``); a control in the
  page (the ``yrange`` parameter) widens the axis to every run. Charts where no run leaves the range keep the axis
  Vega picks.
- a heatmap's panels share one colour scale by default, from the 1st to the 99th percentile of the values of the
  runs that did not diverge (``colour_domains``, ``panel_domains``), so that a colour means one value in every
  panel and one wild cell cannot stretch it; a diverged run's cells beyond it take its end colours. A control gives
  each panel its own scale (its own percentiles) instead, to see the pattern inside a panel the shared one
  flattens.

Percentiles cut a healthy line's first steps (a loss that falls from 5.6 to 3 spends few steps above 4), so the
y range keeps all of a healthy run's values; a map's cells are many and alike, and there the percentiles are right.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from normtrain.compare.figdata import num
from normtrain.compare.groups import Group
from normtrain.compare.runs import Run

UNHEALTHY = ("diverged", "failed")
PAD = 0.06  # room above and below the range, for the edge's marks: a share of its span (of its decades on a log axis)
YRANGE_PARAM = {"name": "yrange", "value": "healthy", "bind": {
    "input": "radio", "options": ["healthy", "all"], "labels": ["runs that did not diverge", "all runs"],
    "name": "y axis spans "}}


def healthy(run: Run) -> bool:
    return run.status not in UNHEALTHY


def healthy_labels(groups: Sequence[Group]) -> set[str]:
    return {run.label for group in groups for run in group.runs if healthy(run)}


def _padded(lo: float, hi: float, log: bool, pad: float) -> list[float]:
    if log:
        ratio = (hi / lo) ** pad if hi > lo else 1 + pad
        return [num(lo / ratio), num(hi * ratio)]
    room = pad * ((hi - lo) if hi > lo else (abs(hi) or 1.0))
    return [num(lo - room), num(hi + room)]


def _spans(values: np.ndarray, pad: float = PAD) -> dict[str, list[float]]:
    """{"linear": [lo, hi], "log": [lo, hi]} of finite ``values`` (the log one over the positive ones), widened by
    ``pad`` of their span (of its decades)."""
    out = {"linear": [float(values.min()), float(values.max())]}
    if (pos := values[values > 0]).size:
        out["log"] = [float(pos.min()), float(pos.max())]
    return {kind: _padded(*span, log=kind == "log", pad=pad) for kind, span in out.items()}


def _expr(domains: dict[str, list[float]]) -> str:
    """``logscale ? [log] : [linear]``; the linear domain stands in for a missing log one (no positive values), and
    [0, 1] for none at all (no finite values: nothing is drawn)."""
    linear = domains.get("linear", [0, 1])
    return f"(logscale ? {json.dumps(domains.get('log', linear))} : {json.dumps(linear)})"


@dataclass
class YRange:
    """A line chart's y domain with and without the runs that diverged, and where those runs leave it."""

    healthy: dict[str, list[float]]  # per scale type (linear, log): the padded range of the healthy runs
    every: dict[str, list[float]]  # the same over every run
    edges: list[dict[str, Any]]  # per run that leaves the healthy range: where it first does
    limits: dict[str, list[float]]  # half-way into the padding: where the edge's marks sit, clear of the lines

    def domain(self) -> dict[str, str]:
        """The y scale's domain as an expression of the page's controls (``yrange``, ``logscale``)."""
        return {"expr": f"yrange == 'all' ? {_expr(self.every)} : {_expr(self.healthy)}"}

    def at_edge(self, field_: str) -> str:
        """An expression: ``field_`` held inside the plot, a value beyond the healthy range in the padding's
        middle, above (or below) every healthy line."""
        lo, hi = (f"(logscale ? {self.limits.get('log', self.limits['linear'])[i]} : "
                  f"{self.limits['linear'][i]})" for i in (0, 1))
        return f"clamp(datum.{field_}, {lo}, {hi})"


def y_range(records: Iterable[dict[str, Any]], healthy_runs: set[str]) -> YRange | None:
    """The range of the per-run series ``records`` (``{"run", "step": [...], "v": [...]}``, as figdata.line_records
    gives them) that the runs in ``healthy_runs`` span; None where no other run leaves it (or no run is healthy)."""
    records = list(records)
    good = _finite(r["v"] for r in records if r["run"] in healthy_runs)
    if not good.size:
        return None
    spans = _spans(good)
    lo, hi = spans["linear"]  # a value in the room around the healthy lines is still drawn: no need to clip
    edges = [edge for r in records if r["run"] not in healthy_runs and (edge := first_exit(r, lo, hi))]
    if not edges:
        return None
    return YRange(spans, _spans(_finite(r["v"] for r in records)), earliest(edges), _spans(good, PAD / 2))


def _finite(series: Iterable[Sequence[float | None]]) -> np.ndarray:
    values = np.asarray([v for s in series for v in s if v is not None], dtype=float)
    return values[np.isfinite(values)]


def first_exit(record: dict[str, Any], lo: float, hi: float) -> dict[str, Any] | None:
    """Where the series ``record`` first lies outside [lo, hi]: its step, value and which edge; None if never."""
    for step, v in zip(record["step"], record["v"], strict=True):
        if v is not None and not lo <= v <= hi:
            return {"g": record["g"], "run": record["run"], "k": record.get("k", ""), "step": step, "v": v,
                    "edge": "above" if v > hi else "below"}
    return None


def earliest(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One mark per run: the first of its curves to leave the range (train or validation)."""
    first: dict[str, dict[str, Any]] = {}
    for edge in sorted(edges, key=lambda e: e["step"]):
        first.setdefault(edge["run"], edge)
    return list(first.values())


def colour_domains(records: Sequence[dict]) -> dict[str, list[float]]:
    """A heatmap's colour range, from the 1st to the 99th percentile of the records' values, so one wild value
    cannot wash out the map; for the log scale over the positive values only."""
    values = _finite(r["v"] for r in records)
    out = {}
    for kind, pool in (("linear", values), ("log", values[values > 0])):
        if pool.size:
            lo, hi = np.percentile(pool, [1, 99])
            out[kind] = [num(lo), num(hi if hi > lo else lo * 1.0001 + 1e-12)]
    return out


def panel_domains(records: Sequence[dict], panels: Sequence[str], healthy_panels: set[str]) -> dict[str, Any]:
    """Per panel (group label) its own colour range, and the shared one: over the healthy panels' records (every
    panel's where none is healthy)."""
    shared = [r for r in records if r["g"] in healthy_panels] or list(records)
    return {"shared": colour_domains(shared),
            "panel": {g: colour_domains([r for r in records if r["g"] == g]) for g in panels}}


COLOURS_PARAM = {"name": "colours", "value": "shared", "bind": {
    "input": "radio", "options": ["shared", "panel"],
    "labels": ["one for all (runs that did not diverge)", "each panel its own"], "name": "colour scale: "}}


def colour_expr(own: dict[str, list[float]], shared: dict[str, list[float]]) -> dict[str, str]:
    """A panel's colour domain as an expression of the page's controls (``colours``, ``logscale``); a panel with no
    values of its own takes the shared range."""
    fallback = own if own else shared
    return {"expr": f"colours == 'shared' ? {_expr(shared)} : {_expr(fallback)}"}
