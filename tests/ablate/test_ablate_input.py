"""normtrain-ablate refuses bad input before anything trains: one message naming what is allowed, exit 2, no
folder written or overwritten."""

from __future__ import annotations

import json

import pytest

from normtrain.ablate.cli import SPEC_JSON, main
from normtrain.ablate.spec import Asked, parse, split_arms
from normtrain.util.errors import StudyError

SHARED = ["logger=none", "model.n_layers=1", "model.d_model=16", "model.n_heads=2", "model.seq_len=16",
          "optim.schedule=wsd", "optim.warmup_steps=2", "train.max_steps=20"]


@pytest.mark.parametrize(("args", "says"), [
    (["model.n_layerz=1,2"], "n_layerz"),  # an unknown key, with the config's own "did you mean"
    (["placement=pre"], "no arms"),
    (["placement=pre,pre"], "at least two different values"),
    (["placement=pre,peri", "--seeds", "0"], "--seeds 0"),
    (["placement=pre,peri", "--grid", "1e-3"], "at least 3 values"),
    (["placement=pre,peri", "--grid", "1e-3,x,3"], "not a list of numbers"),
    (["placement=pre,peri", "--baseline", "post"], "not an arm; the arms are pre, peri"),
    (["placement=pre,peri", "norm=rmsnorm,layernorm"], "two overrides list values"),
    (["placement=pre,peri", "placement=post"], "also a shared override"),
    (["placement=pre,peri", "--tune", "model.mlp"], "not a numeric key"),
    (["placement=pre,peri", "--margin", "0"], "margin"),
    (["placement=pre,nope"], "nope"),
])
def test_bad_input_is_refused_with_what_is_allowed(tmp_path, capsys, args, says):
    out = tmp_path / "abl"
    assert main([*args, *SHARED, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.startswith("normtrain-ablate: ")
    assert "Traceback" not in err and not out.exists()


def test_every_problem_is_listed_at_once():
    with pytest.raises(StudyError) as found:
        parse(Asked(["placement=pre,peri", *SHARED], seeds=0, grid="1e-3", baseline="post"))
    text = str(found.value)
    assert "--seeds 0" in text and "at least 3 values" in text and "not an arm" in text


def test_a_folder_holding_another_ablation_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "abl"
    out.mkdir()
    theirs = {**parse(Asked(["norm=rmsnorm,layernorm", *SHARED])).as_dict(), "command": "normtrain-ablate norm=…"}
    (out / SPEC_JSON).write_text(json.dumps(theirs))
    before = (out / SPEC_JSON).read_text()
    assert main(["placement=pre,peri", *SHARED, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "holds another ablation" in err and "arm_key" in err and "normtrain-ablate norm=…" in err
    assert (out / SPEC_JSON).read_text() == before and sorted(p.name for p in out.iterdir()) == [SPEC_JSON]


def test_a_folder_of_something_else_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["placement=pre,peri", *SHARED, "--out", str(tmp_path), "--no-progress"]) == 2
    assert "holds no ablation" in capsys.readouterr().err


def test_the_arms_and_the_shared_overrides():
    key, arms, shared, problems = split_arms(["placement=pre,peri", "model.n_layers=24", "train.keep_ckpt_at=[1,2]"])
    assert (key, arms, shared, problems) == ("placement", ["pre", "peri"], ["model.n_layers=24",
                                                                           "train.keep_ckpt_at=[1,2]"], [])


def test_the_default_grid_brackets_the_configs_value_and_the_branch_leaves_at_the_half_runs_decay():
    spec = parse(Asked(["placement=pre,peri", *SHARED, "optim.lr=2e-3"]))
    assert spec.grid == pytest.approx((1e-3, 2e-3, 4e-3)) and spec.baseline == "pre"
    assert (spec.steps, spec.half_steps, spec.branch, spec.branch_step) == (20, 10, True, 8)  # 10 − round(0.2·10)
    cosine = parse(Asked(["placement=pre,peri", *SHARED, "optim.schedule=cosine"]))
    assert not cosine.branch and cosine.branch_step is None
