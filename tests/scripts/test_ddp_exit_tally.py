"""scripts/ddp_exit_tally.py: two torchrun runs (DDP completed, FSDP diverged) both end clean, every rank exiting 0
with no thread of the process group left at interpreter exit, and the tally says so in its JSON."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ddp_exit_tally.py"


@pytest.mark.slow
def test_two_runs_exit_clean_and_are_tallied(tmp_path):
    out = tmp_path / "tally.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--runs", "2", "--diverge-every", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tally = json.loads(out.read_text())
    assert (tally["runs"], tally["all_ranks_exit_0"], tally["clean"], tally["failures"]) == (2, 2, 2, [])
    first, second = tally["records"]
    assert (first["strategy"], first["status"]) == ("ddp", "completed")
    assert (second["strategy"], second["status"]) == ("fsdp", "diverged")
    for record in tally["records"]:  # both ranks reported, and neither had gloo's threads left at exit
        assert record["ranks_reported"] == 2 and record["group_threads_at_exit"] == {}
    assert "runs 2; all ranks exit 0: 2" in proc.stdout
