"""scripts/bench_ckpt.py: the smoke run saves in every format through the Checkpointer and prints its JSON."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_ckpt.py"


@pytest.mark.slow
def test_tiny_run_prints_the_three_formats(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--nproc", "1", "--repeat", "2",
                           "--dir", str(tmp_path / "ckpt")], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["world_size"] == 1 and report["model"]["n_layers"] == 2
    assert list(report["results"]) == ["full", "dcp", "dcp+async"]
    for result in report["results"].values():
        assert result["commit_s"]["max"] >= result["blocked_s"]["max"] > 0 and result["checkpoint_mb"] > 0
        assert len(result["rss_peak_mb"]["per_rank"]) == 1
    assert (tmp_path / "ckpt" / "full" / "ckpt.pt").is_file()  # what was measured is a real checkpoint
    assert (tmp_path / "ckpt" / "dcp+async" / "ckpt.dcp" / "LATEST").is_file()
