"""What normtrain writes into a checkout by default is ignored by git: token shards under ``data/`` (README's
``$NORMTRAIN_DATA`` default), run folders, sweeps; a GPU reproduction's runs (summaries and metrics, beside its
result; their checkpoints are kept out by the folder's own .gitignore) are not."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", ["data/train.bin", "data/fineweb/meta.json", "outputs/x/summary.json",
                                  "multirun/x/0/summary.json", "runs/x/summary.json"])
def test_default_output_folders_are_ignored(path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path


@pytest.mark.parametrize("path", ["normtrain/data/__init__.py", "configs/data/c4.yaml",
                                  "experiments/x-gpu/runs/a/summary.json",
                                  "experiments/x-gpu/runs_half/a/metrics.jsonl"])
def test_the_package_data_modules_and_config_group_are_not_ignored(path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 1, path
