"""scripts/mutation_check.py: every planted bug still applies to the code, and a sample of them is caught by the
formula tests (the whole set: run the script; it prints the score)."""

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mutation_check.py"
CHECK = runpy.run_path(str(SCRIPT), run_name="mutation_check")


def test_every_mutant_applies_to_todays_code_once():
    assert CHECK["check_applicable"]() == []
    mutants = CHECK["MUTANTS"]
    assert len(mutants) >= 40 and len({m.kind for m in mutants}) == 6
    assert len({m.name for m in mutants}) == len(mutants)


@pytest.mark.slow
def test_a_sample_of_planted_bugs_is_caught_by_the_formula_tests():
    sample = ["qk-norm-per-head-after-rope", "peri-output-norms-swapped", "depth-scale-l-plus-one"]
    proc = subprocess.run([sys.executable, str(SCRIPT), "--jobs", "2", "--only", *sample], capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mutation score: 3/3 caught" in proc.stdout
    caught = [line for line in proc.stdout.splitlines() if line.startswith("caught")]
    assert len(caught) == 3 and all(any(name in line for line in caught) for name in sample)
    assert all("test_" in line for line in caught)  # each names the formula test that failed
