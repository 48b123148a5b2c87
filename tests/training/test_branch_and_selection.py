"""What the studies' budget and selection rules stand on: a WSD decay branch off a longer run's stable phase *is*
the shorter run, and the held-out selection windows never overlap the judged ones."""

from __future__ import annotations

import json

import numpy as np
import pytest

from normtrain.config import compose
from normtrain.data import eval_starts, select_starts
from normtrain.training.trainer import train
from normtrain.util.errors import ConfigError

TINY = ["logger=none", "model.n_layers=1", "model.d_model=32", "model.n_heads=2", "model.seq_len=32",
        "train.batch_size=4", "train.eval_every=10", "train.eval_windows=16", "train.progress=false",
        "optim.schedule=wsd", "optim.warmup_steps=2", "train.select_windows=15", "monitor.every=5"]


def test_a_decay_branch_off_the_stable_phase_is_the_shorter_run_exactly(tmp_path):
    """T = 40, T/2 = 20: the T/2 run decays from step 16, which the T run passes at its peak lr; resuming the T
    run's checkpoint kept there with train.max_steps=20 gives the T/2 run's numbers to the last bit."""
    full = train(compose([*TINY, "train.max_steps=40", "train.keep_ckpt_at=[16]"]), run_dir=tmp_path / "full")
    fresh = train(compose([*TINY, "train.max_steps=20"]), run_dir=tmp_path / "half")
    branch = train(compose([*TINY, "train.max_steps=20", f"train.resume={tmp_path / 'full' / 'ckpt_step16.pt'}"]),
                   run_dir=tmp_path / "branch")
    assert (tmp_path / "full" / "ckpt_step16.pt").is_file() and full["status"] == "completed"
    assert branch["final_val_loss"] == fresh["final_val_loss"]
    assert branch["final_select_loss"] == fresh["final_select_loss"]
    assert branch["final_val_loss"] != full["final_val_loss"]
    rows = [json.loads(line) for line in (tmp_path / "branch" / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] >= 16 and "select/loss" in rows[-1]  # the branch logs only its own steps


def test_selection_windows_sit_between_the_judged_ones():
    n_tokens, seq_len = 100_000, 128
    judged, chosen = eval_starts(n_tokens, seq_len, 64), select_starts(n_tokens, seq_len, 64, 63)
    covered = np.zeros(n_tokens, dtype=bool)
    for s in judged:
        covered[s:s + seq_len + 1] = True
    assert len(chosen) == 63 and not any(covered[s:s + seq_len + 1].any() for s in chosen)
    assert len(set(select_starts(n_tokens, seq_len, 64, 10).tolist())) == 10


@pytest.mark.parametrize(("windows", "select", "says"), [(64, 64, "at most 63 fit"),
                                                         (900, 10, "leave no room between them")])
def test_selection_windows_that_cannot_fit_say_what_does(windows, select, says):
    with pytest.raises(ValueError, match=says):
        select_starts(100_000, 128, windows, select)


def test_keep_ckpt_at_outside_the_run_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="keep_ckpt_at"):
        train(compose([*TINY, "train.max_steps=10", "train.keep_ckpt_at=[10]"]), run_dir=tmp_path / "r")
