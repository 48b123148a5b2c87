"""--budget buys seeds first down to 5, then trims the grid to its 3 central values, then fewer seeds, and says
what it could not buy; on a GPU --jobs defaults to the runs that fit its free memory."""

from __future__ import annotations

import pytest

from normtrain.ablate import estimate
from normtrain.ablate.estimate import Timing, central, fit_budget
from normtrain.ablate.spec import Asked, parse

SHARED = ["logger=none", "model.n_layers=1", "model.d_model=16", "model.n_heads=2", "model.seq_len=16",
          "optim.schedule=wsd", "optim.warmup_steps=2", "train.max_steps=20", "train.eval_every=0"]
TIMING = Timing(step_s=1.0, fixed_s=0.0, eval_s=0.0)  # a run of T=20 steps: 20 s; its T/2 branch (from step 8): 2 s
UNIT = 22  # one arm, value and seed: its T run and its branch


def spec(grid="1e-3,2e-3,4e-3,8e-3,1.6e-2", seeds=8):
    return parse(Asked(["placement=pre,peri", *SHARED], grid=grid, seeds=seeds))


def minutes(runs_s: float) -> float:
    return runs_s / 60


def test_the_whole_plan_is_kept_when_it_fits(tmp_path):
    s = spec()
    full = 2 * 5 * 8 * UNIT  # arms × values × seeds × (T run + T/2 branch), one job
    fitted = fit_budget(s, tmp_path, 1, TIMING, minutes(full))
    assert fitted.spec == s and fitted.missed == [] and fitted.found.elapsed_s == pytest.approx(full)


def test_seeds_go_first_down_to_five_then_the_grid_to_its_three_central_values(tmp_path):
    s = spec()
    fitted = fit_budget(s, tmp_path, 1, TIMING, minutes(2 * 5 * 6 * UNIT))
    assert len(fitted.spec.seeds) == 6 and fitted.spec.grid == s.grid
    assert fitted.missed[0].startswith("seeds 6, 7 (about")
    fitted = fit_budget(s, tmp_path, 1, TIMING, minutes(2 * 3 * 8 * UNIT))  # 5 seeds of 5 values do not fit
    assert fitted.spec.grid == (2e-3, 4e-3, 8e-3) and len(fitted.spec.seeds) == 8
    assert any("values 0.001, 0.016" in m for m in fitted.missed)
    fitted = fit_budget(s, tmp_path, 1, TIMING, minutes(2 * 3 * 3 * UNIT))
    assert fitted.spec.grid == (2e-3, 4e-3, 8e-3) and len(fitted.spec.seeds) == 3
    assert fit_budget(s, tmp_path, 1, TIMING, minutes(2 * 3 * 2 * UNIT) - 0.01) is None


def test_jobs_divide_the_time(tmp_path):
    fitted = fit_budget(spec(), tmp_path, 4, TIMING, minutes(2 * 5 * 8 * UNIT / 4))
    assert fitted.missed == []


def test_central_values_keep_the_middle():
    assert central((1, 2, 4, 8, 16)) == (2, 4, 8) and central((1, 2, 4, 8)) == (2, 4, 8)
    assert central((1, 2, 4)) == (1, 2, 4)


def test_on_a_gpu_jobs_are_the_runs_that_fit_its_free_memory(monkeypatch):
    import torch

    from normtrain.training import memory

    s = spec(grid="1e-3,2e-3,4e-3", seeds=2)
    assert estimate.gpu_jobs(s, 16) is None or torch.cuda.is_available()  # a CPU machine: one run per core
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    need = max(memory.estimate(normtrain_cfg(s, arm), 257).total() for arm in s.arms)
    monkeypatch.setattr(memory, "available", lambda device: (10 * need / estimate.SAFETY, "free on a test GPU"))
    assert estimate.gpu_jobs(s, 16) == 10
    assert estimate.gpu_jobs(s, 4) == 4  # at most one per core
    monkeypatch.setattr(memory, "available", lambda device: (need / 100, "free on a test GPU"))
    assert estimate.gpu_jobs(s, 16) == 1


def normtrain_cfg(s, arm):
    from normtrain.config import compose

    return compose([*s.shared, f"{s.arm_key}={arm}"])
