"""Every user error of the run record ends with exit 2 and a message, never a traceback (the real CLI)."""

from __future__ import annotations

import pytest
import torch
from fault_helpers import comparable, run_victim, summary

import normtrain
from normtrain.checkpoint import CKPT_NAME, load_checkpoint

pytestmark = pytest.mark.slow


def assert_user_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def test_a_read_only_run_folder(tiny, tmp_path):
    proc = run_victim([*tiny, "train.max_steps=3"], tmp_path / "run", "eacces_folder", cli=True)
    assert_user_error(proc, "Permission denied", "make the folder writable or choose another one")


def test_a_full_disk_while_checkpointing_keeps_the_previous_files(tiny, tmp_path):
    overrides = [*tiny, "train.max_steps=12", "train.ckpt_every=3"]
    run_dir = tmp_path / "run"
    proc = run_victim(overrides, run_dir, "enospc_ckpt", n=3, cli=True)  # the checkpoint at step 9 fails
    assert_user_error(proc, "No space left on device", "resumes from the last checkpoint")
    assert load_checkpoint(run_dir / CKPT_NAME)["step"] == 6  # the previous one, intact
    assert summary(run_dir)["status"] == "failed" and not list(run_dir.glob(".*.tmp"))

    reference = normtrain.train(normtrain.compose(overrides), run_dir=tmp_path / "reference")
    again = run_victim(overrides, run_dir, cli=True)  # space freed: the same command resumes
    assert again.returncode == 0, again.stderr
    assert "resuming from step 6" in again.stderr
    assert comparable(run_dir) == comparable(tmp_path / "reference")
    assert summary(run_dir)["final_val_loss"] == reference["final_val_loss"]


@pytest.mark.parametrize("damage", ["corrupt", "another_model", "changed_key"])
def test_a_checkpoint_that_cannot_be_resumed(damage, tiny, tmp_path):
    run_dir = tmp_path / "run"
    normtrain.train(normtrain.compose([*tiny, "train.max_steps=4"]), run_dir=run_dir)
    overrides = [*tiny, "train.max_steps=8"]
    if damage == "corrupt":
        (run_dir / CKPT_NAME).write_bytes((run_dir / CKPT_NAME).read_bytes()[:1000])
        needles = ["cannot be read", "train.resume=none"]
    elif damage == "another_model":
        state = torch.load(run_dir / CKPT_NAME, weights_only=True)
        (run_dir / CKPT_NAME).unlink()
        other = tmp_path / "other"
        normtrain.train(normtrain.compose([*tiny, "train.max_steps=4", "model.n_layers=3"]), run_dir=other)
        overrides.append(f"train.resume={other}")
        needles = ["model.n_layers: 3 → 2", "hydra.run.dir=PATH"]
        assert state["step"] == 4
    else:
        overrides.append("norm.eps=1e-3")
        needles = ["norm.eps: 1e-06 → 0.001", "train.allow_changes=[norm.eps]"]
    assert_user_error(run_victim(overrides, run_dir, cli=True), *needles)


def unwritable_folder(tmp_path):
    """A folder this process cannot write: read-only by mode, or (as root, whom modes do not stop) under /sys."""
    import os

    if os.geteuid() != 0:
        folder = tmp_path / "read_only"
        folder.mkdir()
        folder.chmod(0o555)
        return folder / "run"
    try:
        os.makedirs("/sys/normtrain-test/run")
    except OSError:
        return "/sys/normtrain-test/run"
    pytest.skip("no unwritable folder to be had here")


def test_a_really_unwritable_run_folder(tiny, tmp_path):
    proc = run_victim([*tiny, "train.max_steps=3"], unwritable_folder(tmp_path), cli=True)
    assert_user_error(proc, "could not write", "make the folder writable or choose another one")


@pytest.mark.parametrize("command", ["normtrain-probe", "normtrain-export"])
def test_probe_and_export_advise_on_a_bad_checkpoint_in_their_own_terms(command, tiny, tmp_path, capsys):
    """Their advice used to be train.resume=none, which means nothing to them."""
    from normtrain.export.cli import main as export_main
    from normtrain.probe.cli import main as probe_main

    run_dir = tmp_path / "run"
    normtrain.train(normtrain.compose([*tiny, "train.max_steps=2"]), run_dir=run_dir)
    (run_dir / CKPT_NAME).write_text("not a checkpoint\n")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        if command == "normtrain-probe":
            probe_main([str(run_dir)])
        else:
            export_main([str(run_dir), str(tmp_path / "out")])
    said = capsys.readouterr().err
    assert exited.value.code == 2, said
    assert said.startswith(f"{command}: the checkpoint {run_dir / CKPT_NAME} cannot be read: it is a text file (it "
                           "begins 'not a checkpoint'), not the zip archive torch.save writes. ")
    verb = command.removeprefix("normtrain-")
    assert f"{verb} another run folder, or train this run again" in said
    assert "train.resume" not in said and "weights_only" not in said
