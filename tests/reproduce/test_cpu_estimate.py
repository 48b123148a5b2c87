"""``normtrain-reproduce NAME --plan-only`` at --scale cpu: the runs, those a rerun reuses, and the time the rest
take by the committed runs' own times (normtrain/reproduce/cpu_estimate.py)."""

from __future__ import annotations

import csv
import re

import pytest

from normtrain.reproduce.cli import main, make_plan
from normtrain.reproduce.cpu_estimate import NOT_COUNTED, estimate, normal
from normtrain.study.grid import MEASUREMENT


def test_one_spelling_per_value_so_the_grid_meets_the_csv():
    assert normal("1.25e-2") == normal("0.0125") and normal("3e-4") == normal(0.0003)
    assert normal("false") == normal("False") and normal("None") == normal("") == normal("null")
    assert normal("per_head") == "per_head" and normal("1.25e-2") != normal("1.25e-3")


def write_runs_csv(path, combos, seconds) -> None:
    """A committed runs.csv: one row per combo, its own time ``seconds(combo)`` (None: the row left out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    axes = list(combos[0])
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*axes, "status", "wall_time_s"])
        w.writeheader()
        for c in combos:
            if (s := seconds(c)) is not None:
                w.writerow({**c, "status": "completed", "wall_time_s": s})


def finish(plan, combo, seconds: float = 1.0) -> None:
    """A measurement of ``combo`` left by an earlier invocation, as measure_grid writes it."""
    from normtrain.config import to_container
    from normtrain.util.atomic import write_json

    write_json(plan.run_dir(combo) / MEASUREMENT, {"value": 0.0, "config": to_container(plan.compose(combo)),
                                                  "wall_time_s": seconds})


def test_finished_runs_are_reused_and_the_rest_timed_by_the_committed_ones(tmp_path, capsys):
    out, runs = tmp_path / "xiong_grad_init", tmp_path / "runs"
    plan = make_plan("xiong_grad_init", out=out, runs_dir=runs, progress=False, jobs=2)
    combos = plan.combos()

    def seconds(c):  # 6 layers have no committed run; the seed does not matter, the median over seeds counts
        n = int(c["model.n_layers"])
        return None if n == 6 else 60.0 * n + (30.0 if c["train.seed"] == "1" else 0.0)

    write_runs_csv(out / "runs.csv", combos, seconds)
    for c in combos[:3]:
        finish(plan, c)
    found = estimate(plan, out / "runs.csv", [])
    todo = combos[3:]
    assert (found.runs, found.reused, found.to_run) == (len(combos), 3, len(combos) - 3)
    assert found.untimed == sum(c["model.n_layers"] == "6" for c in todo)
    assert found.own_s == sum(60.0 * int(c["model.n_layers"]) for c in todo if c["model.n_layers"] != "6")
    assert found.elapsed_s == found.own_s / 2

    assert main(["xiong_grad_init", "--plan-only", "--out", str(out), "--runs-dir", str(runs), "--jobs", "2"]) == 0
    said = capsys.readouterr().out
    assert f"{len(combos)} runs, 3 finished in the runs folder; {len(todo)} to train" in said
    assert f"about {found.own_s / 120:.0f} min at --jobs 2" in said and f"{found.untimed} with no committed" in said
    assert NOT_COUNTED in said and len(list(runs.glob(f"*/{MEASUREMENT}"))) == 3  # nothing run or written


@pytest.mark.parametrize(("finished", "slower", "scaled"), [(3, 1.5, True), (2, 1.5, False), (3, 1.05, False)])
def test_a_resumed_invocation_scales_the_rest_by_how_long_its_own_finished_runs_took(tmp_path, finished, slower,
                                                                                     scaled):
    """Three finished runs that took 1.5× their committed times make the rest 1.5× too, and the text says so;
    two are too few to read a machine by, and 5% is within what the committed times promise."""
    out, runs = tmp_path / "xiong_grad_init", tmp_path / "runs"
    plan = make_plan("xiong_grad_init", out=out, runs_dir=runs, progress=False, jobs=2)
    combos = plan.combos()
    committed = {tuple(c.items()): 60.0 * int(c["model.n_layers"]) for c in combos}
    write_runs_csv(out / "runs.csv", combos, lambda c: committed[tuple(c.items())])
    for c in combos[:finished]:
        finish(plan, c, slower * committed[tuple(c.items())])
    found = estimate(plan, out / "runs.csv", [])
    rest = sum(committed[tuple(c.items())] for c in combos[finished:])
    assert found.own_s == pytest.approx(slower * rest if scaled else rest)
    assert (f"The {finished} runs finished in the runs folder took {slower:.2f}× their committed times"
            in found.text()) == scaled


def test_without_committed_runs_or_with_overrides_the_estimate_says_so(tmp_path):
    plan = make_plan("norm_types", out=tmp_path / "out", runs_dir=tmp_path / "runs", progress=False)
    found = estimate(plan, tmp_path / "out" / "runs.csv", ["train.max_steps=100"])
    assert found.own_s == 0 and found.untimed == found.runs == found.to_run > 0
    text = found.text()
    assert "No committed runs at" in text and "train.max_steps=100 may change them" in text


def test_all_adds_up_the_experiments_one_after_another(tmp_path, capsys):
    # a committed pack (--pack) is restored into the runs folder, as the run would, so some runs may be finished
    assert main(["all", "--plan-only", "--runs-dir", str(tmp_path / "runs")]) == 0
    lines = capsys.readouterr().out.splitlines()
    each = [float(m.group(1)) for line in lines if (m := re.search(r"about (\d+) min at --jobs", line))]
    total = re.search(r"all at --scale cpu: 15 experiments, (\d+) runs, (\d+) to train: .* about ([\d.]+) h", lines[-2])
    assert total and 0 < int(total.group(2)) <= int(total.group(1))
    assert len(each) == 15 and abs(sum(each) / 60 - float(total.group(3))) < 0.15
    assert lines[-1] == NOT_COUNTED + "."


def test_half_budget_runs_and_new_learning_rates_are_timed_from_the_committed_runs(tmp_path, capsys):
    from normtrain.reproduce.xiong_warmup import Warmup

    out, runs = tmp_path / "xiong_warmup", tmp_path / "runs"
    plan = make_plan("xiong_warmup", out=out, runs_dir=runs, progress=False, jobs=2)
    combos = plan.combos()
    # Pre-LN at 8e-3 was never run: timed by Pre-LN's other lrs (100 s), as a re-registration's new point is
    write_runs_csv(out / "runs.csv", combos, lambda c: None if float(c["optim.lr"]) == 8e-3 else
                   (100.0 if c["placement"] == "pre" else 200.0))
    t, half, full = Warmup().budgets(plan)
    share = (full // 2 - half.branch_step) / full
    assert (full, half.branch_step, share) == (2000, 800, 0.1)  # WSD: the T/2 run's decay starts at step 800
    found = estimate(t, out / "runs.csv", [], half=(half, share))
    per_seed_post, per_seed_pre = 8, 8
    seeds = len({c["train.seed"] for c in combos})
    assert found.runs == 2 * len(combos) and found.untimed == 0
    assert found.own_s == pytest.approx(seeds * 1.1 * (per_seed_post * 200.0 + per_seed_pre * 100.0))
    assert "T/2 runs" in found.text() and "timed by the committed runs at the point's other" in found.text()


def test_committed_runs_of_another_length_are_scaled_to_todays_steps_and_say_so(tmp_path):
    out = tmp_path / "xiong_warmup"
    plan = make_plan("xiong_warmup", out=out, runs_dir=tmp_path / "runs", progress=False, jobs=2)
    combos = plan.combos()
    out.mkdir(parents=True)
    with (out / "runs.csv").open("w", newline="") as f:  # an earlier design's runs: 1000 steps, 100 s each
        w = csv.DictWriter(f, fieldnames=[*combos[0], "status", "wall_time_s", "val_curve"])
        w.writeheader()
        for c in combos:
            w.writerow({**c, "status": "completed", "wall_time_s": 100.0, "val_curve": "0:5.5 500:3.0 1000:2.5"})
    found = estimate(plan, out / "runs.csv", [])
    assert found.own_s == pytest.approx(len(combos) * 200.0)  # today's runs are 2000 steps: twice as long
    assert "trained 1000 steps; their times are scaled to today's 2000" in found.text()


def test_a_committed_decay_branch_is_timed_by_the_steps_it_trained(tmp_path):
    """A v5 runs.csv holds the T runs (0 to 2000) and their T/2 decay branches (800 to 1000, a tenth of the
    time): a branch's 18 s is 200 steps, so both time a 2000-step run at 180 s, not the branch at 36 s."""
    out = tmp_path / "xiong_warmup"
    plan = make_plan("xiong_warmup", out=out, runs_dir=tmp_path / "runs", progress=False, jobs=2)
    combos = plan.combos()
    out.mkdir(parents=True)
    with (out / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*combos[0], "status", "wall_time_s", "val_curve", "steps"])
        w.writeheader()
        for c in combos:
            w.writerow({**c, "status": "completed", "wall_time_s": 180.0, "val_curve": "0:5.5 1000:3.0 2000:2.5",
                        "steps": 2000})
            w.writerow({**c, "status": "completed", "wall_time_s": 18.0, "val_curve": "800:2.7 900:2.6 1000:2.58",
                        "steps": 1000})
    found = estimate(plan, out / "runs.csv", [])
    assert found.own_s == pytest.approx(len(combos) * 180.0)
    assert "trained 200, 2000 steps" in found.text()
