"""What a finished run's validation curve says about it: the labels a table of final losses must carry.

A final loss alone hides four different stories, and each label says exactly one of them, read from the curve of
the loss the run is judged by (the validation loss here; an experiment that judges another loss, BatchNorm's
training-mode loss, relabels with :func:`labels` on that one):

- **collapsed**: the run ends *on* the unigram line (within ``LINE_BAND`` nats of it, from below or above:
  normtrain/data/unigram.py) and the curve is *flat* there (it moved by no more than ``STILL_FALLING`` over the
  last quarter of the run): it learned byte (token) frequencies and nothing more, and more steps would not change
  that (the Post-LN failure of the stability papers).
- **above_line**: the run ends above the line by more than ``LINE_BAND``, for whatever reason (a learning rate
  too small, SGD still on its way down, a model that got worse). It is not "collapsed": it is not on the line.
- **plateaued**: the curve sat on the line for at least ``PLATEAU_SPAN`` of the run, then left it downwards;
  ``left_line_at_step`` is the first evaluation below the line after that stretch (a transient plateau, like
  Post-LN without warm-up that starts learning late).
- **undertrained**: the validation loss still falls by more than ``STILL_FALLING`` nats over the last quarter of
  the run (from the last evaluation at or before 75% of the steps to the final one), wherever it ends. ``None``
  (unknown) when the curve has no evaluation between ``EARLIEST_REFERENCE`` and 75% of the run to measure from.

The validation windows are fixed for a run, so two points of its curve differ by what the model learned, not by
which text was scored (the fitted training-loss tail of earlier versions followed the data order: the seed
explained most of its variance). Evaluating every ``EVAL_FRACTION`` of the run (21 points, 6 in the last quarter)
is what these labels need; with fewer points ``undertrained`` may be unknown and a plateau's exit coarse.

``tail_trend``, the least-squares fall of the *training* loss over the last fifth, is still recorded in the summary
(``loss_trend``) as a reported number; no label reads it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from normtrain.data.unigram import COLLAPSE_MARGIN

LINE_BAND = COLLAPSE_MARGIN  # nats: within this of the unigram loss, above or below, a run is on the line
STILL_FALLING = 0.05  # nats over the last quarter: a larger fall of the validation loss is a run still learning
LAST_QUARTER = 0.75  # the last quarter starts at 75% of the run's steps
EARLIEST_REFERENCE = 0.6  # the quarter's first point may sit this early (sparser evaluation), no earlier
PLATEAU_SPAN = 0.1  # of the run's steps: on the line at least this long, then below it, is a plateau
EVAL_FRACTION = 0.05  # evaluate every 5% of a run to see all of this

TAIL = 0.2  # tail_trend: the last fifth of the run's steps
MIN_POINTS = 5  # logged training losses needed in that window to call a trend
STALL_DROP = 0.02  # nats over the window: a smaller fitted fall is no fall


@dataclass(frozen=True)
class Labels:
    """The labels of one run (all False, ``undertrained`` None, for a diverged run: it is ``diverged``)."""

    collapsed: bool = False
    above_line: bool = False
    plateaued: bool = False
    left_line_at_step: int | None = None
    undertrained: bool | None = None
    quarter_drop: float | None = None  # the validation loss's fall over the last quarter (positive: falling)
    quarter_window: tuple[int, int] | None = None  # the two steps it is measured between

    def names(self) -> list[str]:
        """The labels that hold, in a fixed order."""
        flags = {"collapsed": self.collapsed, "above_line": self.above_line, "plateaued": self.plateaued,
                 "undertrained": self.undertrained is True}
        return [name for name, on in flags.items() if on]

    def as_dict(self) -> dict:
        """The summary's keys: the flags, ``left_line_at_step``, ``val_trend`` and ``labels`` (the names)."""
        d = asdict(self)
        trend = {"drop": d.pop("quarter_drop"), "window": list(self.quarter_window) if self.quarter_window else None,
                 "threshold": STILL_FALLING}
        d.pop("quarter_window")
        return {**d, "val_trend": trend, "labels": self.names()}


def on_line(loss: float, unigram: float) -> bool:
    return abs(loss - unigram) <= LINE_BAND


def labels(curve: Sequence[tuple[int, float]], unigram: float | None, last_step: int,
           diverged: bool = False) -> Labels:
    """The labels of a run from its ``(step, loss)`` curve (the final point at ``last_step``) and its unigram loss."""
    points = sorted((int(s), float(v)) for s, v in curve if v is not None and math.isfinite(v))
    if diverged or not points:
        return Labels()
    drop, window = quarter_drop(points, last_step)
    undertrained = None if drop is None else drop > STILL_FALLING
    if unigram is None:
        return Labels(undertrained=undertrained, quarter_drop=drop, quarter_window=window)
    left = left_plateau_at(points, unigram, last_step)
    return Labels(**line_labels(points[-1][1], unigram, drop), plateaued=left is not None, left_line_at_step=left,
                  undertrained=undertrained, quarter_drop=drop, quarter_window=window)


def line_labels(final: float, unigram: float, quarter_drop: float | None) -> dict[str, bool]:
    """``collapsed`` (on the line and flat over the last quarter) and ``above_line`` for a run that ends at
    ``final``: also for a run judged on another loss than its validation curve (BatchNorm's training mode), whose
    final value replaces the curve's while the curve still tells whether it was flat."""
    flat = quarter_drop is not None and abs(quarter_drop) <= STILL_FALLING
    return {"collapsed": on_line(final, unigram) and flat, "above_line": final > unigram + LINE_BAND}


def quarter_drop(points: list[tuple[int, float]], last_step: int) -> tuple[float | None, tuple[int, int] | None]:
    """Loss at the last evaluation at or before 75% of the run minus the final loss (None: no such point late
    enough, at or after ``EARLIEST_REFERENCE`` of the run)."""
    end_step, end = points[-1]
    start = [(s, v) for s, v in points[:-1] if EARLIEST_REFERENCE * last_step <= s <= LAST_QUARTER * last_step]
    if not start or end_step < last_step:
        return None, None
    s0, v0 = start[-1]
    return v0 - end, (s0, end_step)


def left_plateau_at(points: list[tuple[int, float]], unigram: float, last_step: int) -> int | None:
    """The step of the first evaluation below the line after a stretch on it of at least ``PLATEAU_SPAN`` of the
    run; None when the curve never sat on the line that long before going below it."""
    first_on: int | None = None
    last_on: int | None = None
    for step, loss in points:
        if on_line(loss, unigram):
            first_on = step if first_on is None else first_on
            last_on = step
            continue
        if first_on is not None and loss < unigram - LINE_BAND and last_on - first_on >= PLATEAU_SPAN * last_step:
            return step
        first_on = last_on = None
    return None


@dataclass(frozen=True)
class Trend:
    """The fitted fall of the training loss over the run's last ``TAIL`` (positive: falling); reported only."""

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
