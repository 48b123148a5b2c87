"""``--scale gpu``: the plan (the same design, a model ≥ 4× the CPU scale's, steps and seeds bought by the budget),
the packing sized by memory, and a rehearsal on CPU of the packed runs and of a plan continued by a second
invocation."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from normtrain.reproduce import EXPERIMENTS, gpu_plan, reproduce
from normtrain.reproduce.cli import main, make_plan
from normtrain.reproduce.gpu_plan import grow, growth
from normtrain.reproduce.gpu_scale import ASSUMED_H100, MIN_CI, MIN_GROWTH, Device, Size, ladder, packing
from normtrain.study.plan import SEED_AXIS, seed_list, sweep_axes
from normtrain.util.provenance import training_code_digest

CLEAN = {"code_commit": "0" * 40, "code_dirty": False, "training_code_digest": training_code_digest()}  # a clean tree


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_grows_at_least_fourfold_and_keeps_its_design(name):
    from normtrain.config import compose

    exp, cpu_grid = EXPERIMENTS[name], sweep_axes(name)
    first = {k: v[0] for k, v in cpu_grid.items()}
    cpu = compose([f"experiment={name}", *(f"{k}={v}" for k, v in first.items())])
    over, axes = grow(cpu, cpu_grid, exp.gpu_recipe, 1.0)
    gpu = compose([f"experiment={name}", *over, *(f"{k}={v[0]}" for k, v in axes.items())])
    grown = growth(Size.of(cpu), Size.of(gpu))
    assert grown["product"] >= MIN_GROWTH, grown
    assert list(axes) == list(cpu_grid) and all(len(axes[k]) == len(v) for k, v in cpu_grid.items())
    for key, values in cpu_grid.items():  # an axis keeps its values, or all of them grow by one factor
        ratios = {float(a) / float(b) for a, b in zip(axes[key], values, strict=True) if _number(b) and float(b)}
        assert axes[key] == values or len(ratios) == 1, (key, values, axes[key])


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_a_larger_budget_buys_more_steps_and_seeds_never_another_design(tmp_path):
    plans = [make_plan("norm_types", "gpu", device=ASSUMED_H100, out=tmp_path / str(b), budget=b)
             for b in (1, 8, 60)]
    rungs = [p.budget.rung for p in plans]
    assert [r["index"] for r in rungs] == sorted(r["index"] for r in rungs) and rungs[0] != rungs[-1]
    assert rungs[-1]["seeds"] > rungs[0]["seeds"] and rungs[-1]["steps"] > rungs[0]["steps"]
    arms = {k: v for k, v in sweep_axes("norm_types").items() if k != SEED_AXIS}  # its norms and lrs
    assert arms["norm"] == ["layernorm", "rmsnorm"]
    for p in plans:  # the same arms; only the seeds and the step counts change
        assert {k: v for k, v in p.grid.items() if k != SEED_AXIS} == arms
        assert p.budget.scale_up["product"] >= MIN_GROWTH and p.budget.estimate_s > 0
    assert [p.budget.fits for p in plans] == [False, True, True]  # 1 minute: the lowest rung, over several runs
    steps = [p.compose(p.combos()[0]).train.max_steps for p in plans]
    from normtrain.config import compose

    cpu_steps = compose(["experiment=norm_types"]).train.max_steps
    assert steps == [round(cpu_steps * r["steps"]) for r in rungs]
    assert "assumed" in plans[1].budget.text() and "153k tokens/s" in plans[1].budget.text()


def test_the_ladder_climbs_seeds_then_steps_and_seeds_in_turn():
    rungs = ladder(5, lengthen=True)
    assert [(r.seeds, r.steps) for r in rungs[:7]] == [(3, 1), (4, 1), (5, 1), (MIN_CI, 1), (6, 2), (8, 2), (8, 4)]
    assert all(r.steps == 1 for r in ladder(10, lengthen=False)) and ladder(10, lengthen=False)[-1].seeds == 20
    assert ladder(2, lengthen=True)[0].seeds == 2  # never fewer seeds than the CPU grid's when that is fewer than 3
    assert seed_list(["5", "6", "7"], 5) == ["5", "6", "7", "8", "9"] and seed_list(["0", "1"], 1) == ["0"]


def test_runs_side_by_side_are_as_many_as_the_memory_holds_and_no_more_than_measured():
    small = Size(layers=6, d=128, ff=512, mlp="gelu", seq=128, batch=32, steps=1000, evals=21, eval_windows=512)
    big = replace(small, layers=24, d=1024, ff=4096, seq=512, batch=16)
    assert packing([small], ASSUMED_H100, 100) == 8  # memory holds dozens: the largest packing measured
    assert packing([small], ASSUMED_H100, 3) == 3  # never more than there are runs
    per_run = big.memory_gib()
    assert 10 < per_run < 79 and packing([small, big], ASSUMED_H100, 100) == int(0.9 * 79.2 // per_run)
    assert packing([small], replace(ASSUMED_H100, cores=4), 100) == 3  # one core per run, one for the parent
    assert big.step_s(ASSUMED_H100, 8) > big.step_s(ASSUMED_H100, 1) > small.step_s(ASSUMED_H100, 1)


def test_without_a_gpu_the_plan_is_shown_for_an_assumed_one_and_a_run_is_refused(capsys, tmp_path):
    assert main(["norm_types", "--scale", "gpu", "--plan-only", "--out", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"budget_min": 8.0' in out and "(assumed: no GPU on this machine)" in out and '"jobs": 8' in out
    assert not (tmp_path / "plan.json").exists()  # shown, not saved
    if Device.detect() is None:
        assert main(["norm_types", "--scale", "gpu", "--out", str(tmp_path)]) == 2
        assert "torch sees none here" in capsys.readouterr().err
    assert main(["norm_types", "--scale", "gpu", "--budget", "0"]) == 2
    assert "--budget 0.0: minutes on the GPU" in capsys.readouterr().err


REHEARSAL = Device("CPU rehearsal (a test)", memory_gib=1.9, cores=8, detected=False, host_ms_per_layer=20.0,
                   startup_s=5.0, run_overhead_s=3.0)  # memory for two of the tiny runs side by side
TINY = ["model.n_layers=2", "model.d_model=16", "model.n_heads=2", "model.d_ff=32", "train.max_steps=12",
        "train.eval_every=3", "train.eval_windows=8", "monitor.every=3", "train.device=cpu", "placement=post,pre",
        "optim.lr=1e-3"]


@pytest.mark.slow
def test_a_plan_runs_packed_on_cpu_and_a_second_invocation_continues_it(text_corpus, tmp_path, monkeypatch):
    """The rehearsal of --scale gpu on CPU: the plan packs two single-threaded runs side by side (the memory of the
    rehearsal device holds two); the first invocation's budget runs out after a few runs (its deadline is already
    past when the first run ends), the second continues the plan from plan.json and reuses those runs."""
    import normtrain.util.provenance as provenance

    monkeypatch.setattr(provenance, "code_state", lambda root=None: CLEAN)
    out = tmp_path / "experiments" / "xiong_warmup-gpu"
    local = ["data=local_text", f"data.path={text_corpus}", "model.seq_len=32", "train.select_windows=4"]
    kw = dict(scale="gpu", overrides=[*local, *TINY], out=out, progress=False, budget=0.1, device=REHEARSAL,
              allow_dirty=True)  # the runs record the checkout as it is: a test may run from a dirty one
    monkeypatch.setattr(gpu_plan, "deadline", lambda budget: 0.0)
    first = reproduce("xiong_warmup", **kw)
    plan = json.loads((out / "plan.json").read_text())
    assert first["verdict"] == "unfinished" and plan["jobs"] == 2 and plan["rung"]["seeds"] == 3  # the lowest rung
    assert plan["fits"] is False and plan["budget_min"] == 0.1
    done = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/summary.json")}
    assert 0 < len(done) < 2 * 2 * plan["rung"]["seeds"]  # placements × warm-ups × seeds
    assert plan["invocations"][0]["finished"] is False and plan["invocations"][0]["runs_done"] == len(done)

    monkeypatch.undo()
    monkeypatch.setattr(provenance, "code_state", lambda root=None: CLEAN)
    second = reproduce("xiong_warmup", **{**kw, "device": None, "budget": 10.0})  # the plan is read back
    assert second["verdict"] != "unfinished"
    assert second["runs"] == 2 * 2 * 2 * plan["rung"]["seeds"] > len(done)  # placements × warm-ups × seeds, T and T/2
    assert {p: p.stat().st_mtime_ns for p in done} == done  # the first invocation's runs were reused
    result = json.loads((out / "result.json").read_text())
    assert result["device"].startswith("CPU") and result["gpu_plan"]["jobs"] == 2 and result["jobs"] == 2
    assert result["gpu_plan"]["measured"]["runs"] == second["runs"] and len(result["gpu_plan"]["invocations"]) == 2
    assert result["gpu_plan"]["half_share"] > 0  # the T/2 runs are in the estimate and in the measured rates
    runs = [r for r in (out / "runs").iterdir() if r.is_dir()]
    assert all((r / "summary.json").is_file() and (r / "metrics.jsonl").is_file() for r in runs)
    assert not list((out / "runs").glob("*/ckpt.pt"))  # summaries and metrics are kept, checkpoints are not
    for folder in ("runs", "runs_half"):  # nor those an experiment keeps for a probe, nor a branch's
        assert "*.pt" in (out / folder / ".gitignore").read_text().splitlines()
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert summary["execution"]["threads"] == 1 and summary["config"]["model"]["d_model"] == 32  # packed, grown
    readme = (out / "README.md").read_text()
    assert "### The GPU plan" in readme and "assumed, not measured" in readme and "Measured in the last" in readme


def test_a_saved_plan_is_continued_whatever_the_budget_and_refused_for_other_overrides(tmp_path):
    from normtrain.reproduce.cli import ReproduceError

    first = make_plan("norm_types", "gpu", device=ASSUMED_H100, out=tmp_path, budget=8)
    first.budget.save(tmp_path)
    again = make_plan("norm_types", "gpu", out=tmp_path, budget=30)  # read back: no device needed, same plan
    assert again.budget.rung == first.budget.rung and again.budget.budget_min == 8 and again.grid == first.grid
    with pytest.raises(ReproduceError, match="--fresh to plan"):
        make_plan("norm_types", "gpu", out=tmp_path, overrides=["norm=layernorm,rmsnorm"])
    fresh = make_plan("norm_types", "gpu", device=ASSUMED_H100, out=tmp_path, budget=30, fresh=True)
    assert fresh.budget.budget_min == 30 and fresh.budget.rung["index"] > first.budget.rung["index"]
