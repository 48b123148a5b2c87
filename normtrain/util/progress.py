"""Progress (training steps, bytes encoded): a tqdm bar on a terminal, a plain line every few seconds anywhere else.

A batch job's log (SLURM, nohup, a pipe) is not a terminal: tqdm's carriage-return frames would fill it with
redrawn bars. There a line like ``normtrain: step 120/300 (40%) · loss 2.345 · 15.2k tok/s · ETA 1m23s`` is
said (stderr and the run's log file, see runlog.py) every ``train.progress_every_s`` seconds and at the end.
Both have the small part of tqdm's interface the training loop uses: ``update``, ``set_postfix``,
``set_postfix_str`` and ``close``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from normtrain.util.runlog import say


def interactive(stream: Any = None) -> bool:
    """A terminal, or a notebook (whose output is no tty but draws tqdm's widget)."""
    stream = stream if stream is not None else sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) or "ipykernel" in sys.modules


def make_progress(total: int | None, initial: int, desc: str, enabled: bool, every_s: float, unit: str = "step"):
    """The progress display: nothing, a bar (interactive) or lines (batch jobs); of steps, or of bytes (``B``)."""
    if enabled and interactive():
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True, unit=unit, unit_scale=unit == "B")
    return Lines(total, initial, desc, every_s, enabled, unit)


def duration(seconds: float) -> str:
    """``1h02m``, ``3m05s``, ``42s``."""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s / 1e3:.1f}k" if tokens_per_s >= 1e3 else f"{tokens_per_s:.0f}"


class Lines:
    """A line every ``every_s`` seconds (and one at the end) instead of a bar; silent when not ``enabled``."""

    def __init__(self, total: int | None, initial: int, desc: str, every_s: float, enabled: bool = True,
                 unit: str = "step"):
        self.total, self.n, self.first, self.desc, self.unit = total, initial, initial, desc, unit
        self.every_s, self.enabled = every_s, enabled
        self.started = self.last_said = time.monotonic()
        self.postfix: dict[str, str] = {}
        self.said_at = initial

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.enabled and time.monotonic() - self.last_said >= self.every_s:
            self.say()

    def set_postfix(self, refresh: bool = False, **values: Any) -> None:
        self.postfix.update({k: str(v) for k, v in values.items()})

    def set_postfix_str(self, text: str, refresh: bool = False) -> None:
        self.postfix["val"] = text.removeprefix("val ")

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        done = self.n - self.first
        parts = [self.count()]
        parts += [f"{key} {self.postfix[key]}" for key in ("loss", "val", "lr") if key in self.postfix]
        if "tok_s" in self.postfix:
            parts.append(f"{rate(float(self.postfix['tok_s']))} tok/s")
        if done and self.total and self.n < self.total:
            parts.append(f"ETA {duration(elapsed / done * (self.total - self.n))}")
        parts.append(f"{duration(elapsed)} elapsed")
        return f"normtrain: {self.desc}: " + " · ".join(parts)

    def count(self) -> str:
        """``step 120/300 (40%)`` (or of any other unit: ``run 3/15 (20%)``), or of bytes ``4.2/11.4 MB (37%)``."""
        in_mb = self.unit == "B"
        n = f"{self.n / 1e6:.1f}" if in_mb else f"{self.unit} {self.n}"  # step 120, or run 3 of a grid
        if not self.total:
            return f"{n} MB" if in_mb else n
        total = f"{self.total / 1e6:.1f} MB" if in_mb else str(self.total)
        return f"{n}/{total} ({100 * self.n / self.total:.0f}%)"

    def say(self) -> None:
        say(self.line())
        self.last_said, self.said_at = time.monotonic(), self.n

    def close(self) -> None:
        if self.enabled and self.n != self.said_at:
            self.say()
        self.enabled = False
