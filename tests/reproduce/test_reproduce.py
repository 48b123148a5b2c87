"""``normtrain-reproduce``: every experiment end to end in smoke mode, the grid, the write-up and the verdicts."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import normtrain
from normtrain.reproduce import EXPERIMENTS, reproduce, writeup
from normtrain.reproduce.cli import ReproduceError, main, make_plan
from normtrain.reproduce.gpu_scale import ASSUMED_H100
from normtrain.reproduce.index import BEGIN, END, update_index
from normtrain.reproduce.layout import relayout
from normtrain.reproduce.writeup import verdict_section
from normtrain.reproduce.xiong_grad_init import GradInit, profile_slope
from normtrain.study import best_lr
from normtrain.study.plan import SEED_AXIS, Plan, sweep_axes
from normtrain.study.verdicts import V4_VERDICTS, decide, judge

VERDICTS = {"partly reproduced", *V4_VERDICTS}  # v3's verdicts and v4's (a smoke run may meet either)


@pytest.fixture
def local(text_corpus) -> list[str]:
    return ["data=local_text", f"data.path={text_corpus}", "model.seq_len=32"]


# A smoke run checks the pipeline, not the science: the model shrinks too (norm_types times 525 training steps of
# it; curse_of_depth probes and draws 24 layers), except along the axes the experiment compares (its grid's shape,
# and so its analysis, stays the experiment's own).
SMALL_MODEL = {"model.n_layers": "2", "model.d_model": "32", "model.n_heads": "2", "model.d_ff": "null"}


def small(name: str, local: list[str]) -> list[str]:
    axes = sweep_axes(name)
    return [*local, *(f"{key}={value}" for key, value in SMALL_MODEL.items() if len(axes.get(key, [])) < 2)]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_runs_end_to_end_in_smoke_mode(name, local, tmp_path):
    out, runs, local = tmp_path / "out", tmp_path / "runs", small(name, local)
    result = reproduce(name, smoke=True, overrides=local, out=out, runs_dir=runs, progress=False)
    assert result["verdict"] in VERDICTS
    plan = make_plan(name, smoke=True, overrides=local, out=out, runs_dir=runs)
    saved = json.loads((out / "result.json").read_text())
    budgets = 2 if EXPERIMENTS[name].half_budget else 1  # protocol v5: every run at T and at T/2
    assert saved["runs"] == budgets * len(plan.combos()) >= 2 and saved["smoke"] is True
    csv_lines = (out / "runs.csv").read_text().strip().splitlines()
    assert len(csv_lines) == budgets * len(plan.combos()) + 1
    readme = (out / "README.md").read_text()
    assert "Smoke run" in readme and "## Verdict" in readme and f"normtrain-reproduce {name} --smoke" in readme
    pngs = [p.name for p in out.glob("*.png")]
    assert pngs and all(f"]({p})" in readme for p in pngs)
    head = readme.splitlines()[:15]  # the first screen: the verdict, why, our number and the first figure
    assert f"## Verdict: {result['verdict']}" in head and result["key"] in head
    assert any(line.startswith("![") for line in head) and readme.index("## Results") < readme.index("## Registration")
    assert relayout(readme, result) == readme  # the writer's order is layout.py's
    assert not (tmp_path / "README.md").exists()  # a smoke run never touches the experiments index
    exp = EXPERIMENTS[name]()
    seed = plan.grid.get("train.seed", ["0"])[0]  # a smoke run keeps the grid's first seed
    assert saved["seeds"] == [int(seed)] and saved["claim"] == exp.registration.claim and saved["ours"]
    assert [c["id"] for c in saved["checks"]] == [r.id for _, r in exp.registration.checks()]
    for check in saved["checks"]:  # every check keeps its per-seed values (timings: per repeat), per condition
        repeats = check["quantity"].endswith("_time")  # (a best lr is chosen over all seeds at once: one value)
        assert check["conditions"] and all(repeats or set(c["per_seed"]) <= {seed, best_lr.ALL_SEEDS}
                                           for c in check["conditions"].values())
        assert check["unit"] == ("repeats" if repeats else "seeds")  # a timing's repeats are never called seeds
        assert (f"over {check['unit']}" in check["rule"]) == (check["decide"] != 1.0)
    record = saved["provenance"]["declaration"]
    assert record["files"] == [f"normtrain/reproduce/preregistered/{name}.py", f"configs/experiment/{name}.yaml"]
    assert len(record["digest"]) == 16 and "before_runs" in record and "## Check history" in readme
    assert saved["registration"] == exp.registration.label and f"**Label: `{saved['registration']}`**" in readme
    assert (saved["pilot"] is not None) == (saved["registration"] == "after_pilot")
    assert len(saved["provenance"]["code_commit"]) == 40 and isinstance(saved["provenance"]["code_dirty"], bool)
    trains = name not in ("xiong_grad_init", "admin_output_change")  # the two forward-only experiments
    assert (saved["unigram_val_loss"] is not None) == trains
    assert ("no learning rate enters" in readme) != trains  # a forward-only experiment has no lr to compare
    assert (out / "report.html").is_file() == trains == ("[`report.html`](report.html)" in readme)
    if trains:  # every cell of the grid says how many of its runs diverged, collapsed, ended undertrained
        assert sum(c["n"] for c in saved["cells"]) == saved["runs"]
        assert all({"diverged", "collapsed", "undertrained"} <= set(c) for c in saved["cells"])
    assert (saved["guard"] is not None) == (exp.registration.guard is not None)


@pytest.mark.slow
def test_finished_runs_are_reused(local, tmp_path, monkeypatch):
    """Two single-threaded worker processes train the grid (--jobs 2); a second invocation trains nothing. A
    report over the size limit for committed files is written and kept out of git, and the README says so."""
    out = tmp_path / "out"
    kw = dict(smoke=True, overrides=small("deepnet_depth", local), out=out, runs_dir=tmp_path / "runs",
              progress=False, jobs=2)
    first = reproduce("deepnet_depth", **kw)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("runs*/*/summary.json")}  # T runs and runs_half's T/2
    assert len(stamps) == first["runs"] >= 4 and not (out / ".gitignore").exists()
    monkeypatch.setattr(writeup, "COMMITTED_MAX", 1000)
    again = reproduce("deepnet_depth", **kw)
    assert again["reused_run_time_s"] > 0
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert (out / ".gitignore").read_text().splitlines()[-1] == "report.html" and (out / "report.html").is_file()
    assert "so it is not in git; `normtrain-reproduce deepnet_depth` rebuilds it" in (out / "README.md").read_text()


@pytest.mark.slow
def test_forward_only_measurements_are_kept_and_reused(local, tmp_path):
    kw = dict(smoke=True, overrides=small("admin_output_change", local), out=tmp_path / "out",
              runs_dir=tmp_path / "runs", progress=False)
    first = reproduce("admin_output_change", **kw)
    kept = sorted((tmp_path / "runs").glob("*/measurement.json"))
    assert len(kept) == first["runs"] and first["reused_run_time_s"] == 0
    record = json.loads(kept[0].read_text())
    assert {"value", "config", "code_commit", "started_at", "wall_time_s"} <= set(record)
    stamps = {p: p.stat().st_mtime_ns for p in kept}
    again = reproduce("admin_output_change", **kw)
    assert again["reused_run_time_s"] > 0 and {p: p.stat().st_mtime_ns for p in kept} == stamps
    assert again["checks"] == first["checks"]  # the same numbers, analysed again


def test_the_grid_comes_from_the_experiment_yaml_and_scales():
    cpu = make_plan("deepnet_depth")
    assert cpu.grid == {"placement": ["post", "deepnorm"],
                        "optim.lr": ["0.002", "0.00025", "0.004", "0.008", "6.25e-05", "0.000125", "0.0005", "0.001"],
                        "model.n_layers": ["6", "18", "24"], "train.seed": ["8", "9", "10", "11", "12"]}
    # v5: each placement's own lrs per depth (DeepNorm 3 at every depth, Post-LN 3 at 6 layers and 4 deeper), and
    # the edge rule's extension (CHECK_HISTORY 8): Post-LN's 1e-3 at 6 layers, below its grid's smallest best lr
    assert len(cpu.combos()) == 105 and str(cpu.out) == "experiments/deepnet_depth"
    lrs = {(p, d): sorted({float(c["optim.lr"]) for c in cpu.combos()
                           if c["placement"] == p and c["model.n_layers"] == d})
           for p in ("post", "deepnorm") for d in ("6", "18", "24")}
    assert lrs[("post", "18")] == lrs[("post", "24")] == [6.25e-5, 1.25e-4, 2.5e-4, 5e-4]
    assert lrs[("post", "6")] == [1e-3, 2e-3, 4e-3, 8e-3]
    assert all(lrs[("deepnorm", d)] == [2e-3, 4e-3, 8e-3] for d in ("6", "18", "24"))
    gpu = make_plan("deepnet_depth", scale="gpu", seeds=2, device=ASSUMED_H100)  # the design stays; the model grows
    assert gpu.grid["model.n_layers"] == ["6", "18", "24"] and len(gpu.grid["train.seed"]) >= 2
    assert str(gpu.out) == "experiments/deepnet_depth-gpu" and gpu.runs_dir == gpu.out / "runs"
    steps = gpu.budget.rung["steps"]  # the warm-up stretches with the runs: the same 10% of each
    assert "model.d_model=128" in gpu.base
    cfg = gpu.compose(gpu.combos()[-1])
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.train.batch_size, cfg.train.max_steps) == (128, 4, 16,
                                                                                                  round(1000 * steps))
    assert cfg.optim.warmup_steps == round(100 * steps)
    fewer = make_plan("deepnet_depth", seeds=2, overrides=["train.seed=5,6,7"])  # --seeds takes the grid's first
    assert fewer.grid["train.seed"] == ["5", "6"]  # (a v4 re-registration's seeds are new: never 0, 1 instead)
    assert make_plan("deepnet_depth", seeds=4, overrides=["train.seed=5,6"]).grid["train.seed"] == ["5", "6", "7", "8"]
    assert make_plan("deepnet_depth", seeds=2).grid["train.seed"] == ["8", "9"]  # the registration's, not the pilot's
    narrowed = make_plan("deepnet_depth", overrides=["model.n_layers=6,96", "model.d_ff=128"])
    assert narrowed.grid["model.n_layers"] == ["6", "96"] and narrowed.base[-1] == "model.d_ff=128"
    with pytest.raises(ReproduceError, match="leave no run of deepnet_depth's grid"):
        make_plan("deepnet_depth", overrides=["optim.lr=1e-2"])  # no placement of the experiment has that lr
    smoke = make_plan("xiong_grad_init", smoke=True)
    assert [len(v) for v in smoke.grid.values()] == [2, 2, 2, 1] and "train.max_steps=4" in smoke.base
    assert make_plan("deepnet_depth", jobs=3).jobs == 3 and gpu.jobs == gpu.budget.jobs > 1
    assert make_plan("xiong_grad_init").grid["train.seed"] == [str(s) for s in range(20, 30)]  # v5: v4 ran 10-19


def test_bad_input_is_reported(capsys):
    assert main(["no_such_experiment"]) == 2
    assert "allowed: xiong_grad_init" in capsys.readouterr().err
    assert main(["deepnet_depth", "--scale", "tpu"]) == 2
    assert "allowed: cpu, gpu" in capsys.readouterr().err
    with pytest.raises(ReproduceError, match="model.n_layers=0"):
        make_plan("deepnet_depth", overrides=["model.n_layers=0"])
    with pytest.raises(ReproduceError, match="do not compose"):
        make_plan("deepnet_depth", overrides=["model.n_layer=3"])


def test_cli_entry_point_lists_the_experiments():
    proc = subprocess.run([sys.executable, "-m", "normtrain.reproduce", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and all(name in proc.stdout for name in EXPERIMENTS)


def synthetic_grad_rows(post_rises: bool, pre_slope: float, seeds: int = 5, stream_slope: float | None = None
                        ) -> list[dict]:
    """Rows as GradInit.measure writes them, for profiles with a known shape (a little seed noise): Post-LN's
    profile rises 3× toward the output (or falls as much), Pre-LN's is flat, its level ∝ L^pre_slope, and its
    stream E‖x_L‖²/d ∝ L^stream_slope (by default −2·pre_slope: the gradient ∝ 1/‖x_L‖, as in Thm. 1)."""
    stream_slope = -2 * pre_slope if stream_slope is None else stream_slope

    rows = []
    for seed in range(seeds):
        noise = 1 + 0.01 * seed
        for placement in ("post", "pre"):
            for depth in (6, 12, 24):
                if placement == "post":
                    profile = [noise * 0.2 * 3 ** ((i / (depth - 1)) * (1 if post_rises else -1)) for i in range(depth)]
                else:
                    profile = [noise * 0.3 * (depth / 6) ** pre_slope] * depth
                rows.append({"placement": placement, "norm": "layernorm", "model.n_layers": str(depth),
                             "train.seed": str(seed), "first": profile[0], "last": profile[-1],
                             "log_slope": profile_slope(profile), "profile": " ".join(map(str, profile)),
                             "stream_sq": None if placement == "post" else noise * 3 * depth ** stream_slope})
    return rows


def judged(findings, exp) -> list:
    return [judge(rule, findings.measured.get(rule.quantity)) for _, rule in exp.registration.checks()]


def test_grad_init_verdict_follows_the_numbers(tmp_path):
    """v4: the last layer's depth contrast alone decides; Pre-LN's growing stream (Lemma 1) is a precondition;
    the per-layer shapes are reported beside."""
    plan = Plan("xiong_grad_init", "cpu", False, [], {}, tmp_path, tmp_path)
    exp = GradInit()

    def judgement(rows):
        findings = exp.analyse(rows, plan)
        return decide(exp.registration, findings.measured, findings.unit, seeds=[20, 21])  # v5's seeds

    found = judgement(synthetic_grad_rows(True, -0.5))
    assert found.verdict == "reproduced" and all(c.ok for c in found.checks)
    primary = found.role("primary")[0]
    assert primary.conditions[""]["median"] == pytest.approx(0.5, abs=0.01)  # Post's slope 0, Pre's −0.5
    found = judgement(synthetic_grad_rows(False, 0.0, stream_slope=1.0))
    assert found.verdict == "not reproduced"  # the stream grows, yet Pre-LN's last layer does not shrink
    # v5's secondaries: the L^-1/2 rate (Pre flat: no), Post depth-free (yes), Post rises (no: it falls), Pre flat
    assert [c.ok for c in found.role("secondary")] == [False, True, False, True]
    seeds = found.checks[3].conditions["L=24"]["per_seed"]  # post_rises
    assert sorted(seeds) == [str(s) for s in range(5)] and all(v < 0 for v in seeds.values())  # every seed kept
    found = judgement(synthetic_grad_rows(True, -0.5, stream_slope=0.0))
    assert found.verdict == "inconclusive (precondition)" and found.role("primary")[0].ok  # the premise failed
    assert judgement(synthetic_grad_rows(True, 0.2)).verdict == "inconclusive (precondition)"  # stream shrinks


def test_a_rise_must_clear_the_flat_band(tmp_path):
    """Issue 37: a Post-LN 'rise' inside the band the same registration calls flat does not pass as a rise."""
    plan = Plan("xiong_grad_init", "cpu", False, [], {}, tmp_path, tmp_path)
    exp = GradInit()
    rows = synthetic_grad_rows(True, -0.5)
    for r in rows:  # Post-LN rises 1.3× from the first block to the last: inside ±ln 1.5
        if r["placement"] == "post":
            depth = int(r["model.n_layers"])
            profile = [0.2 * 1.3 ** (i / (depth - 1)) for i in range(depth)]
            r.update(first=profile[0], last=profile[-1], log_slope=profile_slope(profile))
    checks = {c.rule.id: c for c in judged(exp.analyse(rows, plan), exp)}
    assert all(0 < c["median"] < math.log(1.5) for c in checks["post_rises"].conditions.values())
    assert checks["post_rises"].ok is False and checks["last_layer_depth_contrast"].ok is True


def test_discussion_explains_failed_checks_and_keeps_other_observations(tmp_path):
    plan = Plan("xiong_grad_init", "cpu", False, [], {}, tmp_path, tmp_path)
    exp = GradInit()
    findings = exp.analyse(synthetic_grad_rows(False, 0.0), plan)
    decision = decide(exp.registration, findings.measured, findings.unit)
    failed = [c.rule.id for c in decision.checks if c.ok is False]
    discussion = (f"# Why checks failed\n\n## {failed[0]}\n\nOne seed fell short.\n\n"
                  "## Data order\n\nThe tail fit reads the batches.\n")
    text = verdict_section(decision, {"verdict": decision.verdict}, findings, discussion)
    why, _, others = text.partition("### Why checks failed")[2].partition("### What the checks do not show")
    assert f"**{failed[0]}.** One seed fell short." in why and "Data order" not in why
    assert f"**{failed[1]}.** *Not yet explained: no section in DISCUSSION.md.*" in why
    assert others.strip() == "**Data order.** The tail fit reads the batches."


def write_logged_run(folder: Path, combo: dict[str, str], steps: int = 400, layers: int = 16) -> None:
    """A run folder of the grid ``combo`` that logged three per-layer families at every step."""
    rng = np.random.default_rng(len(folder.name))
    rows = [{"step": step, "train/loss": 5 - step / 100,
             **{f"{family}/layer_{i}": v for family in ("grad_norm", "act_rms", "block_cos")
                for i, v in enumerate(rng.uniform(0.1, 10, layers).tolist())}} for step in range(steps)]
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {"placement": {"name": combo["placement"]}, "train": {"seed": int(combo[SEED_AXIS])}}
    (folder / "summary.json").write_text(json.dumps({"status": "completed", "steps": steps, "config": config}))


def test_a_report_over_the_limit_is_thinned_to_fit_and_the_readme_says_so(tmp_path, monkeypatch):
    """The experiment's interactive page, over the size limit for a committed file, is drawn again with fewer points
    per series until it fits, rather than kept out of git; the README line says how far it was thinned."""
    plan = Plan("deepnet_depth", "cpu", False, [], {"placement": ["post", "pre"], SEED_AXIS: ["0", "1"]},
                tmp_path / "runs", tmp_path / "out")
    for combo in plan.combos():
        write_logged_run(plan.run_dir(combo), combo)
    exp, path = EXPERIMENTS["deepnet_depth"](), plan.out / "report.html"
    path.parent.mkdir()
    assert writeup.interactive_report(exp, plan, path).endswith("[`report.html`](report.html).")  # within 2 MiB
    assert "is thinned to at most" not in path.read_text()

    limit = path.stat().st_size * 3 // 4
    monkeypatch.setattr(writeup, "COMMITTED_MAX", limit)
    line = writeup.interactive_report(exp, plan, path)
    assert path.stat().st_size <= limit and not (plan.out / ".gitignore").exists()
    points = re.search(r"\(report\.html\), its series thinned to at most (\d+) of each run's logged steps to fit "
                       r"the repository's .* limit for a committed file \(the run folders hold every step\)\.$",
                       line)[1]
    assert f"is thinned to at most {points} of each run's logged steps" in path.read_text()


def test_index_table_is_rebuilt_between_markers(tmp_path):
    index = tmp_path / "README.md"
    index.write_text(f"# Experiments\n\nHand-written intro.\n\n{BEGIN}\nold\n{END}\n\nHand-written end.\n")
    folder = tmp_path / "deepnet_depth"
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps({
        "claim": "Post-LN degrades with depth", "paper_number": "27.80 BLEU at 6L, fails at 12L",
        "ours": "Post − Pre 0.4 ± 0.1 (n=3)", "verdict": "partly reproduced", "key": "Post − Pre = 0.4",
        "norm": "LayerNorm", "wall_time_s": 600, "scale": "cpu", "device": "CPU (2 cores)", "smoke": False,
        "registration": "after_pilot", "provenance": {"declaration": {"before_runs": True}}}))
    update_index(index)
    text = index.read_text()
    assert "Hand-written intro." in text and "Hand-written end." in text and "old" not in text
    assert "[`deepnet_depth`](deepnet_depth/README.md)" in text and "**partly reproduced**" in text
    row = next(line for line in text.splitlines() if "deepnet_depth" in line)
    for cell in ("Post-LN degrades with depth", "27.80 BLEU", "0.4 ± 0.1 (n=3)", "LayerNorm", "10.0 min",
                 "`after_pilot`"):
        assert cell in row
    assert "not committed before the runs" not in row and "reusing" not in row


def test_index_gives_the_cost_of_reused_runs_beside_a_short_reanalysis(tmp_path):
    index, folder = tmp_path / "README.md", tmp_path / "deepnet_update"
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps({
        "verdict": "partly reproduced", "key": "k", "wall_time_s": 36, "reused_run_time_s": 35880, "scale": "cpu",
        "device": "CPU (2 cores)", "registration": "after_pilot"}))
    update_index(index)
    row = next(line for line in index.read_text().splitlines() if "deepnet_update" in line)
    assert "0.6 min, reusing runs that took 598 min (their own times summed) (CPU (2 cores))" in row


def test_a_finished_run_is_reused_across_new_neutral_keys_but_not_across_changed_ones():
    from normtrain.config import compose, to_container
    from normtrain.study.grid import same_run

    new = to_container(compose(["experiment=deepnet_depth"]))
    old = {group: dict(values) for group, values in new.items()}
    del old["model"]["qk_norm"], old["optim"]["z_loss"], old["monitor"]["spike_score"]  # keys added since the run
    old["logger"] = {"name": "wandb"}  # logged elsewhere: the same run
    assert same_run(old, new)
    changed = {**new, "model": {**new["model"], "qk_norm": True}}  # a new key set to what the run did not have
    assert not same_run(old, changed)
    assert not same_run(old, {**new, "optim": {**new["optim"], "lr": 3e-3}})
    assert not same_run(old, {**new, "monitor": {**new["monitor"], "every": 5}})


def test_lr_sensitivity_runs_qk_norm_with_pre_ln_only_and_scores_by_the_paper_formula():
    import math
    from collections import Counter

    from normtrain.reproduce.lr_sensitivity import sensitivity

    plan = make_plan("lr_sensitivity")
    variants = Counter((c["placement"], c["model.qk_norm"].lower(), c["model.n_layers"]) for c in plan.combos())
    seven, six = 7 * 3, 6 * 3  # learning rates × seeds: the whole grid, or its top six at L = 24
    assert variants == {("pre", "false", "2"): seven, ("pre", "true", "2"): seven, ("post", "false", "2"): seven,
                        ("pre", "false", "8"): seven, ("pre", "true", "8"): seven, ("post", "false", "8"): seven,
                        ("pre", "false", "24"): six, ("pre", "true", "24"): six}
    assert min(float(c["optim.lr"]) for c in plan.combos() if c["model.n_layers"] == "24") == 1e-3
    # E_η[min(ℓ(η), ℓ0) − ℓ*]: a diverged run (∞) and one above ℓ0 both count as ℓ0
    assert sensitivity({1e-3: 3.0, 1e-2: 2.0, 1e-1: math.inf, 3e-1: 6.0}, l0=5.5) == pytest.approx(
        (1.0 + 0.0 + 3.5 + 3.5) / 4)


def test_lr_sensitivity_ranks_a_variant_that_learned_nothing_last_and_counts_seeds_without_a_stable_lr():
    from normtrain.reproduce.lr_sensitivity import LRSensitivity

    assert LRSensitivity.stable_cell({"0": 0.1, "1": 0.3, "2": 0.1}) == "0.1 [0.1, 0.3] (n=3)"
    assert LRSensitivity.stable_cell({"0": 1e-3, "1": None, "2": None}) == "0.001 [0.001, 0.001] (n=1), none in 2"
    assert LRSensitivity.stable_cell({"0": None, "1": None}) == "none in 2 seeds"

    def rows(placement, losses):  # one seed per loss list, lrs 1e-3, 1e-2, 1e-1; ℓ0 5.5, unigram 3.3
        return [{"placement": placement, "model.qk_norm": "False", "model.n_layers": "2", "optim.lr": str(lr),
                 "train.seed": str(s), "status": "completed", "final_val_loss": v, "initial_val_loss": 5.5,
                 "unigram_val_loss": 3.3, "collapsed": v >= 3.25, "undertrained": False, "final_attn_logit_max": 5.0,
                 "attn_logit_curve": ""}
                for s, seed_losses in enumerate(losses) for lr, v in zip((1e-3, 1e-2, 1e-1), seed_losses, strict=True)]

    learned = rows("pre", [[3.0, 2.0, 2.6], [3.0, 2.1, 2.7], [3.1, 2.0, 2.6]])  # sensitivity ≈ 0.53
    flat = rows("post", [[3.31, 3.3, 3.32], [3.3, 3.31, 3.3], [2.6, 3.3, 3.3]])  # ≈ 0.01, but on the unigram line
    findings = LRSensitivity().analyse(learned + flat, make_plan("lr_sensitivity"))
    assert "least sensitive first" in findings.key and findings.key.index("pre,") < findings.key.index("post.")
    assert any("post at L=2 learned nothing at any learning rate in 2 of 3 seeds" in n for n in findings.notes)
    assert findings.ours == "Pre-LN − Pre-LN + QK-norm LR sensitivity: –"  # no QK-norm arm: no primary quantity
    qk = [{**r, "model.qk_norm": "True", "final_val_loss": r["final_val_loss"] - 0.1 * (r["optim.lr"] == "0.1")}
          for r in learned]  # 0.1 nats better at the top lr only: 0.1 / 3 less sensitive in every seed
    headline = LRSensitivity().analyse(learned + qk, make_plan("lr_sensitivity")).ours
    assert headline == ("Pre-LN − Pre-LN + QK-norm LR sensitivity: median 0.033 (range of 3 seeds 0.033 to 0.033) "
                        "nats at L=2")


def test_validation_batches_are_the_windows_the_training_loop_evaluates(tiny, tmp_path):
    """With train.eval_windows=0 the count follows the global batch (train.global_batch_size), as in training."""
    from normtrain.reproduce.runner import validation_batches

    overrides = [*tiny, "train.max_steps=1", "train.eval_windows=0", "train.eval_batches=3", "train.batch_size=2",
                 "train.global_batch_size=4"]
    summary = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path / "run")
    batches = validation_batches(normtrain.compose(overrides))
    assert sum(len(x) for x, _ in batches) == summary["eval_windows"] == 12
