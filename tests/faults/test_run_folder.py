"""One writer per run folder; no stale summary; no leftovers; files as the umask says; signals during the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fault_helpers import VICTIM, comparable, run_victim, summary

import normtrain
from normtrain.checkpoint import CKPT_NAME, load_checkpoint
from normtrain.training.run_folder import LOCK_NAME
from normtrain.util.errors import RunFolderError


def start_long_run(overrides, run_dir) -> subprocess.Popen:
    spec = {"overrides": [*overrides, "train.max_steps=100000", "train.eval_every=0"], "run_dir": str(run_dir),
            "fault": {"kind": "none"}}
    proc = subprocess.Popen([sys.executable, str(VICTIM), json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (run_dir / "metrics.jsonl").exists():
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.1)
    return proc


@pytest.mark.slow
def test_a_second_run_on_a_held_folder_is_refused_and_a_dead_holder_is_taken_over(tiny, tmp_path, capfd):
    run_dir = tmp_path / "run"
    first = start_long_run(tiny, run_dir)
    try:
        with pytest.raises(RunFolderError, match=f"in use by pid {first.pid} on host"):
            normtrain.train(normtrain.compose([*tiny, "train.max_steps=5"]), run_dir=run_dir)
        proc = run_victim([*tiny, "train.max_steps=5"], run_dir, cli=True)  # the same, through the CLI
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and f"pid {first.pid}" in proc.stderr
        assert first.poll() is None  # the holder was not disturbed
        rows_before = (run_dir / "metrics.jsonl").read_text()
        assert rows_before  # and the refused run wrote nothing over it
    finally:
        first.kill()
        first.wait()
    assert str(first.pid) in (run_dir / LOCK_NAME).read_text()  # left behind by kill -9

    capfd.readouterr()
    result = normtrain.train(normtrain.compose([*tiny, "train.max_steps=5", "train.resume=none"]), run_dir=run_dir)
    assert result["status"] == "completed"
    err = capfd.readouterr().err
    assert "taking over the run folder" in err and f"pid {first.pid}" in err


def test_the_summary_says_running_while_a_run_is_under_way(tiny, tmp_path, monkeypatch):
    normtrain.train(normtrain.compose([*tiny, "train.max_steps=4"]), run_dir=tmp_path)
    assert summary(tmp_path)["status"] == "completed"
    seen = {}
    from normtrain.data import batches

    original = batches.BatchSampler.next_batch

    def next_batch(self):
        seen.setdefault("status", summary(tmp_path)["status"])  # what a reader finds mid-run
        return original(self)

    monkeypatch.setattr(batches.BatchSampler, "next_batch", next_batch)
    normtrain.train(normtrain.compose([*tiny, "train.max_steps=4", "train.resume=none"]), run_dir=tmp_path)
    assert seen["status"] == "running"


def test_leftover_temporary_files_are_swept_and_files_follow_the_umask(tiny, tmp_path):
    tmp_path.joinpath(".ckpt.pt.x1y2z3.tmp").write_bytes(b"half a checkpoint")
    tmp_path.joinpath(".summary.json.abc.tmp").write_text("{")
    old = os.umask(0o002)
    try:
        normtrain.train(normtrain.compose([*tiny, "train.max_steps=3"]), run_dir=tmp_path)
    finally:
        os.umask(old)
    assert not list(tmp_path.glob(".*.tmp"))
    for name in (CKPT_NAME, "summary.json", "metrics.jsonl"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o664, name  # not mkstemp's 0600


def test_a_second_signal_during_the_final_write_waits_for_it(tiny, tmp_path, monkeypatch):
    from normtrain import checkpoint
    from normtrain.data import batches

    original_next, original_save = batches.BatchSampler.next_batch, checkpoint.save_checkpoint

    def next_batch(self):
        if self.batches_drawn == 6:
            os.kill(os.getpid(), signal.SIGTERM)  # the first signal: stop after this step
        return original_next(self)

    def save(run_dir, state):
        os.kill(os.getpid(), signal.SIGINT)  # the second, while the final checkpoint is written
        os.kill(os.getpid(), signal.SIGTERM)  # and a third
        return original_save(run_dir, state)

    monkeypatch.setattr(batches.BatchSampler, "next_batch", next_batch)
    monkeypatch.setattr(checkpoint, "save_checkpoint", save)  # the Checkpointer's one-file writer
    result = normtrain.train(normtrain.compose([*tiny, "train.max_steps=50"]), run_dir=tmp_path)
    assert result["status"] == "interrupted" and result["steps"] == 7
    assert summary(tmp_path)["status"] == "interrupted" and load_checkpoint(tmp_path / CKPT_NAME)["step"] == 7
    monkeypatch.undo()
    done = normtrain.train(normtrain.compose([*tiny, "train.max_steps=10"]), run_dir=tmp_path)
    assert done["status"] == "completed" and done["resumed_from_step"] == 7
    assert [r["step"] for r in comparable(tmp_path)] == [0, 5, 9, 10]  # 9: the last step, 10: the final eval
