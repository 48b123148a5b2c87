"""scripts/bench_options.py and bench_bare_loop.py on a tiny model: every row is built, stepped and written."""

import json
from pathlib import Path

import pytest
from warm_python import warm

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
TINY = ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.seq_len=32"]


def run(script, args, cwd):
    """The script in a process of its own, forked warm (tests/warm_python.py)."""
    return warm().run([str(SCRIPTS / script), *args], cwd=cwd, timeout=300)


@pytest.mark.slow
def test_the_option_costs_are_ratios_to_pre_ln_in_the_same_rounds(tmp_path):
    out = tmp_path / "options.json"
    proc = run("bench_options.py", [*TINY, "--only", "ngpt", "muon", "qk_clip", "--batch-size", "2", "--warmup", "1",
                                    "--steps", "1", "--rounds", "2", "--out", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    rows = {r["row"]: r for r in report["results"]}
    assert list(rows) == ["pre", "ngpt", "muon", "qk_clip"] and rows["pre"]["ratio_to_pre"] == 1.0
    for r in rows.values():
        assert len(r["step_ms"]) == 2 and r["ratio_min"] <= r["ratio_to_pre"] <= r["ratio_max"]
    assert "| ngpt | experiment=ngpt |" in out.with_suffix(".md").read_text()
    bad = run("bench_options.py", ["--only", "sandwhich"], tmp_path)
    assert bad.returncode == 2 and "unknown row(s) sandwhich" in bad.stderr


@pytest.mark.slow
def test_the_bare_loop_and_the_framework_train_the_same_model(tmp_path):
    out = tmp_path / "bare.json"
    proc = run("bench_bare_loop.py", ["--steps", "6", "--every", "2", "--repeats", "1", "--out", str(out), *TINY,
                                      "train.batch_size=2"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["runs"]["framework"][0] > 0 and result["runs"]["bare"][0] > 0
    assert result["ratio_median"] == result["runs"]["framework"][0] / result["runs"]["bare"][0]
