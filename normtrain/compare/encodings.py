"""The pieces every figure of the report is made of: the ``Figure`` the page draws, and the Vega-Lite encodings the
line charts, the maps and the probe's charts share (one colour per group, step on x, the tooltips, the log switch).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from normtrain.compare.groups import Group

FORMAT = ".4~g"
LOG_PARAM = {"name": "logscale", "value": False}  # the page sets it with the scale type, for the filters below
SHAPES = ("circle", "square", "triangle-up", "diamond", "triangle-down", "cross", "triangle-right", "wye",
          "triangle-left")
DASHES = ([1, 0], [7, 3], [2, 2], [9, 3, 2, 3], [4, 4], [1, 4], [12, 4], [5, 2, 1, 2], [3, 6])


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
    scale: str = "y"  # the Vega scale the log switch changes ("y", or "color" for heatmaps: every panel's)
    domains: dict[str, list[float]] = field(default_factory=dict)  # fixed domains per scale type (none: the spec's)
    switch: bool = True  # whether the page offers the log switch (bars from zero have no log form)

    def meta(self) -> dict[str, Any]:
        return {"id": self.id, "spec": self.spec, "uses": self.uses, "log": self.log, "scale": self.scale,
                "domains": self.domains, "switch": self.switch}


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-").lower()


def auto_log(values: Sequence[float | None]) -> bool:
    """A log scale for positive values that span more than two decades."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) > 100


def color(groups: Sequence[Group], symbol: str = "stroke") -> dict[str, Any]:
    """Each group in its colour, in the fixed group order; the legend lists exactly ``groups``. ``symbol``: the
    legend's swatch, a stroke for lines, ``square`` for bars and ``circle`` for points (a stroke swatch of a filled
    mark is drawn without colour)."""
    swatch = ({"symbolType": "stroke", "symbolStrokeWidth": 3} if symbol == "stroke"
              else {"symbolType": symbol, "symbolSize": 120})
    return {"field": "g", "type": "nominal", "title": None,
            "scale": {"domain": [g.label for g in groups], "range": [g.color for g in groups]},
            "legend": {"labelLimit": 320, "symbolLimit": 0, "symbolOpacity": 1, **swatch, **failures(groups)}}


def failures(groups: Sequence[Group]) -> dict[str, str]:
    """A legend's ``labelExpr`` that says how a group's runs failed beside its label ("post (collapsed)"); none
    when no group failed."""
    marked = [(g.label, f"{g.label} ({g.failure})") for g in groups if g.failure]
    if not marked:
        return {}
    cases = "".join(f"datum.label === {json.dumps(k)} ? {json.dumps(v)} : " for k, v in marked)
    return {"labelExpr": cases + "datum.label"}


def styled(groups: Sequence[Group], channel: str) -> dict[str, Any]:
    """Each group its own marker shape (``shape``) or dash (``strokeDash``), cycled, so that a line drawn exactly
    over another (Post-LN's and DeepNorm's activation std, both normalized after the residual sum) still shows;
    its legend is the colour's (Vega-Lite merges the two: one entry per group, in its colour and style)."""
    styles = SHAPES if channel == "shape" else DASHES
    return {"field": "g", "type": "nominal", "title": None, "legend": color(groups)["legend"],
            "scale": {"domain": [g.label for g in groups],
                      "range": [styles[i % len(styles)] for i in range(len(groups))]}}


def x_step() -> dict[str, Any]:
    return {"field": "step", "type": "quantitative", "title": "step"}


def y_value(field_: str, title: str) -> dict[str, Any]:
    return {"field": field_, "type": "quantitative", "title": title, "scale": {"zero": False}}


def positive(expr: str) -> str:
    """A filter: finite, and above 0 while the log switch is on."""
    return f"isValid({expr}) && isFinite({expr}) && (!logscale || {expr} > 0)"


def tip(field_: str, title: str, fmt: str | None = FORMAT) -> dict[str, Any]:
    """A tooltip line: a number with ``fmt``, or text (``fmt=None``).

    Text gets ``"format": ""``: Vega-Lite (6.4) reads an unformatted text field of a ``nearest`` hover layer from the
    Voronoi cell rather than from the point under it, and every line chart's tooltip said "group undefined"."""
    if fmt is None:
        return {"field": field_, "title": title, "type": "nominal", "format": ""}
    return {"field": field_, "title": title, "type": "quantitative", "format": fmt}
