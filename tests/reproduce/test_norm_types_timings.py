"""norm_types' timings (stamped with when and at which code they were measured, and reused by a rerun), its grid,
and its v5 analysis on synthetic rows."""

from __future__ import annotations

import math

import pytest

from normtrain.reproduce.norm_types import ARM_LRS, STAMP, saved_timings, timing_note
from normtrain.reproduce.writeup import write_csv
from normtrain.study import best_lr

SETUP = "4 layers, d 64, batch 16 × 128"
STAMPED = {"device": "cpu", "setup": SETUP, "measured_at": "2026-11-27T14:25:00+00:00", "code_commit": "f574d06f" * 5,
           "code_dirty": False}


def timing(norm: str, ms: float, **stamp) -> dict:
    return {"norm": norm, "timing": "training step", "implementation": "x", "repeat": "0", "time_ms": ms, **stamp}


def test_a_rerun_reads_back_the_timings_it_wrote(tmp_path):
    path = tmp_path / "timings.csv"
    rows = [timing("layernorm", 272.5, **STAMPED), timing("rmsnorm", 280.125, **STAMPED)]
    write_csv(rows, path)
    again = saved_timings(path, "cpu", SETUP)
    assert [t["time_ms"] for t in again] == [272.5, 280.125]  # numbers again, not text
    assert all(t[k] for t in again for k in STAMP)
    assert timing_note(again) == ["Timings measured at 2026-11-27T14:25:00+00:00 on cpu, code `f574d06ff5` "
                                  "(timings.csv); a rerun reuses them, `--fresh` times again."]
    assert saved_timings(path, "cuda", SETUP) == []  # another kind of device times again
    assert saved_timings(path, "cpu", "6 layers, d 128, batch 16 × 128") == []  # and another model (v3's)


def test_unstamped_or_missing_timings_are_measured_again(tmp_path):
    path = tmp_path / "timings.csv"
    assert saved_timings(path, "cpu", SETUP) == []
    write_csv([timing("layernorm", 272.5)], path)  # written before the stamp existed
    assert saved_timings(path, "cpu", SETUP) == []
    write_csv([timing("layernorm", 272.5, **{**STAMPED, "code_commit": None})], path)  # not a git checkout
    assert saved_timings(path, "cpu", SETUP) == []
    assert timing_note([timing("layernorm", 1.0)]) == []
    dirty = timing_note([timing("layernorm", 1.0, **{**STAMPED, "code_dirty": True})])
    assert "a dirty tree" in dirty[0]


def test_a_smoke_run_times_a_few_steps_with_progress_not_minutes_in_silence(tmp_path, monkeypatch, capsys):
    """Issue 38: `--smoke` spent about 4 minutes timing in silence. It now times SMOKE's few steps and calls, and
    says so: a line when the phase starts and a progress count of its measurements (18 = 3 norms × (2 step
    repeats + 2 × 2 call repeats))."""
    import normtrain.reproduce.norm_types as norm_types
    from normtrain.reproduce.cli import make_plan

    seen = {}

    def step_times(base, device, timing, bar):
        seen["steps"] = timing
        bar.update(3 * timing.repeats)
        return []

    def call_times(tokens, d, device, timing, bar):
        seen["calls"] = timing
        bar.update(6 * timing.call_repeats)
        return []

    monkeypatch.setattr(norm_types, "step_times", step_times)
    monkeypatch.setattr(norm_types, "call_times", call_times)
    plan = make_plan("norm_types", smoke=True, out=tmp_path, runs_dir=tmp_path)
    norm_types.NormTypes.time_norms(plan, plan.compose(plan.combos()[0]), "cpu")
    assert seen == {"steps": norm_types.SMOKE, "calls": norm_types.SMOKE}
    assert norm_types.SMOKE.total(3) == 18 and norm_types.FULL.total(3) == 63
    said = capsys.readouterr().err
    assert "norm_types: timing the training step" in said and "timing: measurement 18/18 (100%)" in said
    full = make_plan("norm_types", out=tmp_path, runs_dir=tmp_path)
    monkeypatch.setattr(norm_types, "step_times", step_times)
    norm_types.NormTypes.time_norms(full, full.compose(full.combos()[0]), "cpu")
    assert seen["steps"] == norm_types.FULL  # the real experiment's timing is untouched


def test_the_loss_panel_shows_a_single_evaluation_far_above_the_line():
    """Issue 38: a smoke run evaluates once, at step 4, far above the unigram line; the panel's range clipped it
    away and a one-point curve drew nothing. The range now holds every curve's last point, drawn as a marker."""
    from normtrain.study import plots

    fig, axes = plots.figure()
    plots.curves(axes[0], [[(4.0, 5.43)]], "#1f77b4", "layernorm")
    plots.loss_range(axes[0], 3.41, [[(4.0, 5.43)]])
    low, high = axes[0].get_ylim()
    assert low < 3.41 and high > 5.43 and axes[0].lines[0].get_marker() == "o"
    fig2, ax2 = plots.figure()
    full = [[(0.0, 5.5), (500.0, 2.9), (1000.0, 2.5)]]  # a real run: the start's 5.5 is cut, the rest kept
    plots.loss_range(ax2[0], 3.4, full)
    assert ax2[0].get_ylim()[1] == 3.4 + 0.4 and ax2[0].get_ylim()[0] < 2.5


def test_each_norm_runs_its_own_three_lrs_around_its_v6_best_and_a_norm_it_does_not_name_runs_the_whole_axis():
    from normtrain.reproduce.norm_types import EXTENSION_LRS, NormTypes
    from normtrain.study.plan import sweep_axes

    axes = sweep_axes("norm_types")
    assert axes["norm"] == ["layernorm", "rmsnorm"] and len(axes["train.seed"]) == 5
    keeps = NormTypes().keeps
    for norm, lrs in ARM_LRS.items():
        kept = sorted(float(lr) for lr in axes["optim.lr"] if keeps({"norm": norm, "optim.lr": lr}))
        assert kept == sorted(lrs + EXTENSION_LRS.get(norm, ())) and len(lrs) == 3
        assert all(math.isclose(b / a, 2.5) for a, b in zip(kept, kept[1:], strict=False))  # a log grid
    assert EXTENSION_LRS == {}  # v7: no edge extension yet (its registered rule would add one here)
    assert ARM_LRS["layernorm"][1] == ARM_LRS["rmsnorm"][1] == 5e-3  # v6's best for both, in the middle
    assert all(keeps({"norm": "prmsnorm", "optim.lr": lr}) for lr in axes["optim.lr"])  # an override's norm: all


JITTER = (-0.002, 0.001, 0.0, 0.002, -0.001)  # RMSNorm's offset from its gap, seeds 20–24


def norm_rows(gap: float, steps: int) -> list[dict]:
    """Both norms at every lr of their grid, seeds 20–24, at ``steps``: each best at its grid's middle lr (5e-3,
    0.2 nats below its neighbours), RMSNorm ``gap`` nats above LayerNorm there and everywhere, ±0.002 apart by seed
    so the interval has a width; selection loss = judged loss."""
    rows = []
    for norm, lrs in ARM_LRS.items():
        for i, lr in enumerate(lrs):
            for k, seed in enumerate(range(20, 25)):
                v = 1.2 + 0.2 * abs(i - 1) + 0.01 * k + (gap + JITTER[k] if norm == "rmsnorm" else 0.0)
                rows.append({"norm": norm, "optim.lr": str(lr), "train.seed": str(seed), "status": "completed",
                             "steps": steps, "final_val_loss": v, "select_loss": v, best_lr.SELECTION: v,
                             "val_quarter_drop": 0.03, "unigram_val_loss": 3.3})
    return rows


@pytest.mark.parametrize(("gap", "half_gap", "verdict"), [
    (0.003, 0.003, "reproduced"),
    (0.003, 0.05, "inconclusive (budget-sensitive)"),
    (0.1, 0.1, "not reproduced"),
])
def test_norm_types_v5_reads_the_equivalence_at_t_and_at_half_the_steps(gap, half_gap, verdict, tmp_path):
    """norm_types' v5 analysis, each norm at its own best lr (inside its grid): RMSNorm 0.003 nats above LayerNorm at
    T (4000 steps) and T/2 (2000) has its 90% t interval inside ±0.02 at both; 0.05 above at T/2 lies wholly
    outside the band there while inside at T (budget-sensitive); 0.1 above at both lies outside: refuted."""
    from normtrain.reproduce.norm_types import NormTypes
    from normtrain.study.plan import Plan
    from normtrain.study.verdicts import decide

    exp = NormTypes()
    rows = norm_rows(gap, 4000) + norm_rows(half_gap, 2000)
    findings = exp.analyse(rows, Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    assert findings.measured["rms_minus_ln_at_best@half"][""] == pytest.approx(
        {str(s): half_gap + j for s, j in zip(range(20, 25), JITTER, strict=True)})
    assert not [k for k in findings.measured if "@alt:" in k]  # no near-tied runner-up: 0.2 nats, no spread
    assert decide(exp.registration, findings.measured, findings.unit).verdict == verdict
