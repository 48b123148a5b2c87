"""The modules' old names (before the package root held only its entry points) still import, each as the moved
module itself, so users' scripts and their monkeypatches keep working."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import normtrain
from normtrain.util.moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_imports_the_moved_module_itself(old):
    new = importlib.import_module(MOVED[old])
    assert importlib.import_module(old) is new is sys.modules[old]
    assert new.__name__ == new.__spec__.name == MOVED[old]  # its own name and spec, not the old one's
    parent, _, name = old.rpartition(".")
    assert getattr(importlib.import_module(parent), name) is new


def test_every_module_that_left_the_root_has_its_old_name():
    gone = {f"normtrain.{name}" for name in ("atomic", "hashing", "markdown", "numbers", "dotted", "errors",
                                             "provenance", "runlog", "spread", "pngs", "version", "progress",
                                             "monitor", "rollback", "spikes", "preemption", "resume",
                                             "run_folder", "optim", "qk_clip", "ngpt_rules", "zloss", "outcome",
                                             "flops", "distributed", "debug")}
    engine = {f"normtrain.reproduce.{name}" for name in ("best_lr", "grid", "plan", "plots", "preregistration",
                                                         "significance", "stats", "verdicts")}  # issue 60
    renamed = {f"normtrain.reproduce.{name}" for name in ("warmup", "depth", "grad_init", "model_update",
                                                          "output_change")}
    assert set(MOVED) == gone | engine | renamed


def test_the_old_ways_of_importing_still_work(monkeypatch):
    from normtrain import atomic, errors
    from normtrain.norms import GAINS, NORMS, NormSpec, build_norm, register_norm  # noqa: F401 (a package now)
    from normtrain.training import train

    assert train is importlib.import_module("normtrain.training.trainer").train
    assert atomic.write_text and issubclass(errors.ConfigError, Exception)
    monkeypatch.setattr("normtrain.optim.lr_at", lambda *a, **k: 0.5)  # patching the old name patches the module
    assert importlib.import_module("normtrain.training.optim").lr_at() == 0.5


def test_the_loops_old_module_name_is_its_package_and_serves_its_old_names():
    training = importlib.import_module("normtrain.training")
    trainer = importlib.import_module("normtrain.training.trainer")
    assert training.train is trainer.train and training.Trainer is trainer.Trainer
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        training.nothing_here  # noqa: B018
    assert callable(normtrain.train) and normtrain.train is not training  # the function, whatever is imported


def test_importing_normtrain_and_an_old_name_imports_no_torch():
    code = "import sys, normtrain, normtrain.errors, normtrain.run_folder; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
