"""The per-layer and per-head figures: for every per-layer family (``<prefix>/layer_i``) a block × step heatmap and
a by-layer profile at a chosen step, and for every per-head family (``<prefix>/layer_i/head_j``) a block × head
heatmap at a chosen step.

A heatmap is one panel per group, all on one colour scale by default: the 1st to the 99th percentile of the values
of the runs that did not diverge (normtrain.compare.ranges), so that a colour means the same value in every panel
and a diverged run's 1e8 cannot paint the healthy panels one flat colour; a control gives each panel its own scale
(its own percentiles), to see the pattern inside one panel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from normtrain.compare import figdata, ranges
from normtrain.compare.encodings import (
    LOG_PARAM,
    Figure,
    auto_log,
    color,
    positive,
    slug,
    styled,
    tip,
    x_step,
    y_value,
)
from normtrain.compare.groups import Group
from normtrain.util.numbers import number

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
COLOUR_CAPTION = ("Every panel is on one colour scale (its legend), from the 1st to the 99th percentile of the values "
                  "of the runs that did not diverge{range}, so a colour means the same value in every panel; a "
                  "diverged run's cells beyond it take its end colours. 'each panel its own' gives every panel the "
                  "1st to 99th percentile of its own values instead (compare colours within a panel only)")

HEATMAP_STEPS = [{"flatten": ["step", "v"]},  # each cell runs from its step to the next logged one
                 {"window": [{"op": "lead", "field": "step", "as": "next"},
                             {"op": "lag", "field": "step", "as": "prev"}],
                  "groupby": ["g", "layer"], "sort": [{"field": "step"}]},
                 {"calculate": "datum.next != null ? datum.next : datum.step + (datum.prev != null ? "
                               "datum.step - datum.prev : 1)", "as": "end"},
                 {"filter": positive("datum.v")}]


def heatmap_panel(unit: str, n_layers: int) -> dict[str, Any]:
    """One block × step map of records flattened by ``HEATMAP_STEPS``: the report's panels, and each run's PNG."""
    tooltip = [tip("g", "group", None), tip("layer", "layer", "d"), tip("step", "step", "d"), tip("v", unit)]
    return {"width": 290, "height": max(48, min(14 * n_layers, 220)), "mark": "rect",
            "encoding": {"x": x_step(), "x2": {"field": "end"},
                         "y": {"field": "layer", "type": "ordinal", "sort": "descending", "title": "layer"},
                         "color": {"field": "v", "type": "quantitative", "title": unit,
                                   "scale": {"scheme": "viridis", "clamp": True}},
                         "tooltip": tooltip}}


def colour_domains(shown: Sequence[Group], records: list[dict]) -> dict[str, Any]:
    """Each panel's own colour range and the shared one, of the groups whose runs all did not diverge."""
    return ranges.panel_domains(records, [g.label for g in shown],
                                {g.label for g in shown if all(map(ranges.healthy, g.runs))})


def colour_caption(domains: dict[str, Any], log: bool) -> str:
    """COLOUR_CAPTION with the shared range it opens with."""
    shared = domains["shared"].get("log" if log else "linear") or domains["shared"].get("linear")
    where = f" ({number(shared[0])} to {number(shared[1])} here)" if shared else ""
    return COLOUR_CAPTION.format(range=where)


def panels(shown: Sequence[Group], records: list[dict], panel: dict[str, Any], transform: list[dict],
           domains: dict[str, Any]) -> dict[str, Any]:
    """One ``panel`` per group in ``shown`` (its records alone, then ``transform``; titled by its label and how its
    runs failed), side by side, three to a row, each with a colour scale and legend of its own that the ``colours``
    control sets to the shared range of ``domains`` (the default) or its own; the steps (x) and blocks (y)
    shared."""
    cells = []
    for group in shown:
        scale = {**panel["encoding"]["color"]["scale"],
                 "domain": ranges.colour_expr(domains["panel"][group.label], domains["shared"])}
        title = f"{group.label} ({group.failure})" if group.failure else group.label
        cells.append({**panel, "title": {"text": title, "limit": 330, "fontSize": 11, "fontWeight": "normal"},
                      "transform": [{"filter": {"field": "g", "equal": group.label}}, *transform],
                      "encoding": {**panel["encoding"], "color": {**panel["encoding"]["color"], "scale": scale}}})
    return {"concat": cells, "columns": min(3, len(shown)),
            "resolve": {"scale": {"x": "shared", "y": "shared", "color": "independent"}}}


def _at_step(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The "at step ≤" slider (at the last step to start) and the transforms that keep each group's last logged
    step at or before it: the profile's and the per-head map's."""
    steps = [s for r in records for s in r["step"]]
    last, every = max(steps, default=0), math.gcd(*steps) or 1  # the coarsest slider step that reaches them all
    return {"params": [LOG_PARAM, {"name": "at", "value": last, "bind": {
                "input": "range", "min": 0, "max": last, "step": every, "name": "at step ≤ "}}],
            "transform": [{"flatten": ["step", "v"]}, {"filter": f"datum.step <= at && {positive('datum.v')}"},
                          {"joinaggregate": [{"op": "max", "field": "step", "as": "shown"}], "groupby": ["g"]},
                          {"filter": "datum.step == datum.shown"}]}


def profile_spec(name: str, records: list[dict], unit: str, shown: Sequence[Group]) -> dict[str, Any]:
    """Each group's line against block at the chosen step (the slider; the PNGs set ``at``), in its colour, its
    own dash and its own hollow marker, so that a line drawn exactly over another still shows."""
    base = {"x": {"field": "layer", "type": "quantitative", "title": "layer (0 = next to the embedding)",
                  "axis": {"tickMinStep": 1}}, "y": y_value("v", unit), "color": color(shown)}
    tooltip = [tip("g", "group", None), tip("layer", "layer", "d"), tip("shown", "step", "d"), tip("v", unit)]
    return {"data": {"name": name}, **_at_step(records), "width": "container", "height": 280, "layer": [
        {"mark": {"type": "line", "strokeWidth": 1.8}, "encoding": {**base, "strokeDash": styled(shown, "strokeDash")}},
        {"mark": {"type": "point", "filled": False, "size": 55, "strokeWidth": 1.6},
         "encoding": {**base, "shape": styled(shown, "shape"), "tooltip": tooltip}}]}


def layer_figures(prefix: str, groups: Sequence[Group], thinning: figdata.Thinning,
                  data: dict[str, list]) -> list[Figure]:
    """A heatmap (block × step, one panel per group) and a by-layer profile with a step slider."""
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
    domains = colour_domains(shown, records)
    heatmap = {"data": {"name": name}, "params": [LOG_PARAM, ranges.COLOURS_PARAM],
               **panels(shown, records, heatmap_panel(unit, n_layers), HEATMAP_STEPS, domains)}
    profile = profile_spec(name, records, unit, shown)
    key = f"{prefix}/layer_i"
    return [
        Figure(f"fig-{slug(prefix)}-map", f"{title}: by block and step",
               f"{key}, block (row, 0 = next to the embedding) × logged step, mean over each group's seeds. "
               f"{colour_caption(domains, log)}. A gap is a non-finite value.",
               heatmap, [name], hint="hover a cell for its value", log=log, scale="color"),
        Figure(f"fig-{slug(prefix)}-profile", f"{title}: by block",
               f"{key} against block at the chosen step (the slider; each group's last logged step at or before "
               "it whose values are finite), mean over each group's seeds.", profile, [name],
               hint="hover a point for its value; the slider below picks the step", log=log),
    ]


def head_figure(prefix: str, groups: Sequence[Group], thinning: figdata.Thinning,
                data: dict[str, list]) -> Figure | None:
    """A block × head map at a chosen step (the slider), one panel per group: which heads grow, where the
    block × step map shows only their max."""
    name = f"heads:{prefix}"
    records = figdata.head_records(groups, prefix, thinning)
    if not records:
        return None
    data[name] = records
    title, unit = HEAD_FAMILIES.get(prefix, (f"{prefix}/layer_i/head_j", prefix))
    n_layers, n_heads = (1 + max(r[k] for r in records) for k in ("layer", "head"))
    shown = [g for g in groups if any(r["g"] == g.label for r in records)]
    tooltip = [tip("g", "group", None), tip("layer", "layer", "d"), tip("head", "head", "d"),
               tip("shown", "step", "d"), tip("v", unit)]
    panel = {"width": max(60, min(22 * n_heads, 290)), "height": max(48, min(14 * n_layers, 220)), "mark": "rect",
             "encoding": {"x": {"field": "head", "type": "ordinal", "title": "head", "axis": {"labelAngle": 0}},
                          "y": {"field": "layer", "type": "ordinal", "sort": "descending", "title": "layer"},
                          "color": {"field": "v", "type": "quantitative", "title": unit,
                                    "scale": {"scheme": "viridis", "clamp": True}},
                          "tooltip": tooltip}}
    at, domains = _at_step(records), colour_domains(shown, records)
    spec = {"data": {"name": name}, "params": [*at["params"], ranges.COLOURS_PARAM],
            **panels(shown, records, panel, at["transform"], domains)}
    return Figure(f"fig-{slug(prefix)}-heads", f"{title}: by block and head",
                  f"{prefix}/layer_i/head_j, block (row, 0 = next to the embedding) × head at the chosen step (the "
                  "slider; each group's last logged step at or before it), mean over each group's seeds. "
                  f"{colour_caption(domains, False)}; the ranges are over all steps.", spec, [name],
                  hint="hover a cell for its value; the slider below picks the step", scale="color")
