"""Figures of the reproductions: one colour per placement in every figure, every seed drawn, readable log axes.

matplotlib is used through ``Figure`` objects (Agg), never ``pyplot``. Each seed is a thin line (or a small
point) and the mean over seeds a thick one, so the spread is visible; loss figures carry the unigram line.

A figure drawn inside ``marked(text)`` (a smoke or a quick run's) carries ``text`` across it, large and faint,
and in its PNG's ``Title``: a figure of a few steps or one seed never passes for a result's, wherever it is
copied to.

These stay matplotlib while compare's figures are Vega-Lite specs (normtrain.compare.paper): a reproduction's
figures are PNGs only, with no interactive twin to drift from, and each experiment module draws its own axes
through these helpers, so moving them would rewrite every experiment's figure code for no second source removed.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from normtrain.util.numbers import number

# One colour per placement across all figures (and the same order as the tables).
PLACEMENT_COLORS = {"post": "#d62728", "pre": "#1f77b4", "deepnorm": "#2ca02c", "peri": "#9467bd",
                    "reorder": "#8c564b", "mix": "#e377c2", "subln": "#17becf", "admin": "#bcbd22",
                    "rezero": "#ff7f0e", "none": "#7f7f7f"}
NORM_COLORS = {"layernorm": "#1f77b4", "rmsnorm": "#ff7f0e", "prmsnorm": "#2ca02c", "batchnorm": "#d62728",
               "dyt": "#9467bd"}
NORM_STYLES = {"layernorm": "-", "rmsnorm": "--", "prmsnorm": ":", "batchnorm": "-."}
SEED_ALPHA, SEED_LW, MEAN_LW = 0.35, 0.8, 2.0
_MARK: contextvars.ContextVar[str | None] = contextvars.ContextVar("figure_mark", default=None)


@contextlib.contextmanager
def marked(text: str | None) -> Iterator[None]:
    """Every figure saved inside it carries ``text`` (None: no mark)."""
    token = _MARK.set(text)
    try:
        yield
    finally:
        _MARK.reset(token)


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.2, height: float = 3.2):
    """A constrained-layout Figure and its axes, flattened."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained", dpi=100)
    return fig, fig.subplots(nrows, ncols, squeeze=False).ravel()


def save(fig, path: Path) -> None:
    from normtrain.util.pngs import write_png

    if mark := _MARK.get():  # as large as fits across the figure (a bold glyph is about 0.65 of its size wide)
        width, height = (72 * v for v in fig.get_size_inches())
        size = min(0.35 * height, 0.85 * width / (0.65 * len(mark)))
        fig.text(0.5, 0.5, mark, ha="center", va="center", rotation=12, fontsize=size, color="#d62728", alpha=0.25,
                 weight="bold", zorder=10)
    buf = io.BytesIO()
    metadata = {"Software": None, **({"Title": mark} if mark else {})}  # no version string (or URL) in it
    fig.savefig(buf, format="png", dpi=100, metadata=metadata)
    write_png(path, buf.getvalue())


def shade(color: str, strength: float) -> tuple[float, float, float]:
    """``color`` mixed with white: strength 1 is the colour itself, smaller is lighter (a depth within a placement)."""
    from matplotlib.colors import to_rgb

    return tuple(1 - strength * (1 - c) for c in to_rgb(color))


def log_axis(ax, values: Sequence[float], axis: str = "x") -> None:
    """A log axis with a labelled tick at each of ``values`` and no minor labels (they overlap the majors)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_locator(FixedLocator(list(values)))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_locator(NullLocator())


def seeds_and_mean(ax, xs: Sequence[float], per_seed: Sequence[Sequence[float | None]], color: str, label: str,
                   style: str = "-", marker: str = "o") -> None:
    """Each seed's series thin (with points), the mean over seeds thick, labelled ``label (n seeds)``."""
    arr = np.array([[np.nan if v is None else v for v in s] for s in per_seed], dtype=float)
    if arr.size == 0:
        return
    for row in arr:
        ax.plot(xs, row, style, color=color, lw=SEED_LW, alpha=SEED_ALPHA, marker=marker, ms=2.5)
    with np.errstate(all="ignore"):
        finite = np.where(np.isfinite(arr), arr, np.nan)
        mean = np.nanmean(finite, axis=0) if np.isfinite(finite).any() else finite[0]
    ax.plot(xs, mean, style, color=color, lw=MEAN_LW, marker=marker, ms=4, label=f"{label} (mean of {len(arr)})")


def curves(ax, per_seed: Sequence[Sequence[tuple[float, float]]], color: str, label: str, style: str = "-") -> None:
    """Loss curves: one thin line per seed, and their mean on the steps they share, thick."""
    per_seed = [c for c in per_seed if c]
    if not per_seed:
        return
    marker = "o" if max(len(c) for c in per_seed) == 1 else None  # a curve of one point is a point, or nothing shows
    for c in per_seed:
        ax.plot(*zip(*c, strict=True), style, color=color, lw=SEED_LW, alpha=SEED_ALPHA, marker=marker, ms=3)
    shared = sorted(set.intersection(*[{s for s, _ in c} for c in per_seed]))
    if shared:
        by_step = [dict(c) for c in per_seed]
        ax.plot(shared, [np.mean([d[s] for d in by_step]) for s in shared], style, color=color, lw=MEAN_LW,
                marker=marker, ms=5, label=f"{label} (mean of {len(per_seed)})")


def loss_range(ax, unigram: float | None, per_seed: Sequence[Sequence[tuple[float, float]]],
               above: float = 0.4) -> None:
    """A loss axis that shows the unigram line and the part of the curves below ``above`` nats over it (the first
    steps' high losses would flatten everything else), but always every curve's last point: a short run (a smoke
    run's single evaluation) that ends far above the line is drawn, not cut off."""
    ends = [c[-1][1] for c in per_seed if c and np.isfinite(c[-1][1])]
    top = max([(unigram if unigram is not None else 4.0) + above, *(e + 0.1 for e in ends)])
    lows = [v for c in per_seed for _, v in c if np.isfinite(v)]
    bottom = min([*lows, unigram if unigram is not None else top]) - 0.1
    ax.set_ylim(bottom, top)


def unigram_line(ax, value: float | None) -> None:
    """The unigram baseline: a model that learned only byte frequencies ends on this line."""
    if value is not None:
        ax.axhline(value, color="k", ls=":", lw=1.2, label=f"unigram baseline {number(value)}")


def finish(ax, title: str, xlabel: str, ylabel: str, legend: bool = True) -> None:
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
