"""The interactive figures as Vega-Lite specs: loss, one line chart per logged scalar, for every per-layer
family (``<prefix>/layer_i``) a block × step heatmap and a by-layer profile at a chosen step, and for every
per-head family (``<prefix>/layer_i/head_j``) a block × head heatmap at a chosen step.

A spec names its data (``{"name": "loss:groups"}``); the page holds each data set once and hands every figure
the ones it uses. Figures know no metric in advance: a key or per-layer prefix that a run logs gets a figure,
the known ones a title, a caption and their usual scale. Controls: hover for values, drag and wheel to pan and
zoom (double-click resets), a legend click to pick a group, a log/linear switch (the page re-renders the figure
with the other scale type), and, where groups hold several seeds, the band (min–max or ± 1 sample sd) and each seed's
own line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from normtrain.compare import figdata
from normtrain.compare.groups import Group
from normtrain.compare.runs import HEAD_KEY, Run

LOSS = (("train/loss", "train"), ("val/loss", "validation"))
# prefix -> (title, axis or colour title, log scale by default)
LAYER_FAMILIES: dict[str, tuple[str, str, bool]] = {
    "grad_norm": ("Gradient norm per block (before clipping)", "‖∇ block‖", True),
    "act_std": ("Activation std (block output)", "std", True),
    "act_mean": ("Activation mean (block output)", "mean", False),
    "resid_norm": ("Residual-stream norm entering the block", "‖x‖ per token", True),
    "attn_entropy": ("Attention entropy (a collapse toward 0 is an instability signal)", "nats", False),
    "update": ("Relative update ‖Δθ‖/‖θ‖ per block and step", "‖Δθ‖/‖θ‖", True),
    "attn_logit_max": ("Largest attention logit per block (before any soft-cap: what QK-Clip reads)", "max logit",
                       False),
    "attn_softcap_saturation": ("Share of attention logits the soft-cap saturates (|s| > 2c)", "share", False),
    "act_rms": ("Residual-stream rms after the block (variance growth with depth)", "rms", True),
    "act_absmax": ("Largest |activation| in the residual stream after the block (massive activations)", "max |x|",
                   True),
    "block_cos": ("Cosine of the block's input and output streams (near 1: the block is almost the identity)",
                  "cos(in, out)", False),
}
# per-head prefix (``<prefix>/layer_i/head_j``) -> (title, colour title)
HEAD_FAMILIES: dict[str, tuple[str, str]] = {
    "attn_logit_max": ("Largest attention logit per head (before any soft-cap: QK-Clip's S_max)", "max logit"),
}
# key -> (title, log scale by default); any other scalar gets its key as title and an automatic scale
SCALARS: dict[str, tuple[str, bool]] = {
    "update/output_change": ("Model update ‖F(x,θt) − F(x,θ0)‖ on the probe batch (DeepNet)", True),
    "grad_norm/total": ("Gradient norm, all parameters, before clipping", True),
    "val/bpb": ("Validation bits per byte", False),
    "output/softcap_saturation": ("Share of output logits the soft-cap saturates (|z| > 2c)", False),
    "lr": ("Learning rate", False),
    "tokens_per_s": ("Throughput (tokens/s, evaluation left out)", False),
    "mfu": ("Model FLOPs utilization", False),
}
FORMAT = ".4~g"


@dataclass
class Figure:
    """One figure of the page: its spec, the data sets it reads, and which scale its log switch turns."""

    id: str
    title: str
    caption: str
    spec: dict[str, Any]
    uses: list[str]
    hint: str = "drag to pan, wheel to zoom, double-click to reset, click a legend entry to pick a group"
    log: bool = False  # the scale type it opens with
    scale: str = "y"  # the Vega scale the log switch changes ("y", or "color" for heatmaps)
    domains: dict[str, list[float]] = field(default_factory=dict)  # fixed colour domains per scale type

    def meta(self) -> dict[str, Any]:
        return {"id": self.id, "spec": self.spec, "uses": self.uses, "log": self.log, "scale": self.scale,
                "domains": self.domains}


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-").lower()


def auto_log(values: Sequence[float | None]) -> bool:
    """A log scale for positive values that span more than two decades."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) > 100


def _color(groups: Sequence[Group]) -> dict[str, Any]:
    return {"field": "g", "type": "nominal", "title": None,
            "scale": {"domain": [g.label for g in groups], "range": [g.color for g in groups]},
            "legend": {"labelLimit": 320, "symbolLimit": 0, "symbolType": "stroke", "symbolStrokeWidth": 3,
                       "symbolOpacity": 1}}


def _x() -> dict[str, Any]:
    return {"field": "step", "type": "quantitative", "title": "step"}


def _y(field_: str, title: str) -> dict[str, Any]:
    return {"field": field_, "type": "quantitative", "title": title, "scale": {"zero": False}}


def _positive(expr: str) -> str:
    return f"isValid({expr}) && isFinite({expr}) && (!logscale || {expr} > 0)"


def _tip(field_: str, title: str, fmt: str | None = FORMAT) -> dict[str, Any]:
    tip = {"field": field_, "title": title}
    return {**tip, "type": "quantitative", "format": fmt} if fmt else tip


LOG_PARAM = {"name": "logscale", "value": False}  # the page sets it with the scale type, for the filters above


def _seed_params(groups: Sequence[Group]) -> list[dict[str, Any]]:
    return [
        {"name": "band", "value": "minmax", "bind": {"input": "radio", "options": ["minmax", "std", "none"],
                                                     "labels": ["min–max", "± 1 sample sd", "none"], "name": "band "}},
        {"name": "seeds", "value": False, "bind": {"input": "checkbox", "name": "each seed "}},
    ] if any(g.n > 1 for g in groups) else []


def line_spec(name: str, groups: Sequence[Group], y_title: str, kinds: bool, extra: Sequence[dict]) -> dict:
    """Mean over each group's seeds (solid; dashed for validation when ``kinds``), the band, each seed on demand."""
    flat = {"flatten": ["step", "mean", "min", "max", "std", "n"]}
    split = {"strokeDash": {"field": "k", "type": "nominal", "title": None, "scale": {
        "domain": ["train", "validation"], "range": [[1, 0], [6, 3]]}, "legend": None}} if kinds else {}
    detail = {"detail": {"field": "k"}} if kinds else {}
    base = {"x": _x(), "color": _color(groups), **split}
    several = any(g.n > 1 for g in groups)
    tooltip = [_tip("g", "group", None), *([_tip("k", "curve", None)] if kinds else []), _tip("step", "step", "d"),
               _tip("mean", "mean" if several else "value"),
               *([_tip("min", "min"), _tip("max", "max"), _tip("std", "std"), _tip("n", "seeds", "d")]
                 if several else [])]
    layers = [{
        "data": {"name": f"{name}:groups"}, "transform": [flat, {"filter": _positive("datum.mean")}],
        "params": [{"name": "zoom", "select": "interval", "bind": "scales"},
                   {"name": "pick", "select": {"type": "point", "fields": ["g"]}, "bind": "legend"}],
        "mark": {"type": "line", "strokeWidth": 2},
        "encoding": {**base, "y": _y("mean", y_title), "opacity": {"condition": {"param": "pick", "value": 1},
                                                                   "value": 0.15}}}, {
        "data": {"name": f"{name}:groups"}, "transform": [flat, {"filter": _positive("datum.mean")}],
        "params": [{"name": "hover", "select": {"type": "point", "on": "pointerover", "nearest": True,
                                                "clear": "pointerout"}}],
        "mark": {"type": "point", "filled": True, "size": 45},
        "encoding": {**base, "y": _y("mean", y_title), "tooltip": tooltip,
                     "opacity": {"condition": {"param": "hover", "empty": False, "value": 1}, "value": 0}}}]
    if several:
        band = {"calculate": "band == 'std' ? datum.mean - datum.std : datum.min", "as": "lo"}
        top = {"calculate": "band == 'std' ? datum.mean + datum.std : datum.max", "as": "hi"}
        layers[:0] = [{
            "data": {"name": f"{name}:groups"},
            "transform": [flat, band, top, {"filter": _positive("datum.lo")}],
            "mark": {"type": "area"},  # hidden rather than filtered out: an empty layer makes Vega warn
            "encoding": {"x": _x(), "color": _color(groups), **detail, "y": _y("lo", y_title), "y2": {"field": "hi"},
                         "opacity": {"condition": {"test": "band != 'none'", "value": 0.18}, "value": 0}},
        }, {
            "data": {"name": f"{name}:runs"},
            "transform": [{"flatten": ["step", "v"]}, {"filter": _positive("datum.v")}],
            "mark": {"type": "line", "strokeWidth": 1},
            "encoding": {**base, "detail": {"field": "run"}, "y": _y("v", y_title),
                         "opacity": {"condition": {"test": "seeds", "value": 0.55}, "value": 0}},
        }]
    params = [LOG_PARAM, *_seed_params(groups)]
    return {"params": params, "width": "container", "height": 320, "layer": [*layers, *extra]}


def loss_figure(groups: Sequence[Group], runs: Sequence[Run], data: dict[str, list],
                thinning: figdata.Thinning = figdata.UNCAPPED) -> Figure | None:
    records = [figdata.line_records(groups, key, kind, thinning=thinning) for key, kind in LOSS]
    data["loss:groups"] = [r for agg, _ in records for r in agg]
    data["loss:runs"] = [r for _, seeds in records for r in seeds]
    if not data["loss:groups"]:
        return None
    extra, uses = [], ["loss:groups", "loss:runs"]
    if marks := figdata.diverged_marks(groups):
        data["loss:diverged"] = marks
        uses.append("loss:diverged")
        extra.append({"data": {"name": "loss:diverged"}, "transform": [{"filter": _positive("datum.v")}],
                      "mark": {"type": "point", "shape": "cross", "filled": True, "size": 150, "stroke": "black",
                               "strokeWidth": 0.7},
                      "encoding": {"x": _x(), "y": _y("v", ""), "color": _color(groups),
                                   "tooltip": [_tip("run", "diverged", None), _tip("step", "at step", "d"),
                                               _tip("v", "last finite train loss")]}})
    if rollbacks := figdata.rollback_marks(groups):
        data["loss:rollbacks"] = rollbacks
        uses.append("loss:rollbacks")
        extra.append({"data": {"name": "loss:rollbacks"},
                      "mark": {"type": "rule", "strokeDash": [4, 3], "strokeWidth": 1.5, "opacity": 0.8},
                      "encoding": {"x": _x(), "color": _color(groups),
                                   "tooltip": [_tip("run", "rolled back", None), _tip("step", "diverged at step", "d"),
                                               _tip("to", "back to step", "d"), _tip("skipped", "batches skipped", "d"),
                                               _tip("lr", "lr factor", None), _tip("retry", "rollback", "d")]}})
    if levels := figdata.unigram_levels(runs):
        extra.append({"data": {"values": levels}, "mark": {"type": "rule", "color": "#666", "strokeDash": [2, 3]},
                      "encoding": {"y": _y("v", ""), "tooltip": [_tip("text", "", None), _tip("v", "loss")]}})
    spec = line_spec("loss", groups, "loss (nats per byte)", kinds=True, extra=extra)
    caption = ("Training loss (solid) and validation loss (dashed) against step. Each line is the mean over a "
               "group's seeds; the band spans them (min–max or ± 1 sample sd); 'each seed' draws every run. A cross "
               "marks where a run diverged (at its last finite training loss); a dashed vertical line where a run "
               "rolled back to a checkpoint (hover it: the step it went back to, the batches it skipped)"
               + ("; the dotted line is the unigram baseline of the corpus." if figdata.unigram_levels(runs) else "."))
    return Figure("fig-loss", "Loss: train (solid) and validation (dashed)", caption, spec, uses, log=True)


def scalar_figure(key: str, groups: Sequence[Group], data: dict[str, list],
                  thinning: figdata.Thinning = figdata.UNCAPPED) -> Figure | None:
    name = f"scalar:{key}"
    data[f"{name}:groups"], data[f"{name}:runs"] = figdata.line_records(groups, key, None, thinning=thinning)
    if not data[f"{name}:groups"]:
        return None
    title, log = SCALARS.get(key, (key, None))
    if log is None:
        log = auto_log([v for r in data[f"{name}:groups"] for v in r["mean"]])
    spec = line_spec(name, groups, key, kinds=False, extra=[])
    caption = f"{key} against step: the mean over each group's seeds, and their spread where a group has several."
    return Figure(f"fig-{slug(key)}", title, caption, spec, [f"{name}:groups", f"{name}:runs"], log=log)


def domains(records: Sequence[dict]) -> dict[str, list[float]]:
    """The colour range of a heatmap, from the 1st to the 99th percentile, so one wild value cannot wash out
    the map; for the log scale over the positive values only."""
    values = np.asarray([v for r in records for v in r["v"] if v is not None], dtype=float)
    out = {}
    for kind, pool in (("linear", values), ("log", values[values > 0])):
        if pool.size:
            lo, hi = np.percentile(pool, [1, 99])
            out[kind] = [figdata.num(lo), figdata.num(hi if hi > lo else lo * 1.0001 + 1e-12)]
    return out


HEATMAP_STEPS = [{"flatten": ["step", "v"]},  # each cell runs from its step to the next logged one
                 {"window": [{"op": "lead", "field": "step", "as": "next"},
                             {"op": "lag", "field": "step", "as": "prev"}],
                  "groupby": ["g", "layer"], "sort": [{"field": "step"}]},
                 {"calculate": "datum.next != null ? datum.next : datum.step + (datum.prev != null ? "
                               "datum.step - datum.prev : 1)", "as": "end"},
                 {"filter": _positive("datum.v")}]


def heatmap_panel(unit: str, n_layers: int) -> dict[str, Any]:
    """One block × step map of records flattened by ``HEATMAP_STEPS``: the report's panels, and each run's PNG."""
    tooltip = [_tip("g", "group", None), _tip("layer", "layer", "d"), _tip("step", "step", "d"), _tip("v", unit)]
    return {"width": 290, "height": max(48, min(14 * n_layers, 220)), "mark": "rect",
            "encoding": {"x": _x(), "x2": {"field": "end"},
                         "y": {"field": "layer", "type": "ordinal", "sort": "descending", "title": "layer"},
                         "color": {"field": "v", "type": "quantitative", "title": unit,
                                   "scale": {"scheme": "viridis", "clamp": True}},
                         "tooltip": tooltip}}


def _at_step(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The "at step ≤" slider (at the last step to start) and the transforms that keep each group's last logged
    step at or before it: the profile's and the per-head map's."""
    steps = [s for r in records for s in r["step"]]
    last, every = max(steps, default=0), math.gcd(*steps) or 1  # the coarsest slider step that reaches them all
    return {"params": [LOG_PARAM, {"name": "at", "value": last, "bind": {
                "input": "range", "min": 0, "max": last, "step": every, "name": "at step ≤ "}}],
            "transform": [{"flatten": ["step", "v"]}, {"filter": f"datum.step <= at && {_positive('datum.v')}"},
                          {"joinaggregate": [{"op": "max", "field": "step", "as": "shown"}], "groupby": ["g"]},
                          {"filter": "datum.step == datum.shown"}]}


def layer_figures(prefix: str, groups: Sequence[Group], thinning: figdata.Thinning,
                  data: dict[str, list]) -> list[Figure]:
    """A heatmap (block × step, one panel per group, one colour scale) and a by-layer profile with a step slider."""
    name = f"layers:{prefix}"
    records = figdata.layer_records(groups, prefix, thinning)
    if not records:
        return []
    data[name] = records
    title, unit, log = LAYER_FAMILIES.get(prefix, (f"{prefix}/layer_i", prefix, None))
    if log is None:
        log = auto_log([v for r in records for v in r["v"]])
    n_layers = 1 + max(r["layer"] for r in records)
    shown = [g for g in groups if any(r["g"] == g.label for r in records)]
    heatmap = {
        "data": {"name": name}, "params": [LOG_PARAM], "transform": HEATMAP_STEPS,
        "facet": {"field": "g", "type": "nominal", "title": None, "sort": [g.label for g in shown],
                  "header": {"labelLimit": 330, "labelFontSize": 11}},
        "columns": min(3, len(shown)), "spec": heatmap_panel(unit, n_layers)}
    profile = {  # the PNGs draw it at fixed steps (paper.py sets ``at``)
        "data": {"name": name}, **_at_step(records),
        "width": "container", "height": 280, "mark": {"type": "line", "point": True},
        "encoding": {"x": {"field": "layer", "type": "quantitative", "title": "layer (0 = next to the embedding)",
                           "axis": {"tickMinStep": 1}},
                     "y": _y("v", unit), "color": _color(shown),
                     "tooltip": [_tip("g", "group", None), _tip("layer", "layer", "d"), _tip("shown", "step", "d"),
                                 _tip("v", unit)]}}
    key = f"{prefix}/layer_i"
    return [
        Figure(f"fig-{slug(prefix)}-map", f"{title}: by block and step",
               f"{key}, block (row, 0 = next to the embedding) × logged step, mean over each group's seeds; one "
               "colour scale for all panels, from the 1st to the 99th percentile; a gap is a non-finite value.",
               heatmap, [name], hint="hover a cell for its value", log=log, scale="color",
               domains=domains(records)),
        Figure(f"fig-{slug(prefix)}-profile", f"{title}: by block",
               f"{key} against block at the chosen step (the slider; each group's last logged step at or before "
               "it whose values are finite), mean over each group's seeds.", profile, [name],
               hint="hover a point for its value; the slider below picks the step", log=log),
    ]


def head_figure(prefix: str, groups: Sequence[Group], thinning: figdata.Thinning,
                data: dict[str, list]) -> Figure | None:
    """A block × head map at a chosen step (the slider), one panel per group on one colour scale: which heads
    grow, where the block × step map shows only their max."""
    name = f"heads:{prefix}"
    records = figdata.head_records(groups, prefix, thinning)
    if not records:
        return None
    data[name] = records
    title, unit = HEAD_FAMILIES.get(prefix, (f"{prefix}/layer_i/head_j", prefix))
    n_layers, n_heads = (1 + max(r[k] for r in records) for k in ("layer", "head"))
    shown = [g for g in groups if any(r["g"] == g.label for r in records)]
    tooltip = [_tip("g", "group", None), _tip("layer", "layer", "d"), _tip("head", "head", "d"),
               _tip("shown", "step", "d"), _tip("v", unit)]
    spec = {
        "data": {"name": name}, **_at_step(records),
        "facet": {"field": "g", "type": "nominal", "title": None, "sort": [g.label for g in shown],
                  "header": {"labelLimit": 330, "labelFontSize": 11}},
        "columns": min(3, len(shown)),
        "spec": {"width": max(60, min(22 * n_heads, 290)), "height": max(48, min(14 * n_layers, 220)), "mark": "rect",
                 "encoding": {"x": {"field": "head", "type": "ordinal", "title": "head", "axis": {"labelAngle": 0}},
                              "y": {"field": "layer", "type": "ordinal", "sort": "descending", "title": "layer"},
                              "color": {"field": "v", "type": "quantitative", "title": unit,
                                        "scale": {"scheme": "viridis", "clamp": True}},
                              "tooltip": tooltip}}}
    return Figure(f"fig-{slug(prefix)}-heads", f"{title}: by block and head",
                  f"{prefix}/layer_i/head_j, block (row, 0 = next to the embedding) × head at the chosen step (the "
                  "slider; each group's last logged step at or before it), mean over each group's seeds; one colour "
                  "scale for all panels, from the 1st to the 99th percentile over all steps.", spec, [name],
                  hint="hover a cell for its value; the slider below picks the step", scale="color",
                  domains=domains(records))


def build(groups: Sequence[Group], runs: Sequence[Run],
          points: int | None = None) -> tuple[list[Figure], dict[str, list]]:
    """Every figure the runs have data for, and the data sets they read; ``points`` caps each series
    (``figdata.Thinning``)."""
    prefixes = figdata.prefixes(runs)
    known = [p for p in LAYER_FAMILIES if p in prefixes] + [p for p in prefixes if p not in LAYER_FAMILIES]
    heads = figdata.prefixes(runs, HEAD_KEY)
    thinning = figdata.Thinning(figdata.layer_stride(groups, known, heads), points, figdata.marked_steps(groups))
    data: dict[str, list] = {}
    figures = [f for f in [loss_figure(groups, runs, data, thinning)] if f]
    for prefix in known:
        figures += layer_figures(prefix, groups, thinning, data)
    figures += [f for prefix in heads if (f := head_figure(prefix, groups, thinning, data))]
    keys = figdata.scalar_keys(runs)
    ordered = [k for k in SCALARS if k in keys] + [k for k in keys if k not in SCALARS and k not in dict(LOSS)]
    figures += [f for key in ordered if (f := scalar_figure(key, groups, data, thinning))]
    return figures, data
