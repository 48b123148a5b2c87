"""The old names of modules that moved into packages (issue 38: the package root holds only the entry points and
the config), kept importable for users' scripts: ``import normtrain.monitor`` gives ``normtrain.training.monitor``
itself, the same object under both names in ``sys.modules``, so patching either patches the one module.
(``normtrain.training``, the loop's old module, is the loop's package now and serves its old names itself.)

``normtrain/__init__.py`` installs the finder; it answers only for the names in ``MOVED``, after every other
finder has found no file by that name, and imports nothing until such a name is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

UTIL = ("atomic", "dotted", "errors", "hashing", "markdown", "numbers", "pngs", "progress", "provenance", "runlog",
        "spread", "version")
TRAIN = ("debug", "distributed", "flops", "monitor", "optim", "outcome", "preemption", "qk_clip", "resume",
         "rollback", "run_folder", "spikes", "zloss")
STUDY = ("best_lr", "grid", "plan", "plots", "preregistration", "significance", "stats", "verdicts")
RENAMED = {"warmup": "xiong_warmup", "depth": "deepnet_depth", "grad_init": "xiong_grad_init",
           "model_update": "deepnet_update", "output_change": "admin_output_change"}
MOVED = {
    **{f"normtrain.{name}": f"normtrain.util.{name}" for name in UTIL},
    **{f"normtrain.{name}": f"normtrain.training.{name}" for name in TRAIN},
    "normtrain.ngpt_rules": "normtrain.model.ngpt_rules",
    # issue 60: the protocol engine left normtrain/reproduce/ for normtrain/study/ (the registrations committed in
    # reproduce/preregistered/ import it by its old name, and stay unchanged records)
    **{f"normtrain.reproduce.{name}": f"normtrain.study.{name}" for name in STUDY},
    # and the experiments' modules took their experiments' names
    **{f"normtrain.reproduce.{old}": f"normtrain.reproduce.{new}" for old, new in RENAMED.items()},
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name in ``MOVED`` and loads it as the module under its new name."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import machinery stamps the old name's spec on it next
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state  # its own spec back: it is already executed


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
