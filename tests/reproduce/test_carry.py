"""Finished runs carried to a fresh machine in git (normtrain/reproduce/carry.py): a T run travels only with its
finished T/2 branch, nothing finished is overwritten, no checkpoint goes into the pack, and a restored grid trains
only what the pack lacked."""

from __future__ import annotations

import json
import os
import tarfile

import pytest

from normtrain.reproduce import carry
from normtrain.reproduce.cli import main, make_plan
from normtrain.reproduce.curse_of_depth import CurseOfDepth
from normtrain.reproduce.probing import PROBE_FILE, fresh
from normtrain.study.branches import half_runs_dir
from normtrain.study.grid import reusable
from normtrain.study.plan import Plan


def plan_at(tmp_path, seeds=("0", "1", "2", "3")) -> Plan:
    return Plan("toy", "cpu", False, [], {"optim.lr": ["1e-3"], "train.seed": list(seeds)}, tmp_path / "runs",
                tmp_path / "out", progress=False)


def finish(folder, status="completed", **extra) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({"status": status, **extra}))
    (folder / "metrics.jsonl").write_text('{"step": 0, "val/loss": 5.5}\n')
    (folder / "ckpt_step10.pt").write_bytes(b"weights")


def test_a_t_run_is_packed_only_once_its_branch_no_longer_needs_its_checkpoint(tmp_path):
    plan = plan_at(tmp_path)
    t = [plan.run_dir(c) for c in plan.combos()]
    half = [half_runs_dir(plan.runs_dir) / f.name for f in t]
    finish(t[0])  # a finished pair
    finish(half[0])
    finish(t[1])  # its branch not trained yet: it needs t[1]'s checkpoint, which stays behind
    finish(t[2], "diverged", diverged_at_step=4)  # gone before the branch step: no branch to wait for
    finish(t[3], "diverged", diverged_at_step=40)  # gone after it: its branch still needs the checkpoint
    assert carry.packable(plan, True, 10) == [("T", t[0]), ("half", half[0]), ("T", t[2])]
    assert [f for _, f in carry.packable(plan, False, None)] == t  # no T/2 runs: every finished run
    carry.pack(plan, True, 10)
    archives = sorted((plan.out / carry.PACK).iterdir())
    assert [a.name for a in archives] == [f"{t[0].name}.tar.xz", f"{t[2].name}.tar.xz"]  # one per grid point
    names = []
    for archive in archives:
        with tarfile.open(archive) as tar:
            names += tar.getnames()
    assert not any(n.endswith(".pt") for n in names)
    assert sorted(names) == sorted(f"{part}/{f.name}/{file}" for part, f in (("T", t[0]), ("half", half[0]),
                                                                             ("T", t[2]))
                                   for file in ("metrics.jsonl", "summary.json"))


def test_restore_fills_missing_and_unfinished_runs_and_never_overwrites_a_finished_one(tmp_path):
    packed = plan_at(tmp_path / "a")
    for c in packed.combos():
        finish(packed.run_dir(c), wall_time_s=1.0)
    carry.pack(packed, False, None)
    plan = plan_at(tmp_path / "b")
    plan.out = packed.out
    folders = [plan.run_dir(c) for c in plan.combos()]
    finish(folders[0], note="trained here")  # finished here: kept as it is
    folders[1].mkdir(parents=True)
    (folders[1] / "metrics.jsonl").write_text("half a run\n")  # killed mid-way here: replaced
    assert carry.restore(plan) == 3
    assert json.loads((folders[0] / "summary.json").read_text())["note"] == "trained here"
    assert all(carry.status_of(f) for f in folders) and (folders[1] / "metrics.jsonl").read_text().startswith("{")
    assert carry.restore(plan) == 0  # all here now
    plan.fresh = True
    assert carry.restore(plan) == 0  # --fresh trains them again
    carry.drop(plan.out)
    assert not (plan.out / carry.PACK).exists()


@pytest.mark.parametrize("arcname", ["../outside.txt", "T/run/wandb/stray.txt", "T/run/probe/../../x.txt"])
def test_a_pack_with_files_this_tool_did_not_write_is_refused(tmp_path, arcname):
    plan = plan_at(tmp_path)
    (plan.out / carry.PACK).mkdir(parents=True)
    stray = tmp_path / "stray.txt"
    stray.write_text("x")
    with tarfile.open(plan.out / carry.PACK / "x.tar.xz", "w:xz") as tar:
        tar.add(stray, arcname=arcname)  # outside the runs folders, or a run subfolder that is not a probe's
    with pytest.raises(carry.PackError, match="not a run file"):
        carry.restore(plan)
    with pytest.raises(carry.PackError, match="no finished run"):
        carry.pack(plan_at(tmp_path / "empty"), True, 10)


def test_pack_refuses_what_it_cannot_carry(capsys, monkeypatch):
    from normtrain.reproduce.batchnorm_leak import BatchNormLeak

    monkeypatch.setattr(BatchNormLeak, "checkpoint_stand_in", None)  # an analysis reading checkpoints, no stand-in
    assert main(["batchnorm_leak", "--pack"]) == 2
    assert "checkpoints" in capsys.readouterr().err
    assert main(["dyt", "--pack", "--scale", "gpu"]) == 2
    assert "results folder" in capsys.readouterr().err


def probed(folder) -> None:
    (folder / PROBE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (folder / PROBE_FILE).write_text('{"layers": []}')


def test_a_probe_travels_with_its_run_and_stands_in_for_the_checkpoint_left_behind(tmp_path):
    packed = plan_at(tmp_path / "a", seeds=("0",))
    folder = packed.run_dir(packed.combos()[0])
    finish(folder)
    probed(folder)
    carry.pack(packed, False, None)
    plan = plan_at(tmp_path / "b", seeds=("0",))
    plan.out = packed.out
    assert carry.restore(plan) == 1
    here = plan.run_dir(plan.combos()[0])
    assert (here / PROBE_FILE).read_text() == '{"layers": []}' and not (here / "ckpt.pt").exists()
    assert fresh(here)  # the probe is still no older than the run's summary: reused, not made again


def test_reuse_without_the_checkpoint_needs_a_stand_in_made_after_the_run(tmp_path, monkeypatch):
    plan = plan_at(tmp_path, seeds=("0",))
    combo = plan.combos()[0]
    folder = plan.run_dir(combo)
    finish(folder)
    (folder / "ckpt_step10.pt").unlink()
    monkeypatch.setattr("normtrain.study.grid.same_run", lambda old, new: True)  # the config is not the question
    assert not reusable(plan, combo, True)  # the checkpoint is gone and nothing stands in for it
    assert not reusable(plan, combo, True, PROBE_FILE)
    probed(folder)
    assert reusable(plan, combo, True, PROBE_FILE) and reusable(plan, combo, False)
    os.utime(folder / PROBE_FILE, (0, 0))  # the run retrained after its probe: the probe is of another run
    assert not reusable(plan, combo, True, PROBE_FILE)


def test_a_probing_experiment_probes_exactly_the_t_runs_it_packs(tmp_path, monkeypatch):
    asked = []

    def stand_ins(self, runs, combos):
        asked.extend(combos)
        for c in combos:
            probed(runs.run_dir(c))

    monkeypatch.setattr(CurseOfDepth, "make_stand_ins", stand_ins)
    runs, out = tmp_path / "runs", tmp_path / "out"
    plan = make_plan("curse_of_depth", out=out, runs_dir=runs, progress=False)
    first, second = plan.combos()[:2]
    for c in (first, second):
        finish(plan.run_dir(c))
    finish(half_runs_dir(runs) / plan.run_dir(first).name)  # only the first pair is whole
    assert main(["curse_of_depth", "--pack", "--out", str(out), "--runs-dir", str(runs)]) == 0
    assert asked == [first]
    with tarfile.open(out / carry.PACK / f"{plan.run_dir(first).name}.tar.xz") as tar:
        assert f"T/{plan.run_dir(first).name}/{PROBE_FILE}" in tar.getnames()
    assert not (out / carry.PACK / f"{plan.run_dir(second).name}.tar.xz").exists()

