"""``--smoke`` and ``--quick`` are not results and every output says so; a smoke run says nothing of settings it
chose itself; ``--quick`` runs one seed at each arm's committed best lr and gives a direction, never a verdict;
``--scale gpu --plan-only`` is a short table whose default plan fits (issue 57, items 6 and 7)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PIL import Image

from normtrain.reproduce import EXPERIMENTS, marks, quick
from normtrain.reproduce.cli import ReproduceError, main, make_plan
from normtrain.reproduce.gpu_scale import ASSUMED_H100
from normtrain.study import best_lr, plots
from normtrain.study.plan import SEED_AXIS, smoke_settings, sweep_axes
from normtrain.training.optim import schedule_warnings

SMALL = ["model.d_model=32", "model.n_heads=2"]  # deepnet_depth's depths are its axis: they stay


@pytest.fixture
def local(text_corpus) -> list[str]:
    return ["data=local_text", f"data.path={text_corpus}", "model.seq_len=32", *SMALL]


@pytest.mark.parametrize("name", ["deepnet_depth", "xiong_warmup", "dyt_tokens"])
def test_a_smoke_run_shortens_its_warm_up_with_its_steps_so_nothing_warns_about_its_own_settings(name):
    """deepnet_depth's 100-step warm-up made every 4-step smoke run all warm-up, and the trainer said so 8 times."""
    plan = make_plan(name, smoke=True)
    runs = EXPERIMENTS[name]().runs_plan(plan)
    cfgs = [runs.compose(c) for c in runs.combos()]
    assert not [w for c in cfgs for w in schedule_warnings(c.optim, c.train.max_steps)]
    assert any(c.optim.warmup_steps > 0 for c in cfgs)  # a registered warm-up stays one, shorter


def test_the_smoke_warm_up_shrinks_in_proportion_along_an_axis_too():
    cfg = make_plan("xiong_warmup").compose(make_plan("xiong_warmup").combos()[0])
    overrides, grid = smoke_settings(cfg, {"optim.warmup_steps": ["0", "200"], SEED_AXIS: ["5", "6"]})
    assert grid == {"optim.warmup_steps": ["0", "1"], SEED_AXIS: ["5"]} and "train.max_steps=4" in overrides
    overrides, _ = smoke_settings(make_plan("deepnet_depth").compose(make_plan("deepnet_depth").combos()[0]), {})
    assert overrides[-1] == "optim.warmup_steps=1"  # 100 of 1000 steps: 1 of 4


def test_a_marked_figure_carries_its_mark_in_the_picture_and_in_its_title(tmp_path):
    def draw(path: Path) -> None:
        fig, axes = plots.figure()
        axes[0].plot([0, 1], [0, 1])
        plots.save(fig, path)

    draw(tmp_path / "plain.png")
    with plots.marked(marks.FIGURE[marks.SMOKE]):
        draw(tmp_path / "smoke.png")
    plain, smoke = (Image.open(tmp_path / f"{n}.png") for n in ("plain", "smoke"))
    assert "Title" not in plain.info and smoke.info["Title"] == "SMOKE: pipeline check, not a result"
    assert plain.convert("RGB").tobytes() != smoke.convert("RGB").tobytes()  # drawn across the figure too


def test_the_closing_line_of_a_smoke_run_is_marked_and_gives_no_number():
    result = {"smoke": True, "runs": 8, "verdict": "inconclusive (undertrained)", "wall_time_s": 258.0,
              "key": "Post-LN − DeepNorm, each at its best lr: -0.000462 (n=1)", "readme": "x/README.md"}
    line = marks.closing_line("deepnet_depth", result)
    assert line.startswith("deepnet_depth: SMOKE run, not a result") and "-0.000462" not in line
    assert "inconclusive" not in line and "x/README.md" in line
    full = marks.closing_line("deepnet_depth", {**result, "smoke": False})
    assert "SMOKE" not in full and "inconclusive (undertrained) (4.3 min). Post-LN" in full


@pytest.mark.slow
def test_every_output_of_a_smoke_run_says_smoke_and_none_scolds_its_settings(local, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["deepnet_depth", "--smoke", *local, "--out", str(out), "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 0
    said = capsys.readouterr()
    assert said.out.splitlines()[-2].startswith("deepnet_depth: SMOKE run, not a result")
    assert "warm-up" not in said.err and "warning" not in said.err
    assert (out / "README.md").read_text().startswith("# SMOKE: ") and "SMOKE: " in (out / "report.html").read_text()
    assert json.loads((out / "result.json").read_text())["smoke"] is True
    pngs = list(out.glob("*.png"))
    assert pngs and all(Image.open(p).info.get("Title", "").startswith("SMOKE") for p in pngs)


def committed_bests(name: str) -> dict[str, float]:
    """Each arm's best lr, chosen again here from the committed runs.csv's own ``arm`` column."""
    with (quick.committed_folder(name) / "runs.csv").open(newline="") as f:
        rows = [{**r, best_lr.SELECTION: float(r[best_lr.SELECTION])} for r in csv.DictReader(f)]
    return {arm: b.lr for arm, b in best_lr.best_lrs(rows, "arm", sorted({r["arm"] for r in rows})).items()}


def test_a_quick_run_is_one_seed_at_each_arms_committed_best_lr_in_its_own_folder():
    plan = make_plan("deepnet_depth", quick=True)
    combos = plan.combos()
    assert {c[SEED_AXIS] for c in combos} == {sweep_axes("deepnet_depth")[SEED_AXIS][0]}
    best = committed_bests("deepnet_depth")
    assert len(combos) == len(best) == 6
    for c in combos:
        assert float(c["optim.lr"]) == pytest.approx(best[f"{c['placement']}, L={c['model.n_layers']}"])
    assert {ch.source for ch in plan.quick.choices} == {quick.COMMITTED} and "committed runs" in plan.quick.text()
    assert plan.out == Path("multirun/reproduce/deepnet_depth-quick/report") and "--quick" in plan.command
    assert plan.runs_dir == Path("multirun/reproduce/deepnet_depth-quick")


def test_without_a_committed_run_a_quick_arm_runs_the_middle_of_its_grid_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(quick, "committed_folder", lambda name: tmp_path)
    plan = make_plan("deepnet_depth", quick=True)
    lrs = {(c["placement"], c["model.n_layers"]): float(c["optim.lr"]) for c in plan.combos()}
    assert lrs[("post", "18")] == 1.25e-4 and lrs[("deepnorm", "18")] == 4e-3  # of 6.25e-5…5e-4; 2e-3…8e-3
    assert {ch.source for ch in plan.quick.choices} == {quick.MIDDLE} and "middle" in plan.quick.text()


def test_where_the_lrs_are_the_design_a_quick_run_keeps_every_one():
    full, fast = make_plan("lr_sensitivity"), make_plan("lr_sensitivity", quick=True)
    assert {c["optim.lr"] for c in fast.combos()} == {c["optim.lr"] for c in full.combos()}
    assert len(fast.combos()) * len(full.grid[SEED_AXIS]) == len(full.combos()) and fast.quick.every_lr


def test_a_quick_run_refuses_other_modes_and_a_folder_holding_a_full_result(tmp_path):
    for kw in ({"smoke": True}, {"seeds": 3}, {"scale": "gpu"}):
        with pytest.raises(ReproduceError, match="--quick"):
            make_plan("deepnet_depth", quick=True, **kw)
    (tmp_path / "result.json").write_text(json.dumps({"verdict": "reproduced", "smoke": False}))
    for kw in ({"quick": True}, {"smoke": True}):
        with pytest.raises(ReproduceError, match="holds a full result"):
            make_plan("deepnet_depth", out=tmp_path, **kw)


def test_the_direction_is_the_side_of_the_declared_threshold_at_each_condition():
    primary = {"id": "gap", "op": ">=", "threshold": 0.3, "rule": "gap >= 0.3",
               "conditions": {"L=18": {"per_seed": {"3": 0.5}}, "L=24": {"per_seed": {"3": 0.1}},
                              "L=6": {"per_seed": {"3": None}}}}
    full = {"verdict": "reproduced", "seeds": [3, 4], "path": "p", "primary": {
        "id": "gap", "conditions": {"L=18": {"median": 1.2}, "L=24": {"median": 1.4}, "L=6": {"median": 0.1}}}}
    found = quick.direction(primary, full)
    assert [c["agrees"] for c in found["conditions"].values()] == [True, False, None] and found["agrees"] is False
    assert quick.direction(primary, None) == {"check": "gap", "agrees": None, "why": "no committed full result"}
    other = quick.direction(primary, {**full, "primary": {"id": "another"}})
    assert other["agrees"] is None and "'another'" in other["why"]


@pytest.mark.slow
def test_a_quick_run_gives_the_direction_against_the_full_result_and_no_verdict(local, tmp_path, capsys):
    out = tmp_path / "report"
    tiny = ["train.max_steps=8", "optim.warmup_steps=1", "train.eval_every=4", "train.eval_windows=8",
            "train.select_windows=4"]
    assert main(["deepnet_depth", "--quick", *local, *tiny, "--out", str(out), "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 0
    line = capsys.readouterr().out.splitlines()[-2]
    assert line.startswith("deepnet_depth: QUICK run, no verdict (quick: one seed)")
    assert "post_falls_behind_with_depth" in line  # v5's primary
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == quick.VERDICT and result["seeds"] == [8] and result["runs"] == 12  # T and T/2
    direction = result["quick"]["direction"]  # against the committed full result, v5's with the same primary
    full = json.loads(Path("experiments/deepnet_depth/result.json").read_text())
    assert direction["check"] == full["primary"]["id"] == "post_falls_behind_with_depth"
    assert direction["full_verdict"] == full["verdict"] and direction["full_seeds"] == full["seeds"]
    assert set(direction["conditions"]) == set(full["primary"]["conditions"]) == {"L=18", "L=24"}
    for cond, c in direction["conditions"].items():  # each side from its own value and the declared threshold
        assert c["full_median"] == full["primary"]["conditions"][cond]["median"]
        assert c["agrees"] == (c["quick_holds"] == c["full_holds"])
    assert direction["agrees"] == all(c["agrees"] for c in direction["conditions"].values())
    readme = (out / "README.md").read_text()
    assert readme.startswith("# QUICK: ") and "## Verdict: no verdict (quick: one seed)" in readme
    assert "QUICK: " in (out / "report.html").read_text()
    assert "## What this quick run can and cannot show" in readme and "It cannot show an interval" in readme
    ran = readme.split("## What we ran")[1]
    assert "--quick ran one seed (8), each arm at one lr" in ran and "| arm | lr | from |" in ran  # not the whole axis
    pngs = list(out.glob("*.png"))
    assert pngs and all(Image.open(p).info.get("Title", "").startswith("QUICK") for p in pngs)
    assert not (tmp_path / "README.md").exists()  # never in the experiments index


def test_the_gpu_plan_at_the_default_budget_fits_and_is_shown_in_a_few_lines(capsys, tmp_path):
    """deepnet_depth's lowest rung (3 seeds at the CPU steps) is estimated at 23.9 min: the default budget is the
    30 min that holds it, not 8 min it overruns; an explicit --budget 8 is kept, and says it does not fit."""
    assert main(["deepnet_depth", "--scale", "gpu", "--plan-only", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("| deepnet_depth"))
    assert len(lines) < 40 and "| yes" in row and "(default)" in row and not any("{" in line for line in lines)
    assert int(row.split("|")[8].split()[0]) > 8  # the budget column
    asked = make_plan("deepnet_depth", "gpu", out=tmp_path, device=ASSUMED_H100, budget=8)
    assert not asked.budget.fits and not asked.budget.budget_default and "--budget 8" in asked.command


def test_the_default_budget_is_eight_minutes_where_the_lowest_rung_fits_in_it(tmp_path):
    plan = make_plan("norm_types", "gpu", out=tmp_path, device=ASSUMED_H100)
    assert plan.budget.budget_min == 8 and plan.budget.fits and plan.budget.budget_default
    assert "--budget 8" in plan.command  # the command that reruns it names the budget it had
