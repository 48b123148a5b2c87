"""The interactive figures as Vega-Lite specs: the loss, one line chart per other logged scalar, and (from
normtrain.compare.maps) the per-layer and per-head maps and profiles; ``build`` makes every figure the runs have
data for.

A spec names its data (``{"name": "loss:groups"}``); the page holds each data set once and hands every figure
the ones it uses. Figures know no metric in advance: a key or per-layer prefix that a run logs gets a figure,
the known ones a title, a caption and their usual scale. Controls: hover for values (the group, the curve, the
seeds), drag and wheel to pan and zoom (double-click resets), a legend click to pick a group, a log/linear switch
(the page re-renders the figure with the other scale type), where groups hold several seeds the band (min–max or
± 1 sample sd) and each seed's own line, and where a run diverged beyond the others the y axis's span
(normtrain.compare.ranges).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from normtrain.compare import figdata, maps, ranges
from normtrain.compare.encodings import (  # noqa: F401 - Figure, slug, LOG_PARAM: also this module's names
    LOG_PARAM,
    Figure,
    auto_log,
    color,
    positive,
    slug,
    tip,
    x_step,
    y_value,
)
from normtrain.compare.groups import Group
from normtrain.compare.runs import HEAD_KEY, Run

LOSS = (("train/loss", "train"), ("val/loss", "validation"))
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
FAILURES = "failures"  # the name of the loss chart's layer of words at failed groups' line ends (loss.png's key)
RANGE_CAPTION = (" The y axis spans the runs that did not diverge; a triangle at its edge marks where a run left it "
                 "(hover it), and 'y axis spans: all runs' widens it.")


def _seed_params(groups: Sequence[Group]) -> list[dict[str, Any]]:
    return [
        {"name": "band", "value": "minmax", "bind": {"input": "radio", "options": ["minmax", "std", "none"],
                                                     "labels": ["min–max", "± 1 sample sd", "none"], "name": "band "}},
        {"name": "seeds", "value": False, "bind": {"input": "checkbox", "name": "each seed "}},
    ] if any(g.n > 1 for g in groups) else []


def _tooltips(kinds: bool, several: bool) -> tuple[list[dict], list[dict]]:
    """(a group's mean, one seed's line): what a hover shows, the group, the curve and the seed(s) first."""
    curve = [tip("k", "curve", None)] if kinds else []
    mean = [tip("g", "group", None), *curve, tip("seeds", "seeds" if several else "seed", None),
            tip("step", "step", "d"), tip("mean", "mean" if several else "value"),
            *([tip("min", "min"), tip("max", "max"), tip("std", "std"), tip("n", "seeds here", "d")]
              if several else [])]
    seed = [tip("g", "group", None), *curve, tip("run", "run", None), tip("seed", "seed", None),
            tip("step", "step", "d"), tip("v", "value")]
    return mean, seed


def _hover(data: str, fields: list[str], y: dict, base: dict, tooltip: list[dict]) -> dict:
    """Invisible points of ``data``: the one nearest the pointer shows, with its tooltip."""
    return {"data": {"name": data}, "transform": [{"flatten": fields}, {"filter": positive(f"datum.{y['field']}")}],
            "params": [{"name": "hover", "select": {"type": "point", "on": "pointerover", "nearest": True,
                                                    "clear": "pointerout"}}],
            "mark": {"type": "point", "filled": True, "size": 45},
            "encoding": {**base, "y": y, "tooltip": tooltip,
                         "opacity": {"condition": {"param": "hover", "empty": False, "value": 1}, "value": 0}}}


def line_spec(name: str, groups: Sequence[Group], y_title: str, kinds: bool, extra: Sequence[dict],
              yrange: ranges.YRange | None = None) -> dict:
    """Mean over each group's seeds (solid; dashed for validation when ``kinds``), the band, each seed on demand;
    with ``yrange`` the y axis spans the runs that did not diverge and triangles mark where others left it."""
    flat = {"flatten": ["step", "mean", "min", "max", "std", "n"]}
    split = {"strokeDash": {"field": "k", "type": "nominal", "title": None, "scale": {
        "domain": ["train", "validation"], "range": [[1, 0], [6, 3]]}, "legend": None}} if kinds else {}
    detail = {"detail": {"field": "k"}} if kinds else {}
    base = {"x": x_step(), "color": color(groups), **split}
    several = any(g.n > 1 for g in groups)
    mean_tip, seed_tip = _tooltips(kinds, several)
    layers = [{
        "data": {"name": f"{name}:groups"}, "transform": [flat, {"filter": positive("datum.mean")}],
        "params": [{"name": "zoom", "select": "interval", "bind": "scales"},
                   {"name": "pick", "select": {"type": "point", "fields": ["g"]}, "bind": "legend"}],
        "mark": {"type": "line", "strokeWidth": 2},
        "encoding": {**base, "y": y_value("mean", y_title), "opacity": {"condition": {"param": "pick", "value": 1},
                                                                        "value": 0.15}}},
        _hover(f"{name}:groups", flat["flatten"], y_value("mean", y_title), base, mean_tip)]
    if several:
        band = {"calculate": "band == 'std' ? datum.mean - datum.std : datum.min", "as": "lo"}
        top = {"calculate": "band == 'std' ? datum.mean + datum.std : datum.max", "as": "hi"}
        layers[:0] = [{
            "data": {"name": f"{name}:groups"},
            "transform": [flat, band, top, {"filter": positive("datum.lo")}],
            "mark": {"type": "area"},  # hidden rather than filtered out: an empty layer makes Vega warn
            "encoding": {"x": x_step(), "color": color(groups), **detail, "y": y_value("lo", y_title),
                         "y2": {"field": "hi"},
                         "opacity": {"condition": {"test": "band != 'none'", "value": 0.18}, "value": 0}},
        }, {
            "data": {"name": f"{name}:runs"},
            "transform": [{"flatten": ["step", "v"]}, {"filter": positive("datum.v")}],
            "mark": {"type": "line", "strokeWidth": 1},
            "encoding": {**base, "detail": {"field": "run"}, "y": y_value("v", y_title),
                         "opacity": {"condition": {"test": "seeds", "value": 0.55}, "value": 0}},
        }]
        layers.append({  # on top of the means' hover, where 'each seed' draws them: a point per logged step
            "data": {"name": f"{name}:runs"},
            "transform": [{"flatten": ["step", "v"]}, {"filter": positive("datum.v")}],
            "mark": {"type": "point", "filled": True},
            "encoding": {**base, "y": y_value("v", y_title), "tooltip": seed_tip,
                         "size": {"condition": {"test": "seeds", "value": 30}, "value": 0},  # 0: nothing to hover
                         "opacity": {"condition": {"test": "seeds", "value": 0.55}, "value": 0}}})
    params = [LOG_PARAM, *_seed_params(groups), *([ranges.YRANGE_PARAM] if yrange else [])]
    layers += extra
    if yrange:  # lines cut at the plot's edge; the marks held inside it (crosses, triangles) whole
        layers = [*(clipped(layer, layer["data"].get("name") != "loss:diverged") for layer in layers),
                  clipped(edge_layer(name, groups, yrange), False)]
        for layer in layers:
            if "field" in layer["encoding"].get("y", {}):
                layer["encoding"]["y"]["scale"] = {**layer["encoding"]["y"].get("scale", {}), "domain": yrange.domain()}
    return {"params": params, "width": "container", "height": 320, "layer": layers}


def clipped(layer: dict, clip: bool = True) -> dict:
    """``layer`` with its marks cut at the plot's edge (a line that leaves the y range, off the axes), or, with
    ``clip=False``, drawn whole where they overlap it (a mark at step 0 on the axis; Vega-Lite cuts every layer of a
    chart that zooms unless told)."""
    mark = layer["mark"] if isinstance(layer["mark"], dict) else {"type": layer["mark"]}
    return {**layer, "mark": {**mark, "clip": clip}}


def edge_layer(name: str, groups: Sequence[Group], yrange: ranges.YRange) -> dict:
    """A triangle at the edge of the healthy range where each run that leaves it first does (while the axis spans
    the healthy runs), pointing the way it went."""
    shown = "yrange != 'all'"  # hidden, and nothing to hover, rather than filtered out: an empty layer makes Vega warn
    return {"data": {"name": f"{name}:edges"}, "transform": [{"calculate": yrange.at_edge("v"), "as": "at"}],
            "mark": {"type": "point", "filled": True, "stroke": "black", "strokeWidth": 0.7},
            "encoding": {"x": x_step(), "y": y_value("at", ""), "color": color(groups),
                         "size": {"condition": {"test": shown, "value": 130}, "value": 0},
                         "opacity": {"condition": {"test": shown, "value": 1}, "value": 0},
                         "shape": {"field": "edge", "type": "nominal", "legend": None, "scale": {
                             "domain": ["above", "below"], "range": ["triangle-up", "triangle-down"]}},
                         "tooltip": [tip("run", "left the y range", None), tip("k", "curve", None),
                                     tip("step", "at step", "d"), tip("v", "value"), tip("edge", "went", None)]}}


def y_range(name: str, groups: Sequence[Group], data: dict[str, list], uses: list[str]) -> ranges.YRange | None:
    """The healthy y range of the line chart ``name`` (its per-run data set), its edge marks into ``data``."""
    found = ranges.y_range(data[f"{name}:runs"], ranges.healthy_labels(groups))
    if found:
        data[f"{name}:edges"] = found.edges
        uses.append(f"{name}:edges")
    return found


def diverged_layer(groups: Sequence[Group], yrange: ranges.YRange | None) -> dict:
    """A cross where each diverged run stopped (at its edge of the y range, when it stopped beyond it)."""
    shown = [{"calculate": yrange.at_edge("v") if yrange else "datum.v", "as": "at"}]
    return {"data": {"name": "loss:diverged"}, "transform": [{"filter": positive("datum.v")}, *shown],
            "mark": {"type": "point", "shape": "cross", "filled": True, "size": 150, "stroke": "black",
                     "strokeWidth": 0.7},
            "encoding": {"x": x_step(), "y": y_value("at", ""), "color": color(groups),
                         "tooltip": [tip("run", "diverged", None), tip("step", "at step", "d"),
                                     tip("v", "last finite train loss")]}}


def failure_layer(groups: Sequence[Group], records: Sequence[dict], yrange: ranges.YRange | None) -> dict | None:
    """Words at the end of each failed group's loss line (its validation curve, else its training one): how its
    runs failed ("collapsed", "1 of 3 diverged"), in its colour (inside the y range, as the crosses are)."""
    ends = []
    for group in (g for g in groups if g.failure):
        curves = {r["k"]: r for r in records if r["g"] == group.label}
        curve = curves.get("validation") or curves.get("train")
        points = [(s, v) for s, v in zip(curve["step"], curve["mean"], strict=True) if v is not None] if curve else []
        if points:
            ends.append({"g": group.label, "step": points[-1][0], "v": points[-1][1], "text": group.failure})
    if not ends:
        return None
    held = yrange.at_edge("v") if yrange else "datum.v"
    return {"name": FAILURES, "data": {"values": ends}, "transform": [{"calculate": held, "as": "at"}],
            "mark": {"type": "text", "align": "right", "baseline": "bottom", "dx": -2, "dy": -5, "fontSize": 12,
                     "fontWeight": "bold"},
            "encoding": {"x": x_step(), "y": y_value("at", ""), "color": color(groups), "text": {"field": "text"}}}


def rollback_layer(groups: Sequence[Group]) -> dict:
    return {"data": {"name": "loss:rollbacks"},
            "mark": {"type": "rule", "strokeDash": [4, 3], "strokeWidth": 1.5, "opacity": 0.8},
            "encoding": {"x": x_step(), "color": color(groups),
                         "tooltip": [tip("run", "rolled back", None), tip("step", "diverged at step", "d"),
                                     tip("to", "back to step", "d"), tip("skipped", "batches skipped", "d"),
                                     tip("lr", "lr factor", None), tip("retry", "rollback", "d")]}}


def loss_figure(groups: Sequence[Group], runs: Sequence[Run], data: dict[str, list],
                thinning: figdata.Thinning = figdata.UNCAPPED) -> Figure | None:
    records = [figdata.line_records(groups, key, kind, thinning=thinning) for key, kind in LOSS]
    data["loss:groups"] = [r for agg, _ in records for r in agg]
    data["loss:runs"] = [r for _, seeds in records for r in seeds]
    if not data["loss:groups"]:
        return None
    uses = ["loss:groups", "loss:runs"]
    yrange = y_range("loss", groups, data, uses)
    extra = []
    if marks := figdata.diverged_marks(groups):
        data["loss:diverged"] = marks
        uses.append("loss:diverged")
        extra.append(diverged_layer(groups, yrange))
    if rollbacks := figdata.rollback_marks(groups):
        data["loss:rollbacks"] = rollbacks
        uses.append("loss:rollbacks")
        extra.append(rollback_layer(groups))
    if failed := failure_layer(groups, data["loss:groups"], yrange):
        extra.append(failed)
    if levels := figdata.unigram_levels(runs):
        extra.append({"data": {"values": levels}, "mark": {"type": "rule", "color": "#666", "strokeDash": [2, 3]},
                      "encoding": {"y": y_value("v", ""), "tooltip": [tip("text", "", None), tip("v", "loss")]}})
    spec = line_spec("loss", groups, "loss (nats per byte)", kinds=True, extra=extra, yrange=yrange)
    caption = ("Training loss (solid) and validation loss (dashed) against step. Each line is the mean over a "
               "group's seeds; the band spans them (min–max or ± 1 sample sd); 'each seed' draws every run. A cross "
               "marks where a run diverged (at its last finite training loss); a dashed vertical line where a run "
               "rolled back to a checkpoint (hover it: the step it went back to, the batches it skipped); a group "
               "whose runs collapsed or diverged says so in the legend and in words at the end of its line"
               + ("; the dotted line is the unigram baseline of the corpus." if levels else ".")
               + (RANGE_CAPTION if yrange else ""))
    return Figure("fig-loss", "Loss: train (solid) and validation (dashed)", caption, spec, uses, log=True)


def scalar_figure(key: str, groups: Sequence[Group], data: dict[str, list],
                  thinning: figdata.Thinning = figdata.UNCAPPED) -> Figure | None:
    name = f"scalar:{key}"
    data[f"{name}:groups"], data[f"{name}:runs"] = figdata.line_records(groups, key, None, thinning=thinning)
    if not data[f"{name}:groups"]:
        return None
    uses = [f"{name}:groups", f"{name}:runs"]
    yrange = y_range(name, groups, data, uses)
    title, log = SCALARS.get(key, (key, None))
    if log is None:
        log = auto_log([v for r in data[f"{name}:groups"] for v in r["mean"]])
    spec = line_spec(name, groups, key, kinds=False, extra=[], yrange=yrange)
    caption = (f"{key} against step: the mean over each group's seeds, and their spread where a group has several."
               + (RANGE_CAPTION if yrange else ""))
    return Figure(f"fig-{slug(key)}", title, caption, spec, uses, log=log)


def build(groups: Sequence[Group], runs: Sequence[Run],
          points: int | None = None) -> tuple[list[Figure], dict[str, list]]:
    """Every figure the runs have data for, and the data sets they read; ``points`` caps each series
    (``figdata.Thinning``)."""
    prefixes = figdata.prefixes(runs)
    known = [p for p in maps.LAYER_FAMILIES if p in prefixes] + [p for p in prefixes if p not in maps.LAYER_FAMILIES]
    heads = figdata.prefixes(runs, HEAD_KEY)
    thinning = figdata.Thinning(figdata.layer_stride(groups, known, heads), points, figdata.marked_steps(groups))
    data: dict[str, list] = {}
    figures = [f for f in [loss_figure(groups, runs, data, thinning)] if f]
    for prefix in known:
        figures += maps.layer_figures(prefix, groups, thinning, data)
    figures += [f for prefix in heads if (f := maps.head_figure(prefix, groups, thinning, data))]
    keys = figdata.scalar_keys(runs)
    ordered = [k for k in SCALARS if k in keys] + [k for k in keys if k not in SCALARS and k not in dict(LOSS)]
    figures += [f for key in ordered if (f := scalar_figure(key, groups, data, thinning))]
    return figures, data
