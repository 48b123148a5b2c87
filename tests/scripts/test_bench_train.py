"""scripts/bench_train.py: the CPU smoke run writes its JSON and table; without CUDA it says how to run it."""

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from normtrain.util.provenance import code_state

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_train.py"

# Runs the script's main() in a fresh interpreter, then checks it never pulled in W&B or datasets.
RUNNER = f"""
import runpy, sys
bench = runpy.run_path({str(SCRIPT)!r}, run_name="bench_train")
rc = bench["main"](sys.argv[1:])
heavy = sorted({{"wandb", "datasets"}} & set(sys.modules))
assert not heavy, f"bench_train imported {{heavy}}"
sys.exit(rc)
"""


def run(args, cwd):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-c", RUNNER, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_tiny_cpu_run_writes_json_and_table(tmp_path):
    out = tmp_path / "throughput" / "cpu.json"
    proc = run(["--device", "cpu", "--tiny", "--out", str(out)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["model"]["n_layers"] == 2 and report["device_slug"] == "cpu"
    code = code_state()  # the code's own commit, whatever the working directory the benchmark ran from
    commit = code["code_commit"] and code["code_commit"][:7]
    assert (report["git_commit"], report["code_dirty"]) == (commit, code["code_dirty"])
    rows = {(r["norm"], r["impl"], r["mode"]): r for r in report["results"]}
    assert len(rows) == 7
    for key in [("layernorm", "torch", "eager"), ("layernorm", "torch", "compiled"), ("rmsnorm", "torch", "eager"),
                ("rmsnorm", "torch", "compiled"), ("rmsnorm", "auto", "eager"), ("rmsnorm", "auto", "compiled")]:
        row = rows[key]
        assert row["status"] == "ok" and row["tokens_per_s"] > 0 and row["flops_per_token"] > 0, row
        assert row["mfu"] is None  # no peak for a CPU: no MFU rather than a wrong one
        assert row["rounds"] == 1 and row["tokens_per_s_min"] == row["tokens_per_s"]
    assert rows[("rmsnorm", "torch", "compiled")]["graph_breaks"] == 0
    assert rows[("rmsnorm", "triton", "compiled")]["status"] == "skipped"
    assert set(report["ratios"]) == {f"auto / torch RMSNorm, {m}" for m in ("eager", "compiled")} | {
        f"auto RMSNorm / LayerNorm, {m}" for m in ("eager", "compiled")}
    table = out.with_suffix(".md").read_text()
    assert "| RMSNorm (torch: F.rms_norm) | compiled |" in table and "| auto / torch RMSNorm, eager |" in table


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_cuda_it_exits_with_a_message(tmp_path):
    proc = run([], cwd=tmp_path)
    assert proc.returncode == 2
    assert "no CUDA device" in proc.stderr and "--device cpu --tiny" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_graphs_mode_is_a_mode_and_a_bad_one_names_them_all():
    bench = runpy.run_path(str(SCRIPT), run_name="bench_train")
    assert bench["parse_args"](["--modes", "eager,graphs"]).modes == ["eager", "graphs"]
    with pytest.raises(SystemExit):
        bench["parse_args"](["--modes", "cudagraph"])
