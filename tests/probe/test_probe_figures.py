"""One figure source for the probe: its PNGs are the compare report's probe charts (normtrain.compare.probe),
rendered by vl-convert from the same spec and the same numbers, on a synthetic probe.json (no torch, no training)."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import numpy as np

from normtrain.compare import paper, write_report
from normtrain.probe import figures

sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
from synthetic_runs import probe_result, write_sweep  # noqa: E402 - hand-made run folders, shared with compare's tests


def run_folder(root, result: dict):
    """A finished run folder holding ``result`` as its probe/probe.json."""
    (root / "probe").mkdir(parents=True)
    rows = [{"step": 0, "train/loss": 5.0, "val/loss": 5.0}, {"step": 10, "train/loss": 2.3, "val/loss": 2.3}]
    (root / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "summary.json").write_text(json.dumps({"status": "completed", "steps": 10, "final_val_loss": 2.3,
                                                   "config": {"model": {"n_layers": 3}}}))
    (root / "probe" / "probe.json").write_text(json.dumps(result))
    return root


def layer_values(rows, key):
    return [(r["layer"], r[key]) for r in rows]


def test_probe_pngs_plot_the_report_s_probe_charts(tmp_path):
    result = probe_result(tmp_path / "run")
    page = write_report([run_folder(tmp_path / "run", result)], tmp_path / "report.html").read_text()
    data = json.loads(re.search(r'id="normtrain-data">(.*?)</script>', page, re.S)[1])
    in_report = {f["id"]: f["spec"] for f in data["figures"]}
    pictures = figures.pictures(result)
    assert list(pictures) == ["skip_loss.png", "stream.png", "norm_curves.png"]

    skip = pictures["skip_loss.png"]
    assert skip["mark"] == in_report["fig-probe-skip"]["mark"] and skip["title"].endswith("(full model: 2.3457)")
    assert skip["encoding"]["y"]["field"] == in_report["fig-probe-skip"]["encoding"]["y"]["field"] == "skip_delta"
    expected = layer_values(result["layers"], "skip_delta")
    assert layer_values(skip["data"]["values"], "skip_delta") == expected
    assert layer_values(data["datasets"]["probe:layers"], "skip_delta") == expected
    for panel, key in zip(pictures["stream.png"]["hconcat"], ("block_cos", "act_rms", "act_absmax"), strict=True):
        spec = in_report[f"fig-probe-{key.replace('_', '-')}"]
        assert panel["encoding"]["y"]["field"] == spec["encoding"]["y"]["field"] == key
        assert layer_values(panel["data"]["values"], key) == layer_values(result["layers"], key)
        assert panel["encoding"]["y"]["scale"]["type"] == ("linear" if key == "block_cos" else "log")
    curves = pictures["norm_curves.png"]
    for drawn, shown in zip(curves["spec"]["layer"], in_report["fig-probe-norms"]["spec"]["layer"], strict=True):
        assert drawn["mark"] == shown["mark"] and drawn["transform"] == shown["transform"]
        assert drawn["encoding"]["x"] == shown["encoding"]["x"]
        assert drawn["encoding"]["y"]["field"] == shown["encoding"]["y"]["field"] == "y"
    assert curves["facet"] == in_report["fig-probe-norms"]["facet"]
    fits = {r["norm"]: r["y"] for r in curves["data"]["values"] if r["k"] == "fit"}
    assert fits == {n["name"]: n["curve"]["y"] for n in result["norms"]}


def test_probe_pngs_are_drawn_in_the_run_s_colour(tmp_path):
    import vl_convert
    from PIL import Image

    result = probe_result(tmp_path / "run")
    written = figures.write(result, tmp_path)
    assert [p.name for p in written] == ["skip_loss.png", "stream.png", "norm_curves.png"]
    skip = figures.pictures(result)["skip_loss.png"]
    svg = vl_convert.vegalite_to_svg(skip, config=paper.CONFIG)
    width, height = (float(re.search(rf'<svg[^>]* {k}="([\d.]+)"', svg)[1]) for k in ("width", "height"))
    image = Image.open(io.BytesIO((tmp_path / "skip_loss.png").read_bytes())).convert("RGB")
    assert image.size == (round(width * paper.SCALE), round(height * paper.SCALE))
    blue = np.array([0x4E, 0x79, 0xA7])  # the one group's colour
    assert (np.abs(np.asarray(image).reshape(-1, 3).astype(int) - blue).max(axis=1) <= 8).sum() > 1000


def test_a_model_without_norms_has_no_norm_curves_png(tmp_path):
    assert list(figures.pictures({**probe_result(tmp_path), "norms": []})) == ["skip_loss.png", "stream.png"]


def test_the_report_names_the_probed_runs_and_its_legends_only_their_groups(tmp_path):
    """Issue 38: the skip-loss legend had no swatches and listed groups nobody probed; no seed was shown."""
    folders = write_sweep(tmp_path / "sweep", placements=("pre", "post", "deepnorm"), norms=("rmsnorm",), seeds=(0, 1),
                          diverged=(), collapsed=(), undertrained=())  # two seeds each; deepnorm not probed
    probed = [f for f in folders if f.name.startswith(("1_", "2_"))]  # pre's seed 1, post's seed 0
    for folder in probed:
        (folder / "probe").mkdir()
        (folder / "probe" / "probe.json").write_text(json.dumps({**probe_result(folder), "step": 60}))
    sweep_page = write_report(folders, tmp_path / "report.html").read_text()
    data = json.loads(re.search(r'id="normtrain-data">(.*?)</script>', sweep_page, re.S)[1])
    specs = {f["id"]: f["spec"] for f in data["figures"]}

    skip = specs["fig-probe-skip"]["encoding"]["color"]
    assert skip["legend"]["symbolType"] == "square" and skip["scale"]["domain"] == ["post", "pre"]
    norms = specs["fig-probe-norms"]["spec"]["layer"][0]["encoding"]
    assert norms["color"]["legend"]["symbolType"] == "circle"
    assert {"run", "seed"} <= {t["field"] for t in norms["tooltip"]}
    assert {(r["run"], r["seed"]) for r in data["datasets"]["probe:layers"]} == {("pre · seed=1", "1"),
                                                                                 ("post · seed=0", "0")}
    listed = re.search(r'Probed runs \(2 of 6\):</p><ul class="probed">(.*?)</ul>', sweep_page)[1]
    assert re.findall(r'background:(#[0-9a-f]+)"></span>([^<]+) <small>\(seed (\d)', listed) == [
        ("#4e79a7", "post · seed=0", "0"), ("#f28e2b", "pre · seed=1", "1")]
