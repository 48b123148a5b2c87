"""Issue 38: one diverged run beside healthy ones. The y axis of a line chart spans the runs that did not diverge (a
triangle at the edge where another leaves it, a control to widen it), in the page and in loss.png; each heatmap
panel has its own colour scale (and the shared one comes from the healthy runs)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from synthetic_runs import write_sweep

from normtrain.compare import compare, paper, ranges, report_page
from normtrain.compare.figdata import num


def series(run: str, values: list[float | None], g: str | None = None) -> dict:
    return {"g": g or run, "k": "train", "run": run, "step": list(range(0, 10 * len(values), 10)), "v": values}


def test_the_y_range_spans_the_healthy_runs_and_marks_where_another_leaves_it():
    records = [series("a", [5.6, 3.4, 3.1]), series("b", [5.9, 3.5, 3.36]), series("c", [5.7, 9490.0, None])]
    found = ranges.y_range(records, {"a", "b"})
    lo, hi = found.healthy["linear"]
    assert 2.9 < lo < 3.1 and 5.9 < hi < 6.1  # 3.1 to 5.9, and a little room
    assert found.every["linear"][1] > 9490  # 'all runs'
    assert found.edges == [{"g": "c", "k": "train", "run": "c", "step": 10, "v": 9490.0, "edge": "above"}]
    assert hi > found.limits["linear"][1] > 5.9  # the triangle sits in the room above the healthy lines

    down = ranges.y_range([*records[:2], series("d", [5.0, 1e-3])], {"a", "b"})
    assert down.edges[0]["edge"] == "below" and down.healthy["log"][0] > 1e-3
    assert ranges.y_range(records[:2] + [series("e", [4.0, 3.2, None])], {"a", "b"}) is None  # stays inside
    assert ranges.y_range(records, set()) is None  # no healthy run: the axis Vega picks


def exploded(root):
    return write_sweep(root, placements=("pre", "post", "none"), norms=("rmsnorm",), seeds=(0, 1), diverged=(),
                       collapsed=(), undertrained=(), exploded=("none", "rmsnorm", 0))


def figures(html: str) -> tuple[dict, dict]:
    payload = json.loads(re.search(r'id="normtrain-data">(.*?)</script>', html, re.S)[1])
    return {f["id"]: f for f in payload["figures"]}, payload["datasets"]


def test_the_page_clips_the_loss_axis_to_the_healthy_runs_with_a_control_and_a_mark(tmp_path):
    figs, data = figures(report_page(exploded(tmp_path / "sweep")).html)
    loss = figs["fig-loss"]["spec"]
    control = next(p for p in loss["params"] if p["name"] == "yrange")
    assert control["value"] == "healthy" and control["bind"]["options"] == ["healthy", "all"]
    domains = {json.dumps(layer["encoding"]["y"]["scale"]["domain"]) for layer in loss["layer"]
               if "field" in layer["encoding"].get("y", {})}
    assert len(domains) == 1 and "yrange == 'all'" in domains.pop()  # every layer: one axis
    assert [(e["run"], e["step"], e["edge"]) for e in data["loss:edges"]] == [("none · seed=0", 0, "above")]
    assert "loss:edges" in figs["fig-loss"]["uses"]
    assert "yrange" not in json.dumps(figs["fig-lr"]["spec"])  # the learning rate: nobody leaves its range


def plotted_extent(spec: dict, colours: list[str]) -> float:
    """How tall the lines drawn in ``colours`` are in ``spec`` as vl-convert draws it (SVG), as a share of the
    plot's height (legend swatches, one segment each, left out)."""
    import vl_convert

    svg = vl_convert.vegalite_to_svg(spec, config=paper.CONFIG)
    ys = []
    for d, colour in re.findall(r'<path [^>]*d="([^"]+)"[^>]*stroke="(#[0-9a-f]+)"', svg):
        if colour not in colours:
            continue
        points = [float(y) for y in re.findall(r"[ML][-\d.e]+,([-\d.e]+)", d)]
        if len(points) > 2:
            ys += points
    return (max(ys) - min(ys)) / spec["height"]


@pytest.mark.slow
def test_loss_png_draws_the_healthy_runs_tall_beside_a_diverged_one(tmp_path):
    exploded(tmp_path / "sweep")
    result = compare([str(tmp_path / "sweep")], out=tmp_path / "out")
    healthy = [r.color for r in result.runs if r.label.startswith(("pre", "post"))]
    figs, data = figures((tmp_path / "out" / "report.html").read_text())
    for log in (True, False):  # what loss.png draws (log), and the linear scale
        spec = paper.static(figs["fig-loss"]["spec"], data, log)
        assert plotted_extent(spec, healthy) > 0.6, log
        assert plotted_extent(paper.static(figs["fig-loss"]["spec"], data, log, yrange="all"), healthy) < 0.1
    assert (tmp_path / "out" / "loss.png").stat().st_size > 10_000


def test_each_heatmap_panel_has_its_own_colour_scale_on_demand_and_the_shared_one_is_the_healthy_runs(tmp_path):
    figs, data = figures(report_page(exploded(tmp_path / "sweep")).html)
    panels = figs["fig-grad-norm-map"]["spec"]["concat"]
    assert [p["title"]["text"] for p in panels] == ["post", "pre", "none (1 of 2 diverged)"]

    def log_domains(panel: dict) -> tuple[list[float], list[float]]:
        """(this panel's own log colour domain, the shared one) from its domain expression."""
        expr = panel["encoding"]["color"]["scale"]["domain"]["expr"]
        shared, own = (json.loads(m) for m in re.findall(r"logscale \? (\[[^\]]+\])", expr))
        return own, shared

    own = {p["title"]["text"].split(" (")[0]: log_domains(p)[0] for p in panels}
    assert own["pre"][1] < 100 and own["none"][1] > 1e6  # the blown-up seed's 1e8 stays in its own panel
    values = [v for r in data["layers:grad_norm"] if r["g"] == "pre" for v in r["v"] if v]
    assert own["pre"] == [num(np.percentile(values, 1)), num(np.percentile(values, 99))]
    shared = {json.dumps(log_domains(p)[1]) for p in panels}
    assert len(shared) == 1 and json.loads(shared.pop())[1] < 100  # one, from pre and post only
