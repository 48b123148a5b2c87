"""The training loop and what only it uses.

  trainer.py     the loop (a Trainer with one method per phase) and ``train``
  step.py        one optimizer update (micro-batches, clipping, the weight rule, QK-Clip) and its lr
  evaluation.py  the validation windows and loss, the unigram baseline, the monitor's output probe
  components.py  the corpus, optimizer and monitor ``Trainer.build`` puts together; summary.py: the first summary
  reporting.py   the run's name and folder, its metric sinks, tokens/s and MFU
  monitor.py     per-layer diagnostics and divergence detection, on the device; layer_stats.py: the per-block
                 hooks and statistics; spikes.py: the OLMo-2 spike score
  rollback.py    rollback on divergence (policy and record); preemption.py: signals stop the loop after a step
  optim.py       the optimizers and learning-rate schedules; qk_clip.py: QK-Clip; zloss.py: z-loss and log Z
  distributed.py one process or many (torchrun): the process group and the model wrapper
  resume.py      what a resume continues from and which config keys it may change; run_folder.py: one writer per
                 run folder, summary writes
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
