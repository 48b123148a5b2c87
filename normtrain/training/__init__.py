"""The training loop and what only it uses.

  trainer.py     the loop (a Trainer with one method per phase) and ``train``
  monitor.py     per-layer diagnostics and divergence detection, on the device; spikes.py: the OLMo-2 spike score
  rollback.py    rollback on divergence (policy and record); preemption.py: signals stop the loop after a step
  optim.py       the optimizers and learning-rate schedules; qk_clip.py: QK-Clip; zloss.py: z-loss and log Z
  distributed.py one process or many (torchrun): the process group and the model wrapper
  resume.py      which config keys a resume may change; run_folder.py: one writer per run folder, summary writes
  outcome.py     collapsed or undertrained; flops.py: FLOPs per token and MFU; debug.py: test-only fault injection

``normtrain.train(cfg, run_dir=None)`` trains one run (``trainer.train``). ``normtrain.training`` was the loop's module
before it became this package: its names (``train``, ``Trainer``, ...) are still read here, from ``trainer`` on first
use, so importing the package (the CLIs' ``--help`` imports ``run_folder`` from here) imports no torch.
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    """What ``normtrain.training`` held when it was one module: ``trainer``'s names, imported when first asked."""
    if name.startswith("__"):
        raise AttributeError(name)
    trainer = importlib.import_module("normtrain.training.trainer")
    try:
        return getattr(trainer, name)
    except AttributeError:
        raise AttributeError(f"module 'normtrain.training' has no attribute {name!r}") from None
