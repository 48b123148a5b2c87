"""The probe's PNGs, drawn from probe.json's numbers alone: the layer-skip profile, the stream by block, and each
norm's input → output scatter with its fitted γ·tanh(α·x). Matplotlib through ``Figure`` objects (Agg), never
``pyplot``, so no global backend is switched. (The report's probe charts are Vega-Lite, normtrain.compare.probe:
these PNGs are normtrain-probe's own, written where no report is.)"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from normtrain.pngs import DPI, save_png


def log_axis(ax, values: np.ndarray) -> None:
    """Log y with plain-number tick labels (1.5, 2, 3, ...) when the data spans few decades."""
    ax.set_yscale("log")
    ticks = _log_ticks(values)
    if ticks:
        ax.yaxis.set_major_locator(ticks[0])
        ax.yaxis.set_major_formatter(ticks[1])
        ax.yaxis.set_minor_formatter(ticks[2])
        if ticks[3] is not None:
            ax.yaxis.set_minor_locator(ticks[3])


def _log_ticks(values: np.ndarray):
    """(major locator, major formatter, minor formatter, minor locator or None) for a log axis over ``values``,
    or None to keep matplotlib's powers of ten (many decades)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

    finite = values[np.isfinite(values) & (values > 0)]
    if finite.size == 0:
        return None
    decades = math.log10(finite.max() / finite.min())
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    if decades < 0.5:  # less than a factor of 3: evenly spaced ticks read best
        return MaxNLocator(nbins=6), plain, NullFormatter(), NullLocator()
    if decades < 1.5:
        return LogLocator(subs=(1.0, 1.5, 2, 3, 4, 5, 6, 8)), plain, NullFormatter(), None
    if decades < 3:
        return LogLocator(subs=(1.0, 2, 5)), plain, NullFormatter(), None
    return None


def _figure(width: float, height: float, nrows: int = 1, ncols: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained", dpi=DPI)
    return fig, fig.subplots(nrows, ncols, squeeze=False).ravel()


def skip_loss(result: dict[str, Any], path: Path) -> Path:
    """Bars: how much the eval loss rises when each block is skipped (the full model's loss in the title)."""
    layers = result["layers"]
    fig, (ax,) = _figure(max(5.0, 0.45 * len(layers) + 2), 3.8)
    delta = np.array([row["skip_delta"] for row in layers], dtype=float)
    ax.bar(np.arange(len(layers)), delta, color=np.where(delta >= 0, "#4c78a8", "#e45756"))
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_xlabel("skipped block (0 = next to the embedding)")
    ax.set_ylabel("eval loss − full model's (nats)")
    ax.set_title(f"Eval loss with each block skipped (full model: {result['val_loss']:.4f})", fontsize="medium")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(True, axis="y", alpha=0.25)
    return save_png(fig, path)


def stream(result: dict[str, Any], path: Path) -> Path:
    """Per block: the cosine of its input and output streams, the stream's rms and max |x| after it."""
    layers = result["layers"]
    fig, axes = _figure(12, 3.6, ncols=3)
    x = np.arange(len(layers))
    panels = (("block_cos", "cos(block input, output), per token", False),
              ("act_rms", "residual-stream rms after the block", True),
              ("act_absmax", "residual-stream max |x| after the block", True))
    for ax, (key, title, log) in zip(axes, panels, strict=True):
        values = np.array([row[key] for row in layers], dtype=float)
        ax.plot(x, values, marker="o", ms=4, lw=1.3, color="#4c78a8")
        if log and np.all(values > 0):
            log_axis(ax, values)
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("block")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(True, which="both", alpha=0.25)
    return save_png(fig, path)


def norm_curves(result: dict[str, Any], path: Path) -> Path | None:
    """One panel per norm: input x against the output before the affine (a sample of pairs), and the fitted
    γ·tanh(α·x) in red."""
    norms = result["norms"]
    if not norms:
        return None
    cols = min(4, len(norms))
    rows = math.ceil(len(norms) / cols)
    fig, axes = _figure(3.2 * cols, 2.8 * rows, nrows=rows, ncols=cols)
    for ax, norm in zip(axes, norms, strict=False):
        ax.scatter(norm["x"], norm["y"], s=2, alpha=0.35, color="#4c78a8", linewidths=0, rasterized=True)
        ax.plot(norm["curve"]["x"], norm["curve"]["y"], color="#e45756", lw=1.4)
        fit = norm["fit"]
        ax.set_title(f"{norm['name']} ({norm['kind']})\nα={fit['alpha']:.3g}, γ={fit['gamma']:.3g}, "
                     f"R²={fit['r2']:.3f} (line {fit['r2_line']:.3f})", fontsize="small")
        ax.grid(True, alpha=0.25)
    for ax in axes[len(norms):]:
        ax.set_axis_off()
    fig.supxlabel("norm input x (per feature)", fontsize="small")
    fig.supylabel("output before γ, β", fontsize="small")
    return save_png(fig, path)
