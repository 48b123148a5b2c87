"""Test-only fault injection (the ``debug`` config group): the faults the fault tests need end to end, in the real
loop and under torchrun, without monkeypatching. Never set these in a run whose results you keep.

  debug.inject_nan_at_step=N  the training loss of global batch N of the data order (the batch step N draws in
                              a run without rollbacks) is NaN, on every rank or only on ``debug.nan_rank``. It is
                              tied to the data, not to the step number: a rollback that skips the batch never
                              meets it again (the run recovers), one that replays it (``skip_batches=0``) meets it
                              on every attempt until ``max_retries`` ends the run as diverged. A resumed run
                              knows where it is in the data, so the fault fires exactly as in an unbroken run.
  debug.kill_at_step=N        rank ``debug.kill_rank`` SIGKILLs itself before it trains step N, in the first
                              attempt of a torchrun group only (``TORCHELASTIC_RESTART_COUNT`` 0 or unset), so
                              the group that ``torchrun --max-restarts`` starts again gets past it.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import torch


def restart_count() -> int:
    """How many times torchrun has restarted this process's group (0 outside torchrun)."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)


class FaultInjector:
    def __init__(self, debug: Any, rank: int):
        self.nan_batch, self.kill_step = debug.inject_nan_at_step, debug.kill_at_step
        self.poisoned = debug.nan_rank is None or debug.nan_rank == rank
        self.killer = debug.kill_rank == rank and restart_count() == 0

    def before_step(self, step: int) -> None:
        if self.killer and step == self.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)

    def poison(self, loss: torch.Tensor, batch_index: int) -> torch.Tensor:
        """``loss``, or NaN (with a NaN gradient) on the injected batch."""
        if self.poisoned and batch_index == self.nan_batch:
            return loss * float("nan")
        return loss
