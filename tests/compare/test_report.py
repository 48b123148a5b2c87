"""The interactive report on hand-made sweeps: seeds grouped (mean, band, count), every metric by its prefix,
the table's columns and numbers, 200 runs within 10 MB, and a page thinned to fit a size budget."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from synthetic_runs import UNIGRAM, many_runs, write_sweep

from normtrain.compare import CompareError, report_page, write_report
from normtrain.compare.figdata import MIN_POINTS
from normtrain.compare.labels import format_value
from normtrain.compare.report import cell
from normtrain.compare.runs import load_run

slow = pytest.mark.slow


def page_data(path: Path) -> tuple[str, dict]:
    page = path.read_text(encoding="utf-8")
    return page, json.loads(re.search(r'id="normtrain-data">(.*?)</script>', page, re.S)[1])


def record(data: dict, name: str, group: str, **match) -> dict:
    found = [r for r in data["datasets"][name] if r["g"] == group and all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (name, group, match)
    return found[0]


def test_seeds_form_groups_with_mean_band_and_count(tmp_path):
    folders = write_sweep(tmp_path / "sweep")
    page, data = page_data(write_report(folders, tmp_path / "report.html"))

    loss = next(f for f in data["figures"] if f["id"] == "fig-loss")
    domain = loss["spec"]["layer"][0]["encoding"]["color"]["scale"]["domain"]
    assert domain == ["post · layernorm", "post · rmsnorm", "pre · layernorm", "pre · rmsnorm"]  # fixed order

    runs = [load_run(f) for f in folders if "pre-layernorm" in f.name]
    train = np.array([[r["train/loss"] for r in run.rows] for run in runs])
    agg = record(data, "loss:groups", "pre · layernorm", k="train")
    assert agg["n"] == [3] * train.shape[1]
    np.testing.assert_allclose(agg["mean"], train.mean(axis=0), rtol=1e-3)
    np.testing.assert_allclose(agg["min"], train.min(axis=0), rtol=1e-3)
    np.testing.assert_allclose(agg["std"], train.std(axis=0, ddof=1), rtol=1e-3, atol=1e-4)  # sample sd
    seeds = [r for r in data["datasets"]["loss:runs"] if r["g"] == "pre · layernorm" and r["k"] == "train"]
    assert sorted(r["run"] for r in seeds) == [f"pre · layernorm · seed={s}" for s in range(3)]

    died = record(data, "loss:groups", "post · rmsnorm", k="train")  # seed 1 diverged at step 30
    assert died["n"][died["step"].index(25)] == 3 and died["n"][died["step"].index(30)] == 2
    assert [(m["run"], m["step"]) for m in data["datasets"]["loss:diverged"]] == [("post · rmsnorm · seed=1", 30)]
    assert {"v": UNIGRAM, "text": "unigram baseline"} in loss["spec"]["layer"][-1]["data"]["values"]

    ids = {f["id"] for f in data["figures"]}  # every per-layer prefix and scalar, known or not
    for prefix in ("grad-norm", "attn-logit-max", "brand-new-stat"):
        assert {f"fig-{prefix}-map", f"fig-{prefix}-profile"} <= ids
    assert {"fig-output-log-z", "fig-train-z-loss", "fig-lr", "fig-tokens-per-s"} <= ids
    heat = record(data, "layers:grad_norm", "post · layernorm", layer=3)
    assert len(heat["v"]) == len(heat["step"]) == 13

    header = re.search(r"<thead>(.*?)</thead>", page)[1]
    assert re.findall(r"<th [^>]*>([^<]*)</th>", header)[:4] == ["run", "placement", "norm", "seed"]
    assert ">lr<" not in header and ">L<" not in header  # keys that do not vary stay out of the table
    assert page.count('<tr class="completed collapsed"') == 3 and page.count("badge collapsed") == 3
    assert page.count('<tr class="completed undertrained"') == 1 and page.count('class="badge undertrained"') == 1
    assert page.count('<tr class="diverged"') == 1 and "diverged at 30" in page
    assert "e-0" not in re.search(r"<table.*?</table>", page, re.S)[0]


def test_per_head_values_get_a_block_by_head_map_not_a_chart_each(tmp_path):
    folders = write_sweep(tmp_path / "sweep")
    page, data = page_data(write_report(folders, tmp_path / "report.html"))
    ids = [f["id"] for f in data["figures"]]
    assert "fig-attn-logit-max-heads" in ids
    assert not [i for i in ids if "head-" in i]  # no line chart per attn_logit_max/layer_i/head_j
    runs = [load_run(f) for f in folders if "pre-layernorm" in f.name]
    cell_ = record(data, "heads:attn_logit_max", "pre · layernorm", layer=2, head=1)
    logged = np.array([[r["attn_logit_max/layer_2/head_1"] for r in run.rows] for run in runs])
    assert cell_["step"] == [r["step"] for r in runs[0].rows]
    np.testing.assert_allclose(cell_["v"], logged.mean(axis=0), rtol=1e-3)  # mean over the group's seeds
    fig = next(f for f in data["figures"] if f["id"] == "fig-attn-logit-max-heads")
    panels = fig["spec"]["concat"]  # one per group, each on its own colour scale
    assert [p["title"]["text"] for p in panels] == ["post · layernorm (collapsed)", "post · rmsnorm (1 of 3 diverged)",
                                                    "pre · layernorm", "pre · rmsnorm"]
    assert all(p["encoding"]["x"]["field"] == "head" for p in panels) and fig["scale"] == "color"
    assert "Per-head diagnostics by block and head" in page


def test_by_picks_the_grouping_keys(tmp_path):
    folders = write_sweep(tmp_path / "sweep")
    _, data = page_data(write_report(folders, tmp_path / "by.html", by=["norm"], title="by norm"))
    assert {r["g"] for r in data["datasets"]["loss:groups"]} == {"layernorm", "rmsnorm"}
    assert record(data, "loss:groups", "layernorm", k="train")["n"][0] == 6  # 2 placements x 3 seeds
    lead = (tmp_path / "by.html").read_text().split('<p class="lead">')[1]
    assert lead.startswith(f"{len(folders)} runs from {len(folders)} folders in {tmp_path / 'sweep'}. ")  # not each
    with pytest.raises(CompareError, match="unknown config key 'nope'"):
        write_report(folders, tmp_path / "bad.html", by=["nope"])
    with pytest.raises(CompareError, match="no runs"):
        write_report([tmp_path / "absent"], tmp_path / "none.html")


@slow
def test_200_runs_stay_under_10_mb(tmp_path):
    runs = many_runs(n_placements=4, n_norms=5, depth=12, n_seeds=10, steps=1000, every=10)
    path = write_report(runs, tmp_path / "report.html")
    page, data = page_data(path)
    assert path.stat().st_size < 10e6
    assert len(data["datasets"]["loss:runs"]) == 200 * 2 and page.count("<tr class=") == 200
    assert all(r.label == "" for r in runs)  # the caller's runs are left as they were


def test_numbers_are_short_and_never_wrap():
    assert format_value(1e-05) == "1e-5" and format_value(3e-4) == "0.0003" and format_value(2.5e7) == "2.5e7"
    assert cell(2.5e-05, 4) == "2.5e-5" and cell(3.14159, 4) == "3.1416" and cell(None, 4) == "—"
    assert cell(12345678.0, 0) == "1.23e7" and cell(float("inf"), 4) == "∞" and cell(3e-4, None) == "0.0003"
    css = (Path(__import__("normtrain.compare.page").compare.page.STATIC) / "report.css").read_text()
    assert re.search(r"table\.runs th, table\.runs td \{[^}]*white-space: nowrap", css)


def test_rollbacks_are_marked_on_the_loss_curve(tmp_path):
    folders = write_sweep(tmp_path / "sweep", placements=("pre",), norms=("rmsnorm",), seeds=(0, 1), diverged=())
    rolled = folders[1]
    rows = [json.loads(line) for line in (rolled / "metrics.jsonl").read_text().splitlines()]
    event = {"step": 22, "event": "rollback", "rollback/restored_step": 20, "rollback/skipped_batches": 3,
             "rollback/lr_factor": 0.5, "rollback/lr_steps": 10, "rollback/retry": 1}
    again = [{**r, "train/loss": r["train/loss"] - 0.5} for r in rows if r["step"] >= 20]
    lines = [*rows[:6], event, *again]  # the abandoned attempt's rows to step 25, the event, steps 20.. again
    (rolled / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    page, data = page_data(write_report(folders, tmp_path / "report.html"))
    assert data["datasets"]["loss:rollbacks"] == [{"g": "all runs", "run": "seed=1", "step": 22, "to": 20,
                                                   "skipped": 3, "lr": 0.5, "retry": 1}]
    loss = next(f for f in data["figures"] if f["id"] == "fig-loss")
    assert "loss:rollbacks" in loss["uses"]
    rule = next(layer for layer in loss["spec"]["layer"] if layer.get("data") == {"name": "loss:rollbacks"})
    assert rule["mark"]["type"] == "rule" and rule["encoding"]["x"]["field"] == "step"
    seed = record(data, "loss:runs", "all runs", k="train", run="seed=1")
    assert seed["step"] == sorted(set(seed["step"]))  # one point per step: the rows trained again
    assert seed["v"][seed["step"].index(25)] == pytest.approx(rows[5]["train/loss"] - 0.5, rel=1e-3)
    assert not any(f["id"].startswith("fig-rollback") for f in data["figures"])  # no rollback/* "metric"


def series(data: dict) -> list[tuple[str, dict]]:
    """Every record of the page that is a series (a list of steps), with its data set's name, in page order."""
    return [(name, r) for name, records in data["datasets"].items() for r in records if isinstance(r.get("step"), list)]


def test_a_size_budget_thins_every_series_to_fit_and_keeps_its_ends_and_marks(tmp_path):
    """A sweep logged at every step, over its budget: drawn again with as many points per series as fit, it says
    so near its top; each series keeps its first and last step and the steps the loss chart marks (a divergence,
    a rollback)."""
    folders = write_sweep(tmp_path / "sweep", depths=(8,), steps=300, every=1, eval_every=50)
    rolled = next(f for f in folders if f.name.endswith("pre-layernorm-L8"))  # seed 0
    summary = json.loads((rolled / "summary.json").read_text())
    (rolled / "summary.json").write_text(json.dumps({**summary, "rollbacks": [{"step": 201, "restored_step": 173}]}))
    full = write_report(folders, tmp_path / "full.html")
    assert full.stat().st_size > 1 << 20  # as drawn without a budget: over the one below
    _, before = page_data(full)

    fitted = report_page(folders, max_bytes=1 << 20)
    path = tmp_path / "report.html"
    path.write_text(fitted.html, encoding="utf-8")
    page, data = page_data(path)
    assert path.stat().st_size <= 1 << 20 and MIN_POINTS < fitted.points < 301
    lead = page.split('<p class="lead">')[2]  # right below the first line, above the table
    assert lead.startswith(f"Every series (per-layer maps and line charts alike) is thinned to at most "
                           f"{fitted.points} of each run's logged steps, for this page's size budget of 1 MiB")
    assert [n for n, _ in series(data)] == [n for n, _ in series(before)]
    for (name, thinned), (_, logged) in zip(series(data), series(before), strict=True):
        steps = thinned["step"]
        assert steps[0] == logged["step"][0] and steps[-1] == logged["step"][-1], name
        assert set(steps) <= set(logged["step"]) and len(steps) <= fitted.points, name
        assert len(thinned.get("v", steps)) == len(steps)
    diverged = record(data, "loss:runs", "post · rmsnorm", k="train", run="post · rmsnorm · seed=1")
    assert {149, 150} <= set(diverged["step"])  # its last finite loss (the cross) and where it diverged
    assert {149, 150} <= set(record(data, "layers:grad_norm", "post · rmsnorm", layer=0)["step"])
    assert {173, 201} <= set(record(data, "loss:groups", "pre · layernorm", k="train")["step"])  # the rollback
    assert not {149, 150, 173, 201} <= set(record(data, "loss:groups", "pre · rmsnorm", k="train")["step"])


def test_a_page_within_its_budget_or_below_its_cap_is_the_page_as_drawn_without_one(tmp_path):
    folders = write_sweep(tmp_path / "sweep")
    plain = write_report(folders, tmp_path / "plain.html").read_bytes()
    assert b"is thinned to at most" not in plain
    assert write_report(folders, tmp_path / "budget.html", max_bytes=len(plain)).read_bytes() == plain
    assert write_report(folders, tmp_path / "cap.html", points=13).read_bytes() == plain  # 13 logged steps a run
    capped = report_page(folders, points=5)  # no budget: the cap alone, and the page says so
    assert capped.points == 5 and "thinned to at most 5 of each run's logged steps: evenly spread" in capped.html


def test_a_page_with_a_root_names_run_folders_from_the_roots_name_not_the_machines_path(tmp_path):
    """A committed page (a reproduction's report.html) must not carry this machine's absolute paths."""
    folders = write_sweep(tmp_path / "runs" / "sweep")
    html = report_page(folders, root=tmp_path / "runs" / "sweep").html
    assert str(tmp_path) not in html
    assert f'title="sweep/{folders[0].name}"' in html and f"{len(folders)} folders in sweep" in html
    assert str(tmp_path) in report_page(folders).html  # without a root: as the user typed them


def test_a_run_on_the_unigram_line_without_the_collapsed_label_still_gets_a_badge(tmp_path):
    """200 steps evaluated every 100 leave too few points to label a run collapsed; the table still says it ended
    on the line (the summary's words), and a run that learned gets no badge."""
    from normtrain.compare.page import _status
    from normtrain.compare.runs import Run

    on_line = Run(tmp_path / "post", {"status": "completed", "final_val_loss": 3.3597, "unigram_val_loss": 3.3538},
                  None, [])
    learned = Run(tmp_path / "pre", {"status": "completed", "final_val_loss": 2.681, "unigram_val_loss": 3.3538},
                  None, [])
    flagged = Run(tmp_path / "flat", {"status": "completed", "collapsed": True, "final_val_loss": 3.36,
                                      "unigram_val_loss": 3.3538}, None, [])
    assert 'class="badge on_line"' in _status(on_line) and ">on the line<" in _status(on_line)
    assert _status(learned) == "completed"
    assert "badge collapsed" in _status(flagged) and "on_line" not in _status(flagged)
