"""kill -9 at 21 points (random steps, inside checkpoint, metrics and summary writes), each followed by a
resume: the run folder must end with exactly the rows of an uninterrupted run.

Each chain kills the same run several times in a row (resuming, then killing again) before the last
resume completes it in this process, so "any number of kill -9 + resume cycles" is exercised too.
"""

from __future__ import annotations

import random
import signal

import pytest
from fault_helpers import comparable, run_victim, summary

import normtrain
from normtrain.checkpoint import CKPT_NAME, load_checkpoint
from normtrain.training.run_folder import LOCK_NAME

pytestmark = pytest.mark.slow

MAX_STEPS = 24  # fault_run's length
# n = None: drawn at random (reproducibly) among the points the rest of the run still reaches.
CHAINS = {
    "random_steps": [("step", None)] * 7,
    "inside_writes": [("ckpt_partial", None), ("ckpt_replace", None), ("metrics_line", None), ("summary", 1),
                      ("ckpt_partial", 1), ("metrics_line", 1), ("ckpt_replace", None)],
    "mixed": [("step", None), ("ckpt_partial", None), ("step", None), ("metrics_line", None), ("ckpt_replace", 1),
              ("step", 1), ("summary", 2)],  # the final summary write: the checkpoint at MAX_STEPS is already there
}


def reachable(kind: str, run_dir) -> int:
    """How many points of this kind a fresh process resuming ``run_dir`` passes before the run ends."""
    ckpt = run_dir / CKPT_NAME
    left = MAX_STEPS - (load_checkpoint(ckpt)["step"] if ckpt.exists() else 0)
    # Only points before the checkpoint at MAX_STEPS, so a later fault of the chain still has steps to hit.
    return {"step": left, "ckpt_partial": left // 3, "ckpt_replace": left // 3, "metrics_line": left // 2}[kind]


_references: dict[tuple, tuple] = {}


@pytest.fixture
def reference(fault_run, tmp_path_factory):
    """The uninterrupted run (trained once per session)."""
    key = tuple(fault_run)
    if key not in _references:
        run_dir = tmp_path_factory.mktemp("reference")
        _references[key] = normtrain.train(normtrain.compose(fault_run), run_dir=run_dir), comparable(run_dir)
    return _references[key]


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_kill_9_then_resume_gives_the_rows_of_an_uninterrupted_run(chain, fault_run, reference, tmp_path):
    whole, whole_rows = reference
    run_dir = tmp_path / "run"
    rng = random.Random(chain)
    for kind, n in CHAINS[chain]:
        n = n or rng.randint(1, reachable(kind, run_dir))
        proc = run_victim(fault_run, run_dir, kind, n)
        assert proc.returncode == -signal.SIGKILL, (kind, n, proc.returncode, proc.stderr[-2000:])
        assert summary(run_dir)["status"] == "running"  # never a stale or half-written record

    final = normtrain.train(normtrain.compose(fault_run), run_dir=run_dir)  # the last resume, in this process
    assert final["status"] == "completed" and final["steps"] == MAX_STEPS
    assert comparable(run_dir) == whole_rows  # same steps, same values, bit for bit (timing keys aside)
    assert final["final_val_loss"] == whole["final_val_loss"] and final["best_val_loss"] == whole["best_val_loss"]
    assert load_checkpoint(run_dir / CKPT_NAME)["step"] == MAX_STEPS
    assert not list(run_dir.glob(".*.tmp")), "a killed writer's temporary file was left behind"
    assert (run_dir / LOCK_NAME).read_text() == ""  # released
