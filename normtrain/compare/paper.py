"""The PNG figures for papers, rendered by vl-convert from the report's own Vega-Lite specs: one figure source.

``loss.png`` is the report's loss chart; ``grad_norm_by_layer.png``, ``activations.png`` and
``residual_stream.png`` set the report's by-layer profiles side by side at the first, middle and last logged step;
``update.png`` puts the report's model-update chart beside the per-block update averaged over blocks (drawn by the
same line builder); ``grad_norm_heatmap_<run>.png`` is the report's block × step map panel for one run, on one
colour scale shared by all runs. ``static`` turns a spec into a picture the way the page draws it (data inlined,
the log switch set); vl-convert ships Vega and is allowed no URL, so rendering never touches the network.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from normtrain.compare import figdata, maps, ranges, specs
from normtrain.compare.groups import Group
from normtrain.compare.labels import shortened
from normtrain.compare.runs import Run
from normtrain.util.pngs import write_png
from normtrain.util.spread import mean_sd

WIDTH, PANEL = 820, 300  # pixels (before SCALE) of a full-width chart ("container" in the page), of a panel
SCALE = 1  # pixels per Vega pixel: the sizes matplotlib drew at 100 dpi; 2 is sharper, and 3-4 times slower
CONFIG = {"legend": {"orient": "bottom", "direction": "horizontal", "columns": 3, "labelLimit": 320},
          "title": {"fontSize": 14}}
# (prefix, panel title, log y): the rows of activations.png and residual_stream.png
LAYER_STATS = (
    ("act_std", "activation std (block output)", True),
    ("act_mean", "activation mean (block output)", False),
    ("resid_norm", "residual-stream norm entering the block", True),
    ("attn_entropy", "attention entropy (nats)", False),
    ("attn_logit_max", "max attention logit q·k/√d", False),
)
RESIDUAL_STATS = (
    ("act_rms", "residual-stream rms after the block", True),
    ("act_absmax", "residual-stream max |x| after the block", True),
    ("block_cos", "cosine of block input and output streams", False),
)
CHOSEN_STEPS = ("first logged step", "middle logged step", "last logged step")  # the columns of activations.png
LOSS_KEY = ("line: mean over a group's seeds, band: their min–max; cross: where a run diverged; dashed vertical: "
            "a rollback; dotted: the unigram baseline")
RANGE_KEY = "the y axis spans the runs that did not diverge; a triangle marks where a run left it"
FAILED_KEY = "a group whose runs collapsed or diverged says so in the legend and at the end of its line"
TITLE_CHARS = 60  # the most of a run label shown in a heatmap's title


@dataclass
class Charts:
    """What the report drew: the groups, its figures by id, and the data sets they read."""

    groups: Sequence[Group]
    figures: dict[str, specs.Figure]
    data: dict[str, list]


def static(spec: dict[str, Any], data: dict[str, list], log: bool = False, channel: str = "y",
           domain: Sequence[float] | None = None, **values: Any) -> dict[str, Any]:
    """``spec`` as one picture, drawn as the page first draws it: named data sets inlined, 'container' widths
    fixed, the log switch set (the ``logscale`` parameter, and the scale type of ``channel`` with the fixed
    ``domain``, as report.js's ``withScale`` does). A picture has no controls: each parameter's value (its default,
    or ``values[name]``) is written into the expressions that read it, and a condition on a selection takes the
    value it has with nothing selected; so specs nest in a grid of panels, which parameters cannot."""
    values = {**_defaults(spec), "logscale": log, **values}
    names = re.compile(r"(?<![\w.'])(" + "|".join(map(re.escape, values)) + r")(?![\w'])")

    def walk(node: Any, key: str = "") -> Any:
        if isinstance(node, list):
            return [walk(v, key) for v in node]
        if isinstance(node, str) and key in EXPRESSIONS:
            return names.sub(lambda m: json.dumps(values[m[1]]).replace('"', "'"), node)
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("condition"), dict) and "param" in node["condition"]:
            chosen = node["condition"] if node["condition"].get("empty", True) else node  # nothing selected
            return {"value": chosen["value"]}
        out = {k: walk(v, k) for k, v in node.items() if k != "params"}
        if isinstance(out.get("data"), dict) and set(out["data"]) == {"name"}:
            out["data"] = {"values": copy.deepcopy(data[out["data"]["name"]])}
        if out.get("width") == "container":
            out["width"] = WIDTH
        encoding = out.get("encoding", {}).get(channel)
        if isinstance(encoding, dict) and encoding.get("type") == "quantitative":
            out["encoding"][channel] = _scaled(encoding, log, domain)
        return out

    return walk(spec)


EXPRESSIONS = {"filter", "calculate", "test", "expr"}  # the keys whose strings are Vega expressions


def _defaults(node: Any) -> dict[str, Any]:
    """Every variable parameter's value (``{"name": "band", "value": "minmax"}``) in the spec."""
    if isinstance(node, list):
        return {k: v for item in node for k, v in _defaults(item).items()}
    if not isinstance(node, dict):
        return {}
    found = {p["name"]: p["value"] for p in node.get("params", []) if "value" in p and "select" not in p}
    return {**{k: v for item in node.values() for k, v in _defaults(item).items()}, **found}


def _scaled(encoding: dict[str, Any], log: bool, domain: Sequence[float] | None) -> dict[str, Any]:
    scale = {**encoding.get("scale", {}), "type": "log" if log else "linear"}
    if log:
        scale.pop("zero", None)
        scale["nice"] = False  # a nice log domain pads to whole decades
    if domain:
        scale.update(domain=list(domain), clamp=True)
    return {**encoding, "scale": scale}


def render(spec: dict[str, Any], path: Path) -> Path:
    """The spec as a PNG file. No URL is allowed: everything the picture shows is in the spec, and a spec that
    asked for more fails here rather than fetch it."""
    import vl_convert

    png = vl_convert.vegalite_to_png(spec, scale=SCALE, config=CONFIG, allowed_base_urls=[])
    return write_png(path, png, method=2)  # octree: twice as fast as median cut on these flat colours


def not_recorded(what: str) -> dict[str, Any]:
    """A panel that says what is missing."""
    return {"data": {"values": [{}]}, "width": PANEL, "height": 200, "view": {"stroke": "#ddd"},
            "mark": {"type": "text", "color": "#666", "fontSize": 13},
            "encoding": {"text": {"value": [what, "not recorded"]}, "x": {"value": PANEL / 2}, "y": {"value": 100}}}


def loss(c: Charts, path: Path) -> list[str]:
    """The report's loss chart: train (solid) and validation (dashed), its seed bands, diverged and rollback marks."""
    fig = c.figures.get("fig-loss")
    if fig is None:
        render(not_recorded("train/loss and val/loss"), path)
        return ["loss.png: no finite train or validation loss logged by any run"]
    key = [LOSS_KEY, *([RANGE_KEY] if "loss:edges" in fig.uses else []),
           *([FAILED_KEY] if any(layer.get("name") == specs.FAILURES for layer in fig.spec["layer"]) else [])]
    subtitle = key[0] if len(key) == 1 else key
    render({**static(fig.spec, c.data, fig.log), "title": {"text": fig.title, "subtitle": subtitle}}, path)
    return []


def chosen_steps(records: Sequence[dict], n: int) -> list[int]:
    """The first, (middle,) last logged step of a per-layer data set (its first and last when ``n`` is 2)."""
    steps = sorted({s for r in records for s, v in zip(r["step"], r["v"], strict=True) if v is not None})
    picks = [steps[0], steps[len(steps) // 2], steps[-1]] if steps else []
    return picks[:: 2] if n == 2 else picks


def profile_row(c: Charts, prefix: str, titles: Sequence[str], log: bool) -> list[dict[str, Any]]:
    """The report's by-layer profile of ``prefix`` at each chosen step, one panel each, titled ``titles[i]``."""
    fig = c.figures[f"fig-{specs.slug(prefix)}-profile"]
    steps = chosen_steps(c.data[f"layers:{prefix}"], len(titles))
    return [{**static(fig.spec, c.data, log, at=at), "width": PANEL, "height": 220,
             "title": {"text": title.format(step=at).split("\n"), "fontSize": 12}}
            for at, title in zip(steps, titles, strict=True)]


def grad_norm_by_layer(c: Charts, path: Path) -> list[str]:
    """Per-layer gradient norm at the first logged step (Xiong et al. 2020, Fig. 3) and at the last one."""
    if "fig-grad-norm-profile" not in c.figures:
        render(not_recorded("grad_norm/layer_i"), path)
        return ["grad_norm_by_layer.png: no run recorded a finite grad_norm/layer_i"]
    titles = [f"Gradient norm per block at the {when} (step {{step}})" for when in ("first logged step",
                                                                                   "last logged step")]
    panels = profile_row(c, "grad_norm", titles, log=True)
    render({"hconcat": panels, "resolve": {"scale": {"y": "shared"}}}, path)
    return []


def activations(c: Charts, path: Path, stats: Sequence = LAYER_STATS, switch: str = "monitor.activations") -> list[str]:
    """Per-layer statistics against layer: one row of panels per statistic recorded, one column per chosen step
    (the first, middle and last logged), one line per group (the mean over its seeds, as in the report)."""
    recorded = [s for s in stats if f"fig-{specs.slug(s[0])}-profile" in c.figures]
    missing = [f"{path.name}: {s[0]}/layer_i not recorded by any run" for s in stats if s not in recorded]
    if not recorded:
        render(not_recorded(f"these per-layer statistics ({switch})"), path)
        return [f"{path.name}: none of {', '.join(s[0] + '/layer_i' for s in stats)} recorded by any run"]
    rows = [{"hconcat": profile_row(c, prefix, [f"{title}\n{when} (step {{step}})" for when in CHOSEN_STEPS], log),
             "resolve": {"scale": {"y": "shared"}}} for prefix, title, log in recorded]
    render({"vconcat": rows}, path)
    return missing


def block_mean(run: Run, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, the mean over blocks of ``prefix/layer_i`` at each, over its positive finite values; NaN if none)."""
    steps, v = run.layer_matrix(prefix)
    mean, _, _ = mean_sd(np.where(v > 0, v, np.nan), axis=1)
    return steps, mean


def update(c: Charts, path: Path) -> list[str]:
    """The model update ‖F(x,θt) − F(x,θ0)‖ on a probe batch (DeepNet; the report's chart) and the per-step
    relative parameter update ‖Δθ‖/‖θ‖ averaged over blocks, against step. A panel with no data says so."""
    data = dict(c.data)
    data["update:mean:groups"], data["update:mean:runs"] = figdata.line_records(
        c.groups, "update/layer_i", None, read=lambda run: block_mean(run, "update"))
    shown = [g for g in c.groups if any(r["g"] == g.label for r in data["update:mean:groups"])]
    yrange = specs.y_range("update:mean", c.groups, data, [])
    relative = specs.line_spec("update:mean", shown, "‖Δθ‖/‖θ‖", kinds=False, extra=[], yrange=yrange)
    output = c.figures.get("fig-update-output-change")
    panels = [(output and output.spec, "Model update ‖F(x,θt) − F(x,θ0)‖ (probe batch)", "update/output_change",
               "monitor.output_change"),
              (shown and relative, "Relative update ‖Δθ‖/‖θ‖, mean over blocks", "update/layer_i",
               "monitor.update_ratio")]
    charts, notes = [], []
    for spec, title, key, switch in panels:
        if not spec:
            charts.append(not_recorded(f"{key} (switch: {switch})"))
            notes.append(f"update.png: {key} not recorded by any run")
            continue
        charts.append({**static(spec, data, log=True), "width": 420, "height": 280, "title": title})
    render({"hconcat": charts}, path)
    return notes


def grad_norm_heatmaps(runs: Sequence[Run], slugs: Sequence[str], out: Path) -> tuple[list[Path], list[str]]:
    """``grad_norm_heatmap_<slug>.png`` per run: the report's map panel (layer × step) of that run alone, log colour
    on one scale shared by the runs that did not diverge (the 1st to the 99th percentile of their pooled values, as
    the report's maps open), so one colour means one gradient norm in every file and a diverged run's 1e5 cannot
    wash the others out; where every run diverged, the scale of them all."""
    records = {id(r): figdata.layer_records([Group(r.label, [r])], "grad_norm", figdata.UNCAPPED) for r in runs}
    if not any(ranges.colour_domains(recs).get("log") for recs in records.values()):
        return [], ["grad_norm_heatmap_*.png: no run recorded grad_norm/layer_i"]
    pooled = [rec for r in runs if ranges.healthy(r) for rec in records[id(r)]] or [
        rec for recs in records.values() for rec in recs]
    shared = ranges.colour_domains(pooled).get("log")
    paths, notes = [], []
    for run, name in zip(runs, slugs, strict=True):
        own = ranges.colour_domains(records[id(run)]).get("log")
        if own is None:
            notes.append(f"grad_norm_heatmap: {run.label}: no positive finite grad_norm/layer_i recorded")
            continue
        path = out / f"grad_norm_heatmap_{name}.png"
        try:
            paths.append(render(heatmap(run, records[id(run)], shared or own), path))
        except Exception as err:  # one run's odd data (or file) costs its own map, never the others'
            notes.append(f"{path.name} ({run.label}) could not be drawn ({type(err).__name__}: {err})")
    return paths, notes


def heatmap(run: Run, records: list[dict], domain: Sequence[float]) -> dict[str, Any]:
    """One run's gradient-norm map, a red dashed line where it diverged."""
    panel = maps.heatmap_panel("‖∇ block‖", 1 + max(r["layer"] for r in records))
    size = {"width": 700, "height": panel.pop("height") + 40}
    panel.pop("width")
    layers = [{"transform": maps.HEATMAP_STEPS, **panel}]
    if run.status == "diverged" and run.diverged_at is not None:
        layers.append({"data": {"values": [{"step": run.diverged_at, "text": " diverged"}]},
                       "mark": {"type": "rule", "color": "red", "strokeDash": [5, 3], "strokeWidth": 1.5},
                       "encoding": {"x": {"field": "step", "type": "quantitative"}}})
        layers.append({**layers[-1], "mark": {"type": "text", "color": "red", "align": "left", "baseline": "top",
                                              "dx": 3, "y": 2}, "encoding": {**layers[-1]["encoding"],
                                                                             "text": {"field": "text"}}})
    title = f"Gradient norm per block: {shortened(run.label, TITLE_CHARS)}"
    spec = {"data": {"values": records}, "params": [specs.LOG_PARAM], "title": title, **size, "layer": layers}
    return static(spec, {}, log=True, channel="color", domain=domain)


FILES = (("loss.png", loss), ("grad_norm_by_layer.png", grad_norm_by_layer), ("activations.png", activations),
         ("residual_stream.png", partial(activations, stats=RESIDUAL_STATS,
                                         switch="monitor.residual_stats, monitor.block_cos")),
         ("update.png", update))
