"""A trained model's measurement kept in its run folder (normtrain/reproduce/kept.py): re-read while the checkpoint
and the code are the ones that made it, made again when either changes, and standing in for a checkpoint a pack left
behind only while the code is the same and the file is no older than the run."""

from __future__ import annotations

import json
import os

import pytest

from normtrain.reproduce.kept import digest, kept_measurement
from normtrain.util.errors import StudyError


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "summary.json").write_text('{"status": "completed"}')
    (tmp_path / "ckpt.pt").write_bytes(b"weights")
    return tmp_path


def counting(calls: list, value: float = 1.5):
    return lambda: calls.append(1) or {"loss": value}


def test_a_measurement_is_made_once_and_again_only_for_another_checkpoint_or_other_code(run_dir):
    calls: list = []
    assert kept_measurement(run_dir, "m.json", "code v1", counting(calls)) == {"loss": 1.5}
    assert kept_measurement(run_dir, "m.json", "code v1", counting(calls, 9.0)) == {"loss": 1.5} and len(calls) == 1
    ckpt = run_dir / "ckpt.pt"
    os.utime(ckpt, ns=(ckpt.stat().st_atime_ns, ckpt.stat().st_mtime_ns + 10**9))  # a retrained run's checkpoint
    assert kept_measurement(run_dir, "m.json", "code v1", counting(calls, 2.0)) == {"loss": 2.0} and len(calls) == 2
    assert kept_measurement(run_dir, "m.json", "code v2", counting(calls, 3.0)) == {"loss": 3.0} and len(calls) == 3


def test_a_file_kept_before_the_code_key_existed_is_reused_and_given_it(run_dir):
    stat = (run_dir / "ckpt.pt").stat()
    old = {"key": digest(f"{stat.st_size}:{stat.st_mtime_ns}\ncode"), "scores": {"loss": 0.5}}  # the earlier format
    (run_dir / "m.json").write_text(json.dumps(old))
    calls: list = []
    assert kept_measurement(run_dir, "m.json", "code", counting(calls)) == {"loss": 0.5} and calls == []
    assert json.loads((run_dir / "m.json").read_text())["code"] == digest("code")


def test_without_its_checkpoint_the_kept_file_stands_in_only_while_it_is_of_this_code_and_this_run(run_dir):
    kept_measurement(run_dir, "m.json", "code", counting([]))
    (run_dir / "ckpt.pt").unlink()  # left behind by a pack
    never = counting(calls := [])
    assert kept_measurement(run_dir, "m.json", "code", never) == {"loss": 1.5} and calls == []
    with pytest.raises(StudyError, match="checkpoint is gone.*other code"):
        kept_measurement(run_dir, "m.json", "other code", never)
    os.utime(run_dir / "m.json", (0, 0))  # older than the run's summary: of an earlier run of this folder
    with pytest.raises(StudyError, match="older than the run"):
        kept_measurement(run_dir, "m.json", "code", never)
    assert calls == []
