"""normtrain-ablate end to end on tiny models: a crippled arm (a quarter as wide) comes out worse, a killed
invocation run again reuses its finished runs and reaches the same numbers, a best at an edge after the last
extension is named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normtrain.ablate.cli import main
from normtrain.study.report import ABLATION_JSON, FIGURES, VERDICT_MD

pytestmark = pytest.mark.slow

TINY = ["model.n_layers=1", "model.n_heads=2", "model.seq_len=16", "train.batch_size=8", "train.eval_every=0",
        "train.eval_windows=256", "train.max_steps=60", "optim.schedule=wsd", "optim.warmup_steps=2",
        "monitor.every=10", "logger=none"]
PLANTED = ["model.d_model=32,8", *TINY, "--seeds", "3", "--grid", "1e-2,3e-2,1e-1", "--jobs", "1", "--no-progress",
           "--allow-dirty"]  # the suite runs from a working tree: its runs are recorded dirty, and accepted


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is fastest, and the suite's other worker keeps its core
    try:
        out = tmp_path_factory.mktemp("planted") / "ablation"
        assert main([*PLANTED, "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


def record(out: Path) -> dict:
    return json.loads((out / ABLATION_JSON).read_text())


def completed(out: Path) -> dict[str, str]:
    """The T runs finished so far: folder name → summary text (a run in flight has a summary saying running)."""
    found = {}
    for p in out.glob("runs/*/summary.json"):
        try:
            text = p.read_text()
            if json.loads(text).get("status") == "completed":
                found[p.parent.name] = text
        except (OSError, ValueError):  # being replaced as we read it
            continue
    return found


def test_a_crippled_arm_comes_out_worse(planted):
    rec = record(planted)
    decision = rec["analysis"]["decisions"]["8"]
    assert rec["decisions"]["8"]["decision"] == "worse", rec["decisions"]["8"]["why"]
    assert decision["at_best"]["low"] > 0 and decision["checks"]["budget"]["ok"]
    assert set(decision["at_best"]["diffs"]) == {"0", "1", "2"}
    text = (planted / VERDICT_MD).read_text()
    assert "**worse**: model.d_model=8 against model.d_model=32, each at its own best optim.lr" in text
    assert all((planted / f).stat().st_size > 1000 for f in FIGURES)
    page = (planted / "report" / "report.html").read_text()
    assert "Best against best: model.d_model = 32, 8" in page and "<b>worse</b>" in page
    assert page.index("Best against best") < page.index("<table")  # the decision first, then every run
    grid_points = sum(len(v) for v in rec["grids"]["values"].values())
    assert [len([r for r in rec["runs"] if r["steps"] == s]) for s in (60, 30)] == [3 * grid_points] * 2
    branches = [r for r in rec["runs"] if r["steps"] == 30]
    assert all(r["select_source"] == "held-out windows" for r in branches)


def test_a_second_invocation_trains_nothing_and_decides_the_same(planted, capsys):
    before = {p: p.stat().st_mtime_ns for p in planted.rglob("summary.json")}
    assert main([*PLANTED, "--no-report", "--out", str(planted)]) == 0
    assert {p: p.stat().st_mtime_ns for p in planted.rglob("summary.json")} == before
    assert "worse: model.d_model=8" in capsys.readouterr().out


def test_kill_9_then_run_again_reuses_the_finished_runs_and_gives_the_same_result(planted, tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "normtrain.ablate", *PLANTED, "--no-report", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while len(completed(out)) < 6 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = completed(out)
    assert len(finished) >= 6 and not (out / ABLATION_JSON).exists()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    for name, text in finished.items():  # reused, not retrained
        assert (out / "runs" / name / "summary.json").read_text() == text
    mine, theirs = record(out)["analysis"]["decisions"]["8"], record(planted)["analysis"]["decisions"]["8"]
    assert mine["decision"] == theirs["decision"] and mine["at_best"]["diffs"] == theirs["at_best"]["diffs"]


def test_a_best_at_an_edge_after_the_last_extension_is_inconclusive_naming_it(tmp_path):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path / "edge"
        args = ["model.d_model=32,16", *TINY, "train.max_steps=20", "--seeds", "2", "--grid", "1e-4,2e-4,4e-4",
                "--max-extensions", "1", "--jobs", "1", "--no-progress", "--allow-dirty", "--no-report", "--out",
                str(out)]
        assert main(args) == 0
    finally:
        torch.set_num_threads(threads)
    rec = record(out)
    assert rec["grids"]["extensions"] == {"32": 1, "16": 1}  # each lr was too small: the top edge grew once
    assert rec["grids"]["values"]["32"] == pytest.approx([1e-4, 2e-4, 4e-4, 8e-4])
    d = rec["decisions"]["16"]
    assert d["decision"] == "inconclusive (best at an edge)" and "after the last extension" in d["why"]


def test_compare_tune_judges_the_same_runs_as_the_ablation_did(planted, tmp_path, capsys):
    from normtrain.compare.cli import main as compare

    out = tmp_path / "tuned"
    args = [str(planted / "runs"), str(planted / "runs_half"), "--tune", "optim.lr", "--baseline", "model.d_model=32"]
    assert compare([*args, "--out", str(out)]) == 0
    assert "worse: model.d_model=8 against model.d_model=32" in capsys.readouterr().out
    mine, theirs = record(out)["analysis"]["decisions"]["8"], record(planted)["analysis"]["decisions"]["8"]
    assert mine["at_best"] == theirs["at_best"] and mine["checks"]["budget"] == theirs["checks"]["budget"]


def test_compare_tune_says_what_a_sweep_cannot_support(planted, tmp_path, capsys):
    from normtrain.compare.cli import main as compare

    one_seed = sorted(str(p) for p in (planted / "runs").glob("*_seed-0"))
    assert compare([*one_seed, "--tune", "optim.lr", "--baseline", "model.d_model=32", "--out",
                    str(tmp_path / "t")]) == 0
    err = capsys.readouterr().err
    assert "no runs at half the steps" in err and "one seed per value" in err
    rec = record(tmp_path / "t")
    assert rec["decisions"]["8"]["decision"] == "inconclusive (underpowered)"
    assert rec["analysis"]["decisions"]["8"]["checks"]["budget"]["ok"] is None
    assert compare([*one_seed, "--tune", "optim.lr", "--baseline", "model.d_model=64"]) == 2
    assert "no run has model.d_model=64" in capsys.readouterr().err
