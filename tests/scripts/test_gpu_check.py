"""scripts/gpu_check.py: without CUDA it says it is for a GPU; its table marks each of issue 36's targets met,
missed or not measured from what the phases wrote (here: files as its phases write them)."""

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"
CHECK = runpy.run_path(str(SCRIPT), run_name="gpu_check")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_cuda_it_exits_with_a_message(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=120)
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr and "Traceback" not in proc.stderr


def write_phases(out: Path, dev: str) -> None:
    kernels = out / "kernels"
    (out / "throughput").mkdir(parents=True)
    kernels.mkdir()
    (kernels / f"gpu_check-{dev}.tests.log").write_text("....F\n1 failed, 95 passed in 60.0s\n")
    (kernels / f"{dev}.json").write_text(json.dumps({
        "targets": [{"what": "fwd N=768: >= 90% of copy", "value": "97.2%", "met": True},
                    {"what": "bwd N=768: >= 80% of copy", "value": "65.5%", "met": False}],
        "host_us": {"F.rms_norm": {"fwd": 14.5, "fwd+bwd": 204.6}}}))
    (kernels / f"gpu_check-{dev}.cli-summary.json").write_text(json.dumps(
        {"norm_impl": {"impl": "triton", "why": "matched", "fallback": False}}))
    (out / "throughput" / f"{dev}.json").write_text(json.dumps({
        "ratios": {"auto / torch RMSNorm, eager": 1.045, "auto RMSNorm / LayerNorm, eager": 0.993},
        "results": [{"status": "ok", "mode": "eager", "impl": "auto", "mfu": 0.256}]}))


def test_the_table_marks_each_target_met_missed_or_not_measured(tmp_path):
    write_phases(tmp_path, "gpu")
    rows = {what: (value, met) for what, value, met in CHECK["target_rows"](tmp_path, "gpu", {})}
    assert rows["tests/ops compiled for this GPU all pass"] == ("1 failed, 95 passed", False)
    assert rows["fwd N=768: >= 90% of copy"] == ("97.2%", True)
    assert rows["bwd N=768: >= 80% of copy"] == ("65.5%", False)
    assert rows["default CLI run at model=gpt2_small picks Triton (summary.json)"][1] is True
    assert rows["auto / torch RMSNorm, eager >= 1.05"] == ("1.045", False)
    assert rows["auto / torch RMSNorm, compiled >= 1.00"] == ("not measured", None)  # eager-only run
    assert rows["(stretch) auto RMSNorm / LayerNorm, eager >= 1.00"] == ("0.993", False)


def test_a_phase_that_wrote_nothing_is_not_measured_and_says_why(tmp_path):
    (tmp_path / "kernels").mkdir()
    phases = {p: {"status": "stopped at its 60-s share of the budget"} for p in ("kernels", "train", "cli")}
    rows = CHECK["target_rows"](tmp_path, "gpu", phases)
    assert rows[0][2] is False  # no test summary: not a pass
    assert [met for _, _, met in rows[1:]] == [None, None, None]
    assert all("stopped at its 60-s share" in value for _, value, _ in rows[1:])
