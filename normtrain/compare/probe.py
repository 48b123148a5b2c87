"""The probe's figures in the report, for every run whose folder holds ``probe/probe.json`` (normtrain-probe):
the eval loss with each block skipped (bars), the stream's per-block cosine, rms and max |x| at the end of
training, and each norm's input → output scatter with its fitted γ·tanh(α·x), one panel per norm.

Read from JSON only (no torch), like the rest of compare. Each run is drawn in its group's colour and the legends
list only the groups with a probed run; seeds of a group are not averaged (a probe is one trained model), the
tooltip names the run and its seed, and the page lists the probed runs above the figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from normtrain.compare import figdata
from normtrain.compare.encodings import LOG_PARAM, Figure, color, positive, tip, y_value
from normtrain.compare.figdata import seed_list
from normtrain.compare.groups import Group

STREAM = (("block_cos", "Probe: cosine of each block's input and output streams", "cos(in, out)", False),
          ("act_rms", "Probe: residual-stream rms after each block", "rms", True),
          ("act_absmax", "Probe: largest |x| in the residual stream after each block", "max |x|", True))
POINT_BUDGET = 40_000  # scatter points in one report, over every probed run and norm


def probed(groups: Sequence[Group]) -> list[tuple[Group, Any]]:
    return [(g, r) for g in groups for r in g.runs if r.probe]


def probed_groups(groups: Sequence[Group]) -> list[Group]:
    """The groups with a probed run, in the fixed order: the legends' entries."""
    return [g for g in groups if any(r.probe for r in g.runs)]


def layer_rows(pairs: Sequence[tuple[Group, Any]]) -> list[dict[str, Any]]:
    keys = ("skip_val_loss", "skip_delta", "block_cos", "act_rms", "act_absmax")
    return [{"g": g.label, "run": r.label, "seed": seed_list([r]), "layer": row["layer"],
             "full": figdata.num(r.probe["val_loss"]),
             **{k: figdata.num(row[k]) for k in keys}} for g, r in pairs for row in r.probe["layers"]]


def norm_rows(pairs: Sequence[tuple[Group, Any]]) -> list[dict[str, Any]]:
    """Per run and norm: a thinned sample of (x, y) pairs ("sample") and the fitted curve ("fit")."""
    n_norms = sum(len(r.probe["norms"]) for _, r in pairs) or 1
    keep = max(50, min(400, POINT_BUDGET // n_norms))
    rows = []
    for g, r in pairs:
        for norm in r.probe["norms"]:
            pick = figdata.thin(len(norm["x"]), keep)
            fit = norm["fit"]
            base = {"g": g.label, "run": r.label, "seed": seed_list([r]), "norm": norm["name"],
                    "alpha": figdata.num(fit["alpha"]),
                    "r2": figdata.num(fit["r2"])}
            rows.append({**base, "k": "sample", "x": figdata.nums([norm["x"][i] for i in pick]),
                         "y": figdata.nums([norm["y"][i] for i in pick])})
            rows.append({**base, "k": "fit", "x": norm["curve"]["x"], "y": norm["curve"]["y"]})
    return rows


def skip_figure(groups: Sequence[Group]) -> Figure:
    runs = [r.label for _, r in probed(groups)]
    tooltip = [tip("g", "group", None), tip("run", "run", None), tip("seed", "seed", None),
               tip("layer", "skipped block", "d"), tip("skip_val_loss", "eval loss"),
               tip("skip_delta", "− full model's"), tip("full", "full model")]
    spec = {"data": {"name": "probe:layers"}, "params": [LOG_PARAM],
            "transform": [{"filter": positive("datum.skip_delta")}], "width": "container", "height": 300,
            "mark": {"type": "bar"},
            "encoding": {"x": {"field": "layer", "type": "ordinal", "title": "skipped block (0 = next to the "
                               "embedding)", "axis": {"labelAngle": 0}},
                         "xOffset": {"field": "run", "type": "nominal", "sort": runs},
                         "y": {**y_value("skip_delta", "eval loss − full model's (nats)"), "scale": {"zero": True}},
                         "color": color(probed_groups(groups), "square"), "tooltip": tooltip}}
    caption = ("The eval loss on the run's validation windows with each block skipped (replaced by the identity: "
               "the stream passes through unchanged), minus the full model's: which blocks the trained model uses. "
               "One bar per probed run, in its group's colour.")
    return Figure("fig-probe-skip", "Probe: eval loss with each block skipped", caption, spec, ["probe:layers"],
                  hint="hover a bar for its values", switch=False)  # bars start at 0; a skip can lower the loss


def stream_figure(key: str, title: str, unit: str, log: bool, groups: Sequence[Group]) -> Figure:
    spec = {"data": {"name": "probe:layers"}, "params": [LOG_PARAM],
            "transform": [{"filter": positive(f"datum.{key}")}], "width": "container", "height": 260,
            "mark": {"type": "line", "point": True},
            "encoding": {"x": {"field": "layer", "type": "quantitative", "title": "block", "axis": {"tickMinStep": 1}},
                         "y": y_value(key, unit), "color": color(probed_groups(groups)), "detail": {"field": "run"},
                         "tooltip": [tip("g", "group", None), tip("run", "run", None), tip("seed", "seed", None),
                                     tip("layer", "block", "d"), tip(key, unit)]}}
    caption = (f"{unit} per block of the trained model (normtrain-probe), over the run's validation windows; one "
               "line per probed run.")
    return Figure(f"fig-probe-{key.replace('_', '-')}", title, caption, spec, ["probe:layers"],
                  hint="hover a point for its value", log=log)


def norms_figure(groups: Sequence[Group], names: list[str]) -> Figure:
    flat = [{"flatten": ["x", "y"]}]
    tips = [tip("g", "group", None), tip("run", "run", None), tip("seed", "seed", None), tip("norm", "norm", None),
            tip("alpha", "fitted α"), tip("r2", "R²")]
    shown = probed_groups(groups)
    spec = {"data": {"name": "probe:norms"}, "transform": flat,
            "facet": {"field": "norm", "type": "nominal", "title": None, "sort": names,
                      "header": {"labelLimit": 220, "labelFontSize": 11}},
            "columns": min(4, len(names)), "resolve": {"scale": {"x": "independent", "y": "independent"}},
            "spec": {"width": 200, "height": 160, "layer": [
                {"transform": [{"filter": "datum.k == 'sample'"}],
                 "mark": {"type": "point", "filled": True, "size": 6, "opacity": 0.35},
                 "encoding": {"x": {"field": "x", "type": "quantitative", "title": "input x"},
                              "y": {"field": "y", "type": "quantitative", "title": "output before γ, β"},
                              "color": color(shown, "circle"), "tooltip": tips}},
                {"transform": [{"filter": "datum.k == 'fit'"}], "mark": {"type": "line", "strokeWidth": 1.5},
                 "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"},
                              "color": color(shown, "circle"), "detail": {"field": "run"}, "tooltip": tips}}]}}
    caption = ("Each norm's input against its output before the affine part (γ, β), per feature, on a sample of "
               "tokens (Zhu et al. 2025, Fig. 2), and the least-squares γ·tanh(α·x) through them (the line): the "
               "S-curve DyT is built on, and how far each trained norm is from it.")
    return Figure("fig-probe-norms", "Probe: each norm's input → output", caption, spec, ["probe:norms"],
                  hint="hover a point for the fitted α and R²")


def build(groups: Sequence[Group], data: dict[str, list]) -> list[Figure]:
    """The probe's figures and their data sets (into ``data``); none when no run was probed."""
    pairs = probed(groups)
    if not pairs:
        return []
    data["probe:layers"] = layer_rows(pairs)
    figures = [skip_figure(groups), *(stream_figure(*s, groups) for s in STREAM)]
    names = list(dict.fromkeys(n["name"] for _, r in pairs for n in r.probe["norms"]))
    if names:
        data["probe:norms"] = norm_rows(pairs)
        figures.append(norms_figure(groups, names))
    return figures
