"""What a finished run's loss says about it: collapsed, undertrained, or neither.

Two different failures look alike on a table of final losses, and must not be confused:

- **collapsed**: the run sits on the unigram line (its final val loss does not beat the unigram baseline by
  ``COLLAPSE_MARGIN``, 0.05 nats, or is above it: normtrain/data/unigram.py) *and* has stopped falling there:
  it learned byte (token) frequencies and nothing more, and more steps would not change that (the Post-LN
  failure of the stability papers).
- **undertrained**: the run is on or above that line but still falling (or has too few logged points at its end
  to tell): it is short, not broken. A 20-step run is undertrained, never collapsed.

"Stopped falling" is read from the training loss logged at monitor steps over the last ``TAIL`` of the run: a
least-squares line through those points gives the fall over that window and its standard error; the run is still
falling when the fitted fall exceeds both ``STALL_DROP`` nats and twice its standard error (so batch-to-batch
noise is not taken for progress). With fewer than ``MIN_POINTS`` points in the window the trend is unknown, and an
unknown trend never makes a run collapsed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from normtrain.data.unigram import on_unigram_line

TAIL = 0.2  # the last fifth of the run's steps
MIN_POINTS = 5  # logged training losses needed in that window to call a trend
STALL_DROP = 0.02  # nats over the window: a smaller fitted fall is no fall


@dataclass(frozen=True)
class Trend:
    """The fitted fall of the training loss over the run's last ``TAIL`` (positive: falling)."""

    drop: float | None  # nats over the window; None: too few points
    stderr: float | None
    points: int
    window: tuple[int, int] | None  # first and last step of the window

    @property
    def falling(self) -> bool | None:
        if self.drop is None:
            return None
        return self.drop > max(STALL_DROP, 2 * (self.stderr or 0.0))

    def as_dict(self) -> dict:
        return {"tail_drop": self.drop, "tail_drop_stderr": self.stderr, "tail_points": self.points,
                "tail_window": list(self.window) if self.window else None, "falling": self.falling}


def tail_trend(steps: Sequence[int], losses: Sequence[float], last_step: int) -> Trend:
    """The trend of ``losses`` (logged at ``steps``) over the last ``TAIL`` of a run that ended at ``last_step``."""
    start = last_step - TAIL * last_step
    pts = [(float(s), float(v)) for s, v in zip(steps, losses, strict=True) if s >= start and math.isfinite(v)]
    if len(pts) < MIN_POINTS:
        return Trend(None, None, len(pts), None)
    n = len(pts)
    mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in pts)
    slope_se = math.sqrt(resid / (n - 2) / sxx) if n > 2 else 0.0
    span = pts[-1][0] - pts[0][0]
    return Trend(-slope * span, slope_se * span, n, (int(pts[0][0]), int(pts[-1][0])))


def outcome(final_loss: float | None, unigram: float | None, trend: Trend) -> dict[str, bool]:
    """``collapsed`` and ``undertrained`` for the summary (both False for a run below the line, or diverged)."""
    on_line = on_unigram_line(final_loss, unigram)
    stalled = trend.falling is False
    return {"collapsed": on_line and stalled, "undertrained": on_line and not stalled}
