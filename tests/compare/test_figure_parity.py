"""One figure source: each PNG of ``normtrain-compare`` is drawn from the very spec and data the HTML report embeds,
and vl-convert draws it with no network."""

from __future__ import annotations

import html
import io
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from synthetic_runs import write_sweep

from normtrain.compare import compare, paper
from normtrain.compare.groups import group_runs
from normtrain.compare.specs import Figure

DRAWN_FROM_THE_REPORT = ("loss.png", "grad_norm_by_layer.png", "activations.png")  # a line chart, panels, a grid


def report_charts(page: str) -> paper.Charts:
    """The figures and data sets as the report embeds them (their titles from the page's headings), and no runs."""
    payload = json.loads(re.search(r'id="normtrain-data">(.*?)</script>', page, re.S)[1])
    titles = dict(re.findall(r'<figure class="figure" id="([^"]+)"[^>]*><h3>(.*?)</h3>', page))
    figures = {f["id"]: Figure(f["id"], html.unescape(titles[f["id"]]), "", f["spec"], f["uses"], log=f["log"],
                               scale=f["scale"], domains=f["domains"]) for f in payload["figures"]}
    return paper.Charts((), figures, payload["datasets"])


@pytest.mark.slow
def test_each_png_plots_the_spec_and_data_of_its_html_chart(tmp_path):
    write_sweep(tmp_path / "sweep", norms=("rmsnorm",), seeds=(0, 1), steps=30, collapsed=(), undertrained=())
    result = compare([str(tmp_path / "sweep")], out=tmp_path / "out")
    charts = report_charts((tmp_path / "out" / "report.html").read_text(encoding="utf-8"))

    # the same bytes when drawn again from nothing but what the page holds
    (tmp_path / "again").mkdir()
    for name, draw in paper.FILES:
        if name in DRAWN_FROM_THE_REPORT:
            draw(charts, tmp_path / "again" / name)
            assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "out" / name).read_bytes(), name

    # the picture's spec: the page's chart with its data sets inlined and the log switch on, nothing else changed
    page_spec = charts.figures["fig-loss"].spec
    picture = paper.static(page_spec, charts.data, log=True)
    for shown, layer in zip(picture["layer"], page_spec["layer"], strict=True):
        if "name" in layer["data"]:
            assert shown["data"]["values"] == charts.data[layer["data"]["name"]]
        assert shown["encoding"].get("x") == layer["encoding"].get("x") and shown["mark"] == layer["mark"]
        assert shown["encoding"].get("color") == layer["encoding"].get("color")
        assert shown["encoding"]["y"]["scale"]["type"] == "log"
    groups = group_runs(result.runs)
    pre = next(g for g in groups if g.label == "pre")  # the data are the runs' losses
    means = next(s["data"]["values"] for s, p in zip(picture["layer"], page_spec["layer"], strict=True)
                 if p["data"].get("name") == "loss:groups")
    mean = next(r for r in means if r["g"] == "pre" and r["k"] == "train")
    expected = np.mean([run.series("train/loss")[1] for run in pre.runs], axis=0)
    np.testing.assert_allclose(mean["mean"], expected, rtol=1e-3)

    # the PNG: the spec's size at paper.SCALE, and every group drawn in its colour
    import vl_convert
    from PIL import Image

    key = [paper.LOSS_KEY, paper.FAILED_KEY]  # post's seed 1 diverged
    titled = {**picture, "title": {"text": charts.figures["fig-loss"].title, "subtitle": key}}
    paper.render(titled, tmp_path / "loss.png")
    assert (tmp_path / "loss.png").read_bytes() == (tmp_path / "out" / "loss.png").read_bytes()
    svg = vl_convert.vegalite_to_svg(titled, config=paper.CONFIG)
    width, height = (float(re.search(rf'<svg[^>]* {k}="([\d.]+)"', svg)[1]) for k in ("width", "height"))
    image = Image.open(io.BytesIO((tmp_path / "out" / "loss.png").read_bytes())).convert("RGB")
    assert image.size == (round(width * paper.SCALE), round(height * paper.SCALE)) and image.size[0] > paper.WIDTH
    pixels = np.asarray(image).reshape(-1, 3).astype(int)
    for group in groups:
        rgb = np.array([int(group.color[i:i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(pixels - rgb).max(axis=1) <= 8).sum() > 200, group.label


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (util-linux) to cut the network")
def test_pngs_render_with_no_network(tmp_path):
    """vl-convert carries Vega and its fonts: a picture renders in a process with no network at all; a spec that
    asks for a URL fails instead of fetching it."""
    script = ("import sys; from pathlib import Path; from normtrain.compare import paper\n"
              "spec = {'data': {'values': [{'x': 1, 'y': 2}, {'x': 2, 'y': 3}]}, 'mark': 'line', 'title': '‖∇‖',\n"
              "        'encoding': {'x': {'field': 'x', 'type': 'quantitative'}, 'y': {'field': 'y',\n"
              "                     'type': 'quantitative'}}}\n"
              "paper.render(spec, Path(sys.argv[1]))\n"
              "try:\n"
              "    paper.render({'data': {'url': 'https://example.org/d.json'}, 'mark': 'point'}, Path(sys.argv[2]))\n"
              "except ValueError as err:\n"
              "    print('refused' if 'not allowed' in str(err) else err)\n")
    cut = subprocess.run(["unshare", "--net", "--map-root-user", "true"], capture_output=True)
    if cut.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {cut.stderr.decode().strip()}")
    proc = subprocess.run(["unshare", "--net", "--map-root-user", sys.executable, "-c", script,
                           str(tmp_path / "a.png"), str(tmp_path / "b.png")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "refused" and not (tmp_path / "b.png").exists()
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
