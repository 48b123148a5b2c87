"""The parts of ``normtrain.compare`` on hand-made run folders: reading, finding, labels, sorting, colours."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from normtrain.compare import figdata, groups, labels, paper, report, specs
from normtrain.compare.cli import compare
from normtrain.compare.runs import Run, find_run_dirs, load_run, read_metrics


def make_run(path: Path, rows: list[dict] | None = None, summary: dict | None = None, raw: str = "") -> Path:
    path.mkdir(parents=True)
    if rows is not None or raw:
        (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows or []) + raw)
    if summary is not None:
        (path / "summary.json").write_text(json.dumps(summary))
    return path


def config(placement="pre", norm="rmsnorm", layers=6, seed=0, cache=None, lr=1e-3) -> dict:
    eps = 1e-5 if norm == "layernorm" else 1e-6  # each norm option's own default
    return {"model": {"n_layers": layers, "d_model": 64}, "norm": {"name": norm, "eps": eps},
            "placement": {"name": placement, "alpha": "auto"}, "optim": {"lr": lr, "eps": 1e-8},
            "data": {"cache_dir": cache}, "train": {"seed": seed, "progress": True},
            "logger": {"name": "wandb", "run_name": f"x{seed}"}}



def test_runs_under_a_symlinked_folder_keep_the_name_they_were_reached_by(tmp_path, monkeypatch):
    """multirun/ linked to another disk: the report names runs multirun/..., not the link's target."""
    store = tmp_path / "disk" / "sweep"
    make_run(store / "0_pre", [{"step": 0}])
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "multirun").symlink_to(store, target_is_directory=True)
    monkeypatch.chdir(checkout)

    dirs, skipped = find_run_dirs(["multirun", str(store), "multirun/0_pre/metrics.jsonl"])
    assert skipped == [] and len(dirs) == 1  # one run, however it was reached
    assert report.shown_path(dirs[0]) == "multirun/0_pre"
    assert report.shown_path(store / "0_pre") == str(store / "0_pre")  # outside the working directory: as given
    monkeypatch.chdir(tmp_path / "disk")
    assert report.shown_path(dirs[0]) == "sweep/0_pre"  # below the working directory once resolved

def test_metrics_truncated_line_nulls_and_a_resume(tmp_path):
    rows = [{"step": 0, "train/loss": 5.0, "grad_norm/layer_1": 2.0, "grad_norm/layer_0": 1.0},
            {"step": 10, "train/loss": None, "val/loss": 4.0}, {"step": 20, "train/loss": 3.5},
            {"step": 20, "train/loss": 3.0}]  # resumed from its checkpoint at step 20: this row wins
    path = make_run(tmp_path / "r", rows, raw='{"step": 30, "train/lo')
    notes: list[str] = []
    got = read_metrics(path / "metrics.jsonl", notes)
    assert [r["step"] for r in got] == [0, 10, 20] and got[-1]["train/loss"] == 3.0
    assert notes == ["metrics.jsonl: 1 unreadable line(s) ignored (line 5; truncated?)"]

    run = load_run(path)
    assert run.status == "incomplete" and run.summary["steps"] == 20
    assert run.summary["best_val_loss"] == 4.0 and run.summary["final_val_bpb"] == pytest.approx(4 / math.log(2))
    steps, values = run.series("train/loss")
    assert steps.tolist() == [0, 10, 20] and math.isnan(values[1])  # null -> NaN, row kept
    assert run.layer_keys("grad_norm") == ["grad_norm/layer_0", "grad_norm/layer_1"]
    assert run.layer_matrix("grad_norm")[1].tolist() == [[1.0, 2.0]]


ROLLED = [{"step": 0, "train/loss": 5.0}, {"step": 5, "train/loss": 4.0}, {"step": 10, "train/loss": None},
          {"step": 9, "event": "rollback", "rollback/restored_step": 8, "rollback/checkpoint": "/r/ckpt.pt",
           "rollback/skipped_batches": 2, "rollback/lr_factor": 0.5, "rollback/lr_steps": 3, "rollback/retry": 1},
          {"step": 10, "train/loss": 3.5}, {"step": 15, "train/loss": 3.0}]


def test_a_rolled_back_run_reads_as_trained_with_its_rollbacks(tmp_path, monkeypatch):
    """The event row is set aside, the rows trained again replace the abandoned ones; the rollbacks come from
    summary.json, or from the event rows when a killed run wrote none; the PNG marks them (a dashed rule)."""
    run = load_run(make_run(tmp_path / "killed", ROLLED))
    steps, loss = run.series("train/loss")
    assert steps.tolist() == [0, 5, 10, 15] and loss.tolist() == [5.0, 4.0, 3.5, 3.0]
    assert "rollback/skipped_batches" not in run.keys()
    assert run.rollbacks == [{"step": 9, "restored_step": 8, "checkpoint": "/r/ckpt.pt", "skipped_batches": 2,
                              "lr_factor": 0.5, "lr_steps": 3, "retry": 1}]
    recorded = {"step": 9, "restored_step": 8, "skipped_batches": 2}
    done = load_run(make_run(tmp_path / "done", ROLLED, {"status": "completed", "rollbacks": [recorded]}))
    assert done.rollbacks == [recorded]

    done.label = "done"
    grouped = groups.group_runs([done])
    data: dict[str, list] = {}
    charts = paper.Charts(grouped, {"fig-loss": specs.loss_figure(grouped, [done], data)}, data)
    drawn = paper.static(charts.figures["fig-loss"].spec, data)
    rules = [layer["data"]["values"] for layer in drawn["layer"] if layer["mark"]["type"] == "rule"]
    assert [[r["step"] for r in values] for values in rules] == [[9]]
    assert paper.loss(charts, tmp_path / "loss.png") == [] and (tmp_path / "loss.png").is_file()


def test_unusable_folders_are_reasons_not_errors(tmp_path):
    assert "no rows yet" in load_run(make_run(tmp_path / "a", []))
    assert "unreadable" in load_run(make_run(tmp_path / "b", raw='{"step": 0, "tra'))
    make_run(tmp_path / "c", [{"step": 0, "train/loss": 1.0}])
    (tmp_path / "c" / "summary.json").write_text('{"status": "compl')  # half a file: read metrics instead
    broken = load_run(tmp_path / "c")
    assert broken.status == "incomplete" and any("summary.json is unreadable" in n for n in broken.notes)


def test_find_run_dirs(tmp_path):
    sweep = tmp_path / "sweep"
    make_run(sweep / "0_pre-rmsnorm-L2", [{"step": 0}])
    make_run(sweep / "1_post-rmsnorm-L2", summary={"status": "completed"})
    (sweep / "2_post-layernorm-L2").mkdir()  # killed before writing anything
    make_run(sweep / "0_pre-rmsnorm-L2" / "wandb" / "nested", [{"step": 0}])  # never searched: inside a run
    (sweep / "multirun.yaml").write_text("{}")
    (sweep / "compare").mkdir()  # our own earlier output
    hydra_only = tmp_path / "outputs" / "day" / "run"
    (hydra_only / ".hydra").mkdir(parents=True)

    dirs, skipped = find_run_dirs([str(sweep)], exclude=sweep / "compare")
    assert [d.name for d in dirs] == ["0_pre-rmsnorm-L2", "1_post-rmsnorm-L2"]
    assert skipped == [f"{sweep / '2_post-layernorm-L2'}: no summary.json or metrics.jsonl (killed before its "
                       "first log step?)"]
    dirs, skipped = find_run_dirs([f"{sweep}/*post*", str(sweep / "1_post-rmsnorm-L2" / "summary.json"),
                                   str(tmp_path / "outputs"), f"{tmp_path}/nothing*"])
    assert [d.name for d in dirs] == ["1_post-rmsnorm-L2"]  # found twice, listed once
    assert len(skipped) == 3 and skipped[-1].endswith("nothing*: no such file or folder")


def test_labels_from_config_values_that_differ():
    runs = [Run(Path(f"/r/{i}"), {}, config(p, n, layers, cache=f"/c{i}"), [])
            for i, (p, n, layers) in enumerate([("post", "layernorm", 48), ("pre", "rmsnorm", 48),
                                                 ("deepnorm", "layernorm", 12)])]
    # norm.eps differs too, but only as each norm's default: neither in the label nor in the table
    assert labels.label_runs(runs) == ["placement.name", "norm.name", "model.n_layers"]
    assert [r.label for r in runs] == ["post · layernorm · L48", "pre · rmsnorm · L48", "deepnorm · layernorm · L12"]
    assert labels.slug(runs[0].label) == "post-layernorm-L48"

    seeds = [Run(Path(f"/r/{i}"), {}, config(seed=i), []) for i in range(2)]
    seeds.append(Run(Path("/r/old"), {"name": "pre-rmsnorm-L6"}, None, []))  # no config: its summary's name
    assert labels.label_runs(seeds) == ["train.seed"]  # the seed counts; logger, cache and progress do not
    assert [r.label for r in seeds] == ["seed=0", "seed=1", "pre-rmsnorm-L6"]

    twins = [Run(Path(f"/r/job{i}"), {}, config(lr=lr), []) for i, lr in enumerate([1e-3, 1e-3, 3e-4])]
    assert labels.label_runs(twins, by=["placement"]) == ["placement.name", "optim.lr"]
    assert [r.label for r in twins] == ["pre (lr=0.001) (job0)", "pre (lr=0.001) (job1)", "pre (lr=0.0003)"]

    keys = labels.flatten(config())
    assert labels.resolve_keys(["norm", "n_layers", "optim.lr"], keys) == ["norm.name", "model.n_layers", "optim.lr"]
    with pytest.raises(labels.LabelError, match="'eps' \\(ambiguous: norm.eps, optim.eps\\)"):
        labels.resolve_keys(["eps"], keys)
    assert labels.short_names(["norm.eps", "optim.eps", "optim.lr"]) == {
        "norm.eps": "norm.eps", "optim.eps": "optim.eps", "optim.lr": "lr"}


def test_a_norm_s_own_defaults_are_not_shown_as_swept():
    """``norm=layernorm,rmsnorm placement=pre,post train.seed=1,2``: eps and impl differ only as each norm's default
    (LayerNorm 1e-5 and torch, RMSNorm 1e-6 and auto), so no label, group or table column shows them, also where
    ``--by norm`` makes labels collide and the values that tell the twins apart go in parentheses."""
    def sweep():
        out = []
        for i, (n, p, seed) in enumerate((n, p, s) for n in ("layernorm", "rmsnorm") for p in ("pre", "post")
                                         for s in (1, 2)):
            c = config(p, n, seed=seed)
            c["norm"]["impl"] = "torch" if n == "layernorm" else "auto"
            out.append(Run(Path(f"/r/{i}"), {}, c, []))
        return out

    runs = sweep()
    assert labels.label_runs(runs) == ["placement.name", "norm.name", "train.seed"]
    assert {r.label for r in runs} >= {"pre · layernorm · seed=1", "post · rmsnorm · seed=2"}
    assert {r.group for r in runs} == {"pre · layernorm", "post · layernorm", "pre · rmsnorm", "post · rmsnorm"}

    runs = sweep()
    assert labels.label_runs(runs, by=["norm"]) == ["norm.name", "placement.name", "train.seed"]
    assert [r.label for r in runs[:4]] == ["layernorm (pre · seed=1)", "layernorm (pre · seed=2)",
                                          "layernorm (post · seed=1)", "layernorm (post · seed=2)"]
    assert {r.group for r in runs} == {"layernorm", "rmsnorm"}
    assert not [r.label for r in runs if "eps" in r.label or "impl" in r.label]

    seeds = sweep()[:2]  # twins that differ in their seed alone: only the seed in parentheses
    assert labels.label_runs(seeds, by=["placement"]) == ["placement.name", "train.seed"]
    assert [r.label for r in seeds] == ["pre (seed=1)", "pre (seed=2)"]


def test_sort_diverged_and_failed_last():
    def run(label, status, val, at=None):
        r = Run(Path(label), {"status": status, "final_val_loss": val, "diverged_at_step": at}, None, [])
        r.label = label
        return r

    runs = [run("f", "failed", None), run("d1", "diverged", 9.0, at=5), run("c2", "completed", 2.0),
            run("i", "incomplete", 1.0), run("d2", "diverged", 1.0, at=50), run("c1", "completed", 1.5),
            run("c0", "completed", None)]
    value, higher, _ = report.metric("val/loss", runs)
    assert [r.label for r in report.sort_runs(runs, value, higher)] == ["c1", "c2", "c0", "i", "d2", "d1", "f"]
    table = report.markdown(runs, report.columns([]))
    assert table.splitlines()[1].startswith("|-----") and "| failed " in table


def test_groups_keep_one_order_and_colour_whatever_the_run_order():
    combos = [(p, n, layers) for p in ("pre", "post", "deepnorm") for n in ("rmsnorm", "layernorm")
              for layers in (48, 6)]
    runs = [Run(Path(f"/r/{i}"), {}, config(p, n, layers, seed=s), []) for i, (p, n, layers) in enumerate(combos)
            for s in range(2)]
    labels.label_runs(runs)
    order = [g.label for g in groups.group_runs(runs)]
    assert order[:4] == ["post · layernorm · L6", "post · layernorm · L48", "post · rmsnorm · L6",
                         "post · rmsnorm · L48"]  # placement (post, pre, deepnorm), norm, depth
    assert order[-1] == "deepnorm · rmsnorm · L48" and len(order) == 12
    colour = {r.label: r.color for r in runs}
    assert colour["post · layernorm · L6 · seed=0"] == colour["post · layernorm · L6 · seed=1"]
    assert len(set(colour.values())) == 12

    shuffled = [Run(r.path, {}, r.config, []) for r in reversed(runs)]  # another folder order, the same colours
    labels.label_runs(shuffled)
    groups.group_runs(shuffled)
    assert {r.label: r.color for r in shuffled} == colour
    families = groups.palette(groups.group_runs(runs))  # more than 10 groups: a colour family per placement
    blue = [int(c[5:7], 16) > int(c[1:3], 16) for c in families[:4]]  # post's four groups: shades of blue
    assert all(blue) and len(set(families)) == 12


def grad_rows(n_steps: int = 4) -> list[dict]:
    return [{"step": s, "train/loss": 3.0 - 0.1 * s, "grad_norm/layer_0": 1.0 + s, "grad_norm/layer_1": 2.0}
            for s in range(n_steps)]


def test_long_labels_get_short_unique_file_names():
    a, b = "path=" + "a" * 295, "path=" + "a" * 294 + "b"  # 300 characters, the same for 299
    slugs = labels.unique_slugs([a, b, a])
    assert len(set(slugs)) == 3 and all(len(s) <= labels.MAX_SLUG + 2 for s in slugs)
    assert slugs[0].startswith("pathaaaa") and slugs[2] == f"{slugs[0]}-2"
    assert labels.slug("post · layernorm · L48") == "post-layernorm-L48"  # short ones are unchanged


def test_a_300_character_label_keeps_its_heatmap(tmp_path):
    long_paths = ["a" * 295, "b" * 295]  # label: "path=" + 295 characters
    for i, path in enumerate(long_paths):
        make_run(tmp_path / "runs" / f"job{i}", grad_rows(), {"status": "completed", "final_val_loss": 2.0 + i,
                                                              "config": {**config(), "data": {"path": path}}})
    result = compare([str(tmp_path / "runs")], out=tmp_path / "out")
    assert sorted(len(r.label) for r in result.runs) == [300, 300]
    heatmaps = sorted((tmp_path / "out").glob("grad_norm_heatmap_*.png"))
    assert len(heatmaps) == 2 and all(len(p.name.encode()) < 120 for p in heatmaps), heatmaps
    assert not [n for n in result.notes if "could not be drawn" in n], result.notes
    assert (tmp_path / "out" / "report.html").read_text().count("grad_norm_heatmap_") >= 2


def test_a_heatmap_that_fails_is_a_note_and_the_others_are_drawn(tmp_path, monkeypatch):
    runs = [Run(tmp_path / name, {"status": "completed"}, None, grad_rows()) for name in ("a", "b")]
    for run in runs:
        run.label = run.path.name
    real = paper.render

    def render(spec, path):
        if path.name.endswith("_a.png"):
            raise OSError(36, "File name too long")
        return real(spec, path)

    monkeypatch.setattr(paper, "render", render)
    paths, notes = paper.grad_norm_heatmaps(runs, ["a", "b"], tmp_path)
    assert [p.name for p in paths] == ["grad_norm_heatmap_b.png"]
    assert notes == ["grad_norm_heatmap_a.png (a) could not be drawn (OSError: [Errno 36] File name too long)"]


@pytest.mark.parametrize("value,shown", [(math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan")])
def test_non_finite_config_values_show_as_such(tmp_path, value, shown):
    """summary.json (strict JSON) has null for lr=inf; Hydra's .hydra/config.yaml has .inf: it is read back."""
    import yaml

    for name, lr in (("inf", value), ("finite", 1e-3)):
        run_dir = make_run(tmp_path / "runs" / name, grad_rows(), {
            "status": "completed", "final_val_loss": 2.0,
            "config": {**config(lr=None if not math.isfinite(lr) else lr), "model": {"d_ff": None}}})
        (run_dir / ".hydra").mkdir()
        (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump({**config(lr=lr), "model": {"d_ff": None}}))
    result = compare([str(tmp_path / "runs")], out=tmp_path / "out", figures=False)
    assert sorted(r.label for r in result.runs) == sorted([f"lr={shown}", "lr=0.001"])
    run = next(r for r in result.runs if r.path.name == "inf")
    assert run.config["model"]["d_ff"] is None  # a null that config.yaml also has stays null
    assert re.search(rf"\| +{re.escape(shown)} \|", result.table), result.table  # the lr column
    assert {row["optim.lr"] for row in read_csv(tmp_path / "out" / "table.csv")} == {shown, "0.001"}


def read_csv(path: Path) -> list[dict[str, str]]:
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_probe_folder_is_read_and_never_taken_for_a_run(tmp_path):
    run = make_run(tmp_path / "sweep" / "0_pre", [{"step": 0, "train/loss": 5.0}], {"status": "completed"})
    (run / "probe").mkdir()
    (run / "probe" / "probe.json").write_text(json.dumps({"format": 1, "layers": [], "norms": []}))
    (run / "probe" / "summary.json").write_text("{}")  # a stray file there: still not a run
    assert find_run_dirs([str(tmp_path / "sweep")])[0] == [run.resolve()]
    assert load_run(run).probe == {"format": 1, "layers": [], "norms": []}
    (run / "probe" / "probe.json").write_text(json.dumps({"format": 99}))
    loaded = load_run(run)
    assert loaded.probe is None and any("format 99, not 1" in n for n in loaded.notes)
    (run / "probe" / "probe.json").write_text("{")
    loaded = load_run(run)
    assert loaded.probe is None and any("probe/probe.json is unreadable" in n for n in loaded.notes)
    (run / "probe" / "probe.json").write_text("[]")  # JSON, but not a probe's object
    loaded = load_run(run)
    assert loaded.probe is None and "probe/probe.json is not a JSON object; no probe figures (rerun normtrain-probe " \
        "on the run)" in loaded.notes


def test_a_cap_keeps_evenly_spread_steps_the_first_the_last_and_the_marked_ones():
    steps = np.arange(0, 1000, 2.0)  # 500 logged steps
    capped = figdata.Thinning(points=20, marked={"g": frozenset({502.0, 777.0})})  # 777 was never logged
    kept = steps[capped.line(steps, "g")]
    assert kept.size == 20 and kept[0] == 0 and kept[-1] == 998 and 502 in kept
    assert 502 not in steps[capped.line(steps, "other group")]
    gaps = np.diff(steps[capped.line(steps, "other group")])
    assert gaps.max() - gaps.min() <= 2  # evenly spread
    assert capped.map(steps, "g").tolist() == capped.line(steps, "g").tolist()
    assert figdata.Thinning(points=500).line(steps, "g").tolist() == list(range(500))  # within the cap: untouched
    strided = figdata.Thinning(stride=30, points=20)  # the map's own stride keeps 18 steps: under the cap
    assert strided.map(steps, "g").tolist() == figdata.Thinning(stride=30).map(steps, "g").tolist()


def test_every_runs_heatmap_png_shares_one_colour_scale_of_the_runs_that_did_not_diverge(tmp_path, monkeypatch):
    """One colour is one gradient norm in every grad_norm_heatmap_*.png; a diverged run's huge values do not set
    the scale (they saturate it)."""
    def scaled(k):
        return [{**r, "grad_norm/layer_0": r["grad_norm/layer_0"] * k, "grad_norm/layer_1": 2.0 * k}
                for r in grad_rows()]

    runs = [Run(tmp_path / "small", {"status": "completed"}, None, scaled(1e-3)),
            Run(tmp_path / "large", {"status": "completed"}, None, scaled(1.0)),
            Run(tmp_path / "wild", {"status": "diverged"}, None, scaled(1e6))]
    for run in runs:
        run.label = run.path.name
    seen = {}
    real = paper.heatmap

    def heatmap(run, records, domain):
        seen[run.label] = list(domain)
        return real(run, records, domain)

    monkeypatch.setattr(paper, "heatmap", heatmap)
    monkeypatch.setattr(paper, "render", lambda spec, path: path)
    paths, notes = paper.grad_norm_heatmaps(runs, ["small", "large", "wild"], tmp_path)
    assert len(paths) == 3 and not notes
    assert seen["small"] == seen["large"] == seen["wild"]  # one scale
    low, high = seen["small"]
    assert low < 1e-2 and 1.0 < high < 1e3  # spans the two healthy runs, not the diverged one's 1e6
