"""SIGTERM/SIGINT/SIGUSR2 handling: the first signal asks the loop to stop after the current step (it
then checkpoints and exits as ``interrupted``); a second one stops at once. This is what a cluster's
preemption (SLURM sends SIGTERM; Hydra's submitit launcher SIGUSR2 before the time limit) and a user's
Ctrl-C all need. ``hand_over`` then gives SIGUSR2 to the handler that was there before (submitit's,
which requeues the job), once the checkpoint is safe.

While the final checkpoint and summary are written (``shielded``), further signals are only noted: the
write always finishes, so a run ends with both files, or, after kill -9, with the previous ones intact."""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


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


class StartUpWatch:
    """Ctrl-C while the run is built (corpus, model). Python runs a signal's handler only between bytecodes, so a
    Ctrl-C during one long torch call (allocating and initializing a huge matrix) would wait for that call to end:
    minutes. The signal itself wakes a thread here (``signal.set_wakeup_fd``, written by the interpreter's C-level
    handler at once); it gives the main thread ``GRACE_S`` to stop as usual (KeyboardInterrupt: one line, 130, the
    lock released on the way out), and if it is still stuck, says the one line itself, releases the run folder's
    lock and ends the process with 130. Nothing of the run was written yet, so nothing is left half-done. Only
    where the command line asks for it (``enabled``, set by ``normtrain.cli.run``): in a notebook, ending the
    process would end the user's kernel."""

    GRACE_S = 2.0
    enabled = False
    LINE = "normtrain: interrupted while setting up the run"

    def __init__(self, folder: Any):
        self.folder, self._pipe, self._done = folder, None, threading.Event()

    def __enter__(self) -> StartUpWatch:
        if not self.enabled or threading.current_thread() is not threading.main_thread():
            return self  # signals reach the main thread only: a run built elsewhere has no Ctrl-C to watch
        self._pipe = os.pipe()
        os.set_blocking(self._pipe[1], False)
        self._previous_fd = signal.set_wakeup_fd(self._pipe[1], warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="normtrain-start-up-watch", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # delivered to the main thread, as without us
        while not self._done.is_set():
            select.select([self._pipe[0]], [], [])
            received = os.read(self._pipe[0], 512)
            if int(signal.SIGINT) in received and not self._done.wait(self.GRACE_S):
                self.folder.close()
                print(self.LINE, file=sys.stderr, flush=True)
                os._exit(130)

    def __exit__(self, *exc) -> None:
        if self._pipe is None:
            return
        self._done.set()
        signal.set_wakeup_fd(self._previous_fd)
        os.write(self._pipe[1], b"\0")  # wake the thread, which then sees it is done
        self._thread.join()
        for fd in self._pipe:
            os.close(fd)
