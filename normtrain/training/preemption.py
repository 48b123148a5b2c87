"""SIGTERM/SIGINT/SIGUSR2 handling: the first signal asks the loop to stop after the current step (it
then checkpoints and exits as ``interrupted``); a second one stops at once. This is what a cluster's
preemption (SLURM sends SIGTERM; Hydra's submitit launcher SIGUSR2 before the time limit) and a user's
Ctrl-C all need. ``hand_over`` then gives SIGUSR2 to the handler that was there before (submitit's,
which requeues the job), once the checkpoint is safe.

While the final checkpoint and summary are written (``shielded``), further signals are only noted: the
write always finishes, so a run ends with both files, or, after kill -9, with the previous ones intact."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class StopRequested:
    """Installs the handlers for the duration of a ``with`` block (main thread only)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2)

    def __init__(self):
        self.requested: str | None = None
        self._previous: dict[int, object] = {}
        self._shielded = False

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.requested is not None and not self._shielded:
            raise KeyboardInterrupt(f"second signal ({signal.Signals(signum).name}): stopping at once")
        self.requested = self.requested or signal.Signals(signum).name

    @contextmanager
    def shielded(self) -> Iterator[None]:
        """Inside: a signal never interrupts (the final writes run to completion)."""
        self._shielded = True
        try:
            yield
        finally:
            self._shielded = False

    def __enter__(self) -> StopRequested:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        self._restored = dict(self._previous)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def agreed(self, ctx, synced: bool) -> bool:
        """A signal asked to stop; under torchrun every rank stops at the same step, agreed where the ranks sync
        anyway (``synced``: a log or eval step), so there is no extra sync per step."""
        stopping = self.requested is not None
        if not ctx.enabled:
            return stopping
        if not synced:
            return False
        import torch  # the signal handling itself needs none

        return bool(ctx.all_reduce(torch.tensor([float(stopping)], device=ctx.device), "max"))

    def hand_over(self) -> None:
        """Pass a received SIGUSR2 on to the handler installed before ours (submitit requeues there)."""
        previous = getattr(self, "_restored", {}).get(signal.SIGUSR2)
        if self.requested == "SIGUSR2" and callable(previous):
            previous(signal.SIGUSR2, None)
