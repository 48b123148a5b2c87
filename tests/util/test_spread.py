"""One spread: a table cell, the compare report's seed band and a write-up show the same mean ± sample sd (n)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from normtrain.compare import write_report
from normtrain.study import stats
from normtrain.util.spread import mean_sd

LOSSES = (2.50, 2.53, 2.56)  # mean 2.53, sample sd 0.03 (the population sd would be 0.0245)


def write_runs(root, losses):
    """One run folder per seed whose train and val loss end at ``losses[seed]``."""
    folders = []
    for seed, loss in enumerate(losses):
        folder = root / f"run{seed}"
        folder.mkdir(parents=True)
        rows = [{"step": 0, "train/loss": 5.0, "val/loss": 5.0}, {"step": 10, "train/loss": loss, "val/loss": loss}]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        config = {"model": {"n_layers": 2}, "norm": {"name": "rmsnorm"}, "train": {"seed": seed}}
        (folder / "summary.json").write_text(json.dumps({"status": "completed", "steps": 10, "final_val_loss": loss,
                                                         "config": config}))
        folders.append(folder)
    return folders


def test_table_and_report_show_the_same_spread(tmp_path):
    page = write_report(write_runs(tmp_path, LOSSES), tmp_path / "report.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="normtrain-data">(.*?)</script>', page, re.S)[1])
    (band,) = [r for r in data["datasets"]["loss:groups"] if r.get("k") == "validation"]
    last = band["step"].index(10)
    shown_in_report = f"{band['mean'][last]:.3f} ± {band['std'][last]:.3f} (n={band['n'][last]})"

    assert stats.spread(LOSSES) == "2.530 ± 0.030 (n=3)"
    assert shown_in_report == stats.spread(LOSSES)
    assert band["std"][last] == pytest.approx(0.03, rel=1e-3)  # n − 1, not n


def test_mean_sd_is_the_sample_sd_of_the_finite_values():
    table = np.array([[1.0, 2.0, math.nan], [3.0, math.inf, 5.0], [5.0, 4.0, math.nan]])
    mean, sd, n = mean_sd(table)
    np.testing.assert_allclose(mean, [3.0, 3.0, 5.0])
    np.testing.assert_allclose(sd, [2.0, math.sqrt(2.0), 0.0])  # statistics.stdev([1, 3, 5]) = 2; one value: 0
    assert n.tolist() == [3, 2, 1]
    assert stats.spread([1.0, 3.0, 5.0, math.inf, None]) == "3.000 ± 2.000 (n=3), +1 ∞"
