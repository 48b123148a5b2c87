"""Page size of one self-contained interactive loss chart (groups × 3 seeds: mean line, min-max band, hover, zoom)
built with plotly, bokeh, altair and a hand-written Vega-Lite page, each with its JavaScript inlined.

    pip install plotly bokeh altair vl-convert-python
    python experiments/compare_example/library_sizes.py [GROUPS=9] [POINTS=30]

How normtrain-compare's report library was chosen (see this folder's README); not part of the package.
"""

from __future__ import annotations

import base64
import gzip
import json
import sys
import tempfile
from pathlib import Path

import numpy as np


def curves(n_groups: int, points: int, seeds: int = 3):
    rng = np.random.default_rng(0)
    steps = np.arange(points) * 10
    groups = []
    for g in range(n_groups):
        runs = np.array([3 + 2.5 * np.exp(-steps / (200 + 30 * g)) + 0.05 * rng.standard_normal(points)
                         for _ in range(seeds)])
        groups.append((f"group {g}", runs.mean(0), runs.min(0), runs.max(0)))
    return steps, groups


def plotly_page(steps, groups, path: Path) -> None:
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, mean, lo, hi in groups:
        fig.add_trace(go.Scatter(x=steps, y=hi, line={"width": 0}, showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=steps, y=lo, fill="tonexty", line={"width": 0}, showlegend=False,
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=steps, y=mean, name=name))
    scale = [{"label": t, "method": "relayout", "args": [{"yaxis.type": t}]} for t in ("log", "linear")]
    fig.update_layout(updatemenus=[{"buttons": scale}])
    fig.write_html(path, include_plotlyjs=True, full_html=True)


def bokeh_page(steps, groups, path: Path) -> None:
    from bokeh.embed import file_html
    from bokeh.models import HoverTool
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    p = figure(width=800, height=400, tools="pan,wheel_zoom,box_zoom,reset,save")
    for name, mean, lo, hi in groups:
        p.varea(x=steps, y1=lo, y2=hi, alpha=0.2)
        p.line(x=steps, y=mean, legend_label=name)
    p.add_tools(HoverTool())
    path.write_text(file_html(p, INLINE, "loss"))


def rows(steps, groups) -> list[dict]:
    return [{"step": int(s), "group": name, "mean": float(m[i]), "lo": float(lo[i]), "hi": float(hi[i])}
            for name, m, lo, hi in groups for i, s in enumerate(steps)]


def altair_page(steps, groups, path: Path) -> None:
    import altair as alt

    base = alt.Chart(alt.Data(values=rows(steps, groups))).encode(x="step:Q", color="group:N")
    band = base.mark_area(opacity=0.2).encode(y="lo:Q", y2="hi:Q")
    line = base.mark_line().encode(y="mean:Q", tooltip=["group:N", "step:Q", "mean:Q"])
    (band + line).interactive().save(str(path), inline=True)


def vegalite_pages(steps, groups, plain: Path, packed: Path) -> int:
    """The same spec with vl-convert's bundle inlined as is, and gzipped + base64 (as normtrain inlines it)."""
    import vl_convert

    quantitative = lambda f: {"field": f, "type": "quantitative"}  # noqa: E731
    spec = {"data": {"values": rows(steps, groups)}, "width": 800,
            "encoding": {"x": quantitative("step"), "color": {"field": "group", "type": "nominal"}},
            "layer": [{"mark": {"type": "area", "opacity": 0.2},
                       "encoding": {"y": quantitative("lo"), "y2": {"field": "hi"}}},
                      {"mark": "line", "params": [{"name": "zoom", "select": "interval", "bind": "scales"}],
                       "encoding": {"y": quantitative("mean"), "tooltip": [{"field": "group"}, {"field": "mean"}]}}]}
    js = vl_convert.javascript_bundle()
    body = f"<script>vegaEmbed('#v', {json.dumps(spec, separators=(',', ':'))})</script>"
    plain.write_text(f"<!doctype html><meta charset=utf-8><div id=v></div><script>{js}</script>{body}")
    gz = base64.b64encode(gzip.compress(js.encode(), 9)).decode()
    packed.write_text(f"<!doctype html><meta charset=utf-8><div id=v></div><script type=text/plain>{gz}</script>"
                      f"{body}")
    return len(js)


def main(argv: list[str]) -> None:
    n_groups, points = (int(argv[0]), int(argv[1])) if len(argv) == 2 else (9, 30)
    steps, groups = curves(n_groups, points)
    out = Path(tempfile.mkdtemp(prefix="library-sizes-"))
    plotly_page(steps, groups, out / "plotly.html")
    bokeh_page(steps, groups, out / "bokeh.html")
    altair_page(steps, groups, out / "altair.html")
    js = vegalite_pages(steps, groups, out / "vegalite.html", out / "vegalite_gz.html")
    for name in ("plotly", "bokeh", "altair", "vegalite", "vegalite_gz"):
        print(f"{name:12s} {(out / f'{name}.html').stat().st_size / 1e6:6.3f} MB")
    print(f"Vega + Vega-Lite + vega-embed: {js / 1e6:.3f} MB; pages in {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
