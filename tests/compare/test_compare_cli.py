"""``normtrain-compare`` end to end on tiny real runs: one pre, one post, one post at lr 1e4 that diverges."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import normtrain
from normtrain.compare.cli import main

JOBS = {  # folder -> overrides, as a Hydra multirun would name them
    "0_pre-rmsnorm-L2": ["placement=pre"],
    "1_post-rmsnorm-L2": ["placement=post"],
    "2_post-rmsnorm-L2": ["placement=post", "optim.lr=1e4"],
}
FIGURES = ["loss.png", "grad_norm_by_layer.png", "activations.png", "residual_stream.png", "update.png"]
_made: dict[str, Path] = {}  # the runs take seconds: made once for this module, then copied


@pytest.fixture
def sweep(tiny, tmp_path_factory, tmp_path) -> Path:
    """A fresh copy of a multirun-like folder holding the three runs."""
    if "sweep" not in _made:
        import torch

        root = tmp_path_factory.mktemp("sweep")
        (root / "multirun.yaml").write_text("hydra:\n  mode: MULTIRUN\n")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # runs this small are 10x faster on one thread when the CPU is shared
        try:
            for name, overrides in JOBS.items():
                normtrain.train(normtrain.compose([*tiny, *overrides]), run_dir=root / name)
        finally:
            torch.set_num_threads(threads)
        _made["sweep"] = root
    return Path(shutil.copytree(_made["sweep"], tmp_path / "sweep", ignore=shutil.ignore_patterns("ckpt.pt")))


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def kill_mid_way(run_dir: Path, norm: str) -> float:
    """Make ``run_dir`` look like a job killed while writing: no summary, a Hydra config, a truncated last
    line. Returns the validation loss it last logged in full."""
    config = summary(run_dir)["config"]
    config["norm"]["name"] = norm
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    (run_dir / "summary.json").unlink()
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    (run_dir / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    return [json.loads(x)["val/loss"] for x in lines[:-1] if "val/loss" in json.loads(x)][-1]


def test_every_file_with_the_right_rows(sweep, capsys):
    killed = sweep / "3_post-layernorm-L2"
    shutil.copytree(sweep / "1_post-rmsnorm-L2", killed)
    killed_val = kill_mid_way(killed, "layernorm")
    (sweep / "4_pre-layernorm-L2").mkdir()  # a job killed before its first log step

    assert main([str(sweep)]) == 0
    out = sweep / "compare"  # the default: <first PATH>/compare
    stdout, stderr = capsys.readouterr()

    # labels are made of the config values that differ: placement, norm, lr (not seed, paths, logger)
    pre, post, div = (summary(sweep / name)["final_val_loss"] for name in JOBS)
    completed = sorted([(pre, "pre · rmsnorm · lr=0.001"), (post, "post · rmsnorm · lr=0.001")])
    expected = [label for _, label in completed] + ["post · layernorm · lr=0.001", "post · rmsnorm · lr=10000"]
    rows = read_csv(out / "table.csv")
    assert [r["label"] for r in rows] == expected  # by final val loss; the killed run, then the diverged one, last
    assert [r["status"] for r in rows] == ["completed", "completed", "incomplete", "diverged"]
    assert list(rows[0])[1:4] == ["placement.name", "norm.name", "optim.lr"]
    assert rows[3]["diverged_at_step"] == str(summary(sweep / "2_post-rmsnorm-L2")["diverged_at_step"])
    assert float(rows[2]["final_val_loss"]) == pytest.approx(killed_val)
    assert float(rows[0]["final_val_loss"]) == pytest.approx(completed[0][0])
    assert float(rows[0]["tokens_per_s"]) > 0 and float(rows[0]["wall_time_s"]) > 0
    for column in ("final_val_bpb", "best_val_loss", "steps", "n_params"):
        assert rows[0][column]

    md = (out / "table.md").read_text()
    assert all(label in md for label in expected) and "| diverged " in md
    assert all(label in stdout for label in expected)  # the table, printed
    assert "unreadable line" in stderr  # the truncated line of the killed run, which is kept
    assert [line for line in stderr.splitlines() if "skipped" in line] == [
        f"normtrain-compare: skipped: {sweep / '4_pre-layernorm-L2'}: no summary.json or metrics.jsonl (killed "
        "before its first log step?)"]

    slugs = ["pre-rmsnorm-lr0.001", "post-rmsnorm-lr0.001", "post-layernorm-lr0.001", "post-rmsnorm-lr10000"]
    pngs = FIGURES + [f"grad_norm_heatmap_{s}.png" for s in slugs]
    assert sorted(p.name for p in out.iterdir()) == sorted([*pngs, "table.md", "table.csv", "report.html"])
    for name in pngs:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, name

    page = (out / "report.html").read_text()
    assert not re.search(r"https?:|src=|url\(|@import", page)  # nothing outside the file...
    links = [h for h in re.findall(r'href="([^"]+)"', page) if not h.startswith("#")]  # but its own sections
    assert sorted(links) == sorted(pngs)  # ...and the PNGs beside it
    figures = json.loads(re.search(r'id="normtrain-data">(.*?)</script>', page, re.S)[1])["figures"]
    ids = [f["id"] for f in figures]
    assert ids[0] == "fig-loss" and {"fig-grad-norm-map", "fig-act-std-profile", "fig-update-output-change"} < set(ids)
    assert {"fig-act-rms-map", "fig-act-absmax-map", "fig-block-cos-map", "fig-block-cos-profile"} < set(ids)
    assert all(label in page for label in expected) and "4_pre-layernorm-L2" in page


def test_by_chooses_the_label_keys(sweep, capsys):
    assert main([str(sweep), "--by", "norm,placement", "--table-only"]) == 0
    rows = read_csv(sweep / "compare" / "table.csv")
    assert {r["label"] for r in rows} == {"rmsnorm · pre", "rmsnorm · post (lr=0.001)", "rmsnorm · post (lr=10000)"}
    assert list(rows[0])[1:4] == ["norm.name", "placement.name", "optim.lr"]
    assert not (sweep / "compare" / "loss.png").exists()

    assert main([str(sweep), "--by", "model.n_layers,optim.lr", "--table-only"]) == 0  # a re-run skips compare/
    assert {r["label"] for r in read_csv(sweep / "compare" / "table.csv")} == {
        "L2 · lr=0.001 (pre)", "L2 · lr=0.001 (post)", "L2 · lr=10000"}  # the other varied values only where needed
    assert "skipped" not in capsys.readouterr().err

    assert main([str(sweep), "--by", "norm,nope"]) == 2
    assert "unknown config key 'nope'" in capsys.readouterr().err


def test_metric_globs_and_no_runs(sweep, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([f"{sweep}/*_post-*", "--metric", "train/loss", "--table-only", "--out", str(out)]) == 0
    rows = read_csv(out / "table.csv")
    assert [r["status"] for r in rows] == ["completed", "diverged"]  # two runs matched; diverged last anyway
    assert main([str(sweep), "--metric", "val/bpb", "--table-only", "--out", str(out)]) == 0
    assert read_csv(out / "table.csv")[-1]["status"] == "diverged"
    assert main([str(sweep), "--metric", "val/nope", "--out", str(out)]) == 2
    assert "--metric 'val/nope' is not recorded" in capsys.readouterr().err

    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty"), str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert "no runs found" in err and "absent: no such file or folder" in err


def test_python_m_without_torch_or_hydra(sweep, tmp_path):
    """The layering rule: compare reads run folders with json/csv/numpy (and vl-convert for figures) only."""
    script = (
        "import runpy, sys\n"
        "for name in ('torch', 'hydra', 'omegaconf', 'normtrain.model'):\n"
        "    sys.modules[name] = None  # any import of these now fails\n"
        "import normtrain.compare.paper, normtrain.compare.report\n"
        "sys.argv = ['normtrain-compare', *sys.argv[1:]]\n"
        "runpy.run_module('normtrain.compare', run_name='__main__', alter_sys=True)\n"
    )
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", script, str(sweep), "--table-only", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "post · lr=10000" in proc.stdout and (out / "report.html").is_file()
