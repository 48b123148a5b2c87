"""The comparison figures, one function per PNG. Each returns notes for the report (what was not recorded).

matplotlib is imported inside the functions and used through ``Figure`` objects (rendered by Agg, the PNG
backend), never through ``pyplot``: no global backend is switched, no window opens, and a notebook that
calls this keeps its own backend. Each run is drawn in its group's colour (normtrain.compare.groups), the same
in every figure, and the legend has one entry per group.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from normtrain.atomic import write_bytes
from normtrain.compare.runs import Run

DPI = 100
# (metrics prefix, panel title, log y)
LAYER_STATS = (
    ("act_std", "activation std (block output)", True),
    ("act_mean", "activation mean (block output)", False),
    ("resid_norm", "residual-stream norm entering the block", True),
    ("attn_entropy", "attention entropy (nats)", False),
    ("attn_logit_max", "max attention logit q·k/√d", False),
)
RESIDUAL_STATS = (  # residual_stream.png (monitor.residual_stats, monitor.block_cos)
    ("act_rms", "residual-stream rms after the block", True),
    ("act_absmax", "residual-stream max |x| after the block", True),
    ("block_cos", "cosine of block input and output streams", False),
)
CHOSEN_STEPS = ("first logged step", "middle logged step", "last logged step")  # the columns of activations.png
TITLE_CHARS, LEGEND_CHARS = 60, 80  # the most of a run label shown in a heatmap's title, in a legend entry


def _figure(width: float, height: float, legend: Sequence[str], ncols: int = 1, nrows: int = 1, **subplots):
    """A constrained-layout figure with room below the axes for a legend of these entries."""
    from matplotlib.figure import Figure

    rows = math.ceil(len(legend) / _legend_cols(legend, width))
    fig = Figure(figsize=(width, height + 0.2 * rows), layout="constrained", dpi=DPI)
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplots).ravel()
    return fig, axes


def _legend_cols(texts: Sequence[str], width: float) -> int:
    """As many columns as fit across the figure: about 15 characters of small text per inch."""
    longest = max((min(len(t), LEGEND_CHARS) for t in texts), default=1) + 6  # + the line sample and the gap
    return max(1, min(len(texts), int(width * 15 // longest), 5))


def _legend_labels(runs: Sequence[Run]) -> list[str]:
    """One legend entry per group of seeds (``run.group``), or per run where runs are not grouped."""
    return list(dict.fromkeys(r.group or r.label for r in runs))


def _legend(fig, runs: Sequence[Run], cols: Sequence, extra: Sequence = ()) -> None:
    """Groups by colour (the seeds of a group share theirs), then the style entries (line kinds, markers), below
    every panel."""
    from matplotlib.lines import Line2D

    entries = dict(zip((r.group or r.label for r in runs), cols, strict=True))
    handles = [Line2D([], [], color=c, lw=2) for c in entries.values()] + [h for h, _ in extra]
    labels = [_shortened(t, LEGEND_CHARS) for t in entries] + [t for _, t in extra]
    fig.legend(handles, labels, loc="outside lower center", ncol=_legend_cols(labels, fig.get_figwidth()),
               fontsize="small", frameon=False)


def _style(linestyle: str, marker: str | None, text: str):
    from matplotlib.lines import Line2D

    return Line2D([], [], color="0.3", ls=linestyle, marker=marker, ms=5, lw=1.2), text


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


def _not_recorded(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"{what}\nnot recorded", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def save_png(fig, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})  # no version string (or URL) in it
    write_bytes(path, palette_png(buf.getvalue()))
    return path


def palette_png(data: bytes, method: int = 0) -> bytes:
    """The PNG with its colours reduced to a 256-colour palette: plots have few colours, and the files get 2-3
    times smaller. ``method``: Pillow's median cut (0) for plots; fast octree (2) keeps the exact colours of a
    screenshot's small swatches. Pillow comes with matplotlib; any failure keeps the original."""
    try:
        from PIL import Image

        image = Image.open(io.BytesIO(data)).convert("RGB").quantize(colors=256, method=method, dither=0)
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=True)
    except Exception:  # a smaller file is a nicety, never a reason to fail
        return data
    return out.getvalue() if out.tell() < len(data) else data


def _finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isfinite(y)
    return x[keep], y[keep]


def loss(runs: Sequence[Run], cols: Sequence, path: Path) -> list[str]:
    """Train (solid) and validation (dashed, dots) loss against step; an x where a diverged run stopped, a dashed
    vertical line where a run rolled back."""
    from matplotlib.lines import Line2D

    fig, (ax,) = _figure(9, 5, _legend_labels(runs) + ["validation"] * 3)
    seen, firsts = [], []
    for run, c in zip(runs, cols, strict=True):
        tx, ty = _finite(*run.series("train/loss"))
        vx, vy = _finite(*run.series("val/loss"))
        ax.plot(tx, ty, color=c, lw=1.3)
        ax.plot(vx, vy, color=c, lw=1.0, ls="--", marker="o", ms=3.5)
        seen += [ty, vy]
        firsts += [v[0] for v in (ty, vy) if v.size]
    values = np.concatenate(seen) if seen else np.empty(0)
    if values.size:
        top = min(values.max(), 1.5 * max(firsts)) * 1.04
        ax.set_ylim(values.min() * 0.96, top)
        for run, c in zip(runs, cols, strict=True):
            for rollback in run.rollbacks:
                ax.axvline(rollback["step"], color=c, ls=(0, (4, 3)), lw=1.0, alpha=0.8)
            if run.status == "diverged":
                tx, ty = _finite(*run.series("train/loss"))
                if ty.size:
                    x = run.diverged_at if run.diverged_at is not None else tx[-1]
                    ax.plot([x], [min(ty[-1], top)], marker="X", ms=11, color=c, mec="black", mew=0.8,
                            clip_on=False, zorder=5)
    log_axis(ax, values)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per byte, log scale)")
    ax.set_title("Loss: train (solid) and validation (dashed)")
    ax.grid(True, which="both", alpha=0.25)
    diverged = (Line2D([], [], ls="none", marker="X", ms=9, color="0.5", mec="black"), "diverged here")
    marks = [_style("-", None, "train"), _style("--", "o", "validation"), diverged]
    if any(run.rollbacks for run in runs):
        marks.append((Line2D([], [], ls=(0, (4, 3)), color="0.5"), "rolled back here"))
    _legend(fig, runs, cols, marks)
    save_png(fig, path)
    return [] if values.size else ["loss.png: no finite train or validation loss logged by any run"]


def _first_last_rows(steps: np.ndarray, values: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """The first, middle and last rows whose values are all finite (fewer when there are fewer rows)."""
    good = [i for i in range(len(steps)) if values[i].size and np.all(np.isfinite(values[i]))]
    if not good:
        return []
    picks = list(dict.fromkeys([good[0], good[len(good) // 2], good[-1]]))
    return [(steps[i], values[i]) for i in picks]


def grad_norm_by_layer(runs: Sequence[Run], cols: Sequence, path: Path) -> list[str]:
    """Per-layer gradient norm at the first logged step (Xiong et al. 2020, Fig. 3) and at the last finite one."""
    fig, axes = _figure(11, 4.5, _legend_labels(runs), ncols=2)
    notes, allv, steps_at = [], [], ([], [])
    for run, c in zip(runs, cols, strict=True):
        rows = _first_last_rows(*run.layer_matrix("grad_norm"))
        if not rows:
            notes.append(f"grad_norm_by_layer.png: {run.label}: no finite grad_norm/layer_i recorded")
            continue
        for ax, (step, v), at in zip(axes, (rows[0], rows[-1]), steps_at, strict=True):
            ax.plot(np.arange(v.size), v, color=c, marker="o", ms=4, lw=1.3)
            allv.append(v)
            at.append(int(step))
    for ax, at, when in zip(axes, steps_at, ("first logged step", "last finite logged step"), strict=True):
        if not at:
            _not_recorded(ax, "grad_norm/layer_i")
            continue
        which = f" (step {at[0]})" if len(set(at)) == 1 else " of each run"
        ax.set_title(f"Gradient norm per block at the {when}{which}", fontsize="medium")
        ax.set_xlabel("layer (block index, 0 = next to the embedding)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        log_axis(ax, np.concatenate(allv))
        ax.grid(True, which="both", alpha=0.25)
    axes[0].set_ylabel("‖∇ block‖ (log scale)")
    _legend(fig, runs, cols)
    save_png(fig, path)
    return notes


def grad_norm_heatmaps(runs: Sequence[Run], slugs: Sequence[str], out: Path) -> tuple[list[Path], list[str]]:
    """``grad_norm_heatmap_<slug>.png`` per run: layer × step, log colour on one scale shared by all runs."""
    from matplotlib import colormaps
    from matplotlib.colors import LogNorm

    data = {id(r): r.layer_matrix("grad_norm") for r in runs}
    pooled = [v[np.isfinite(v) & (v > 0)] for _, v in data.values()]
    pooled = np.concatenate(pooled) if pooled else np.empty(0)
    if pooled.size == 0:
        return [], ["grad_norm_heatmap_*.png: no run recorded grad_norm/layer_i"]
    lo, hi = np.percentile(pooled, [1, 99])
    norm = LogNorm(vmin=lo, vmax=max(hi, lo * 1.0001))
    ticks = _log_ticks(np.array([norm.vmin, norm.vmax]))
    cmap = colormaps["viridis"].with_extremes(bad="0.85")
    paths, notes = [], []
    for run, name in zip(runs, slugs, strict=True):
        steps, v = data[id(run)]
        if v.size == 0:
            notes.append(f"grad_norm_heatmap: {run.label}: no grad_norm/layer_i recorded")
            continue
        path = out / f"grad_norm_heatmap_{name}.png"
        try:
            paths.append(save_png(_heatmap(run, steps, v, norm, ticks, cmap), path))
        except Exception as err:  # one run's odd data (or file) costs its own map, never the others'
            notes.append(f"{path.name} ({run.label}) could not be drawn ({type(err).__name__}: {err})")
    return paths, notes


def _heatmap(run: Run, steps: np.ndarray, v: np.ndarray, norm, ticks, cmap):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 1.6 + 0.25 * min(v.shape[1], 24)), layout="constrained", dpi=DPI)
    ax = fig.subplots()
    v = np.where(np.isfinite(v) & (v > 0), v, np.nan)
    mesh = ax.pcolormesh(_edges(steps), np.arange(v.shape[1] + 1) - 0.5, np.ma.masked_invalid(v.T), norm=norm,
                         cmap=cmap, shading="flat")
    bar = fig.colorbar(mesh, ax=ax, label="‖∇ block‖ (log colour)", extend="both")
    if ticks:
        bar.locator, bar.formatter, bar.minorformatter = ticks[:3]
    if run.status == "diverged" and run.diverged_at is not None:
        ax.axvline(run.diverged_at, color="red", ls="--", lw=1.2)
        ax.text(run.diverged_at, v.shape[1] - 0.5, " diverged", color="red", va="top", fontsize="small")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("step")
    ax.set_ylabel("layer")
    ax.set_title(f"Gradient norm per block: {_shortened(run.label, TITLE_CHARS)}", fontsize="medium")
    return fig


def _shortened(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, its middle left out: a title or legend wider than its figure
    is cut off or squeezes the plot. Labels differ at their start (the leading keys) and end (the values that
    tell twins apart), so both stay; the table has every label in full."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head):]}"


def _edges(steps: np.ndarray) -> np.ndarray:
    """Cell edges: each logged step's cell runs from it to the next logged step (steps need not be even)."""
    last = steps[-1] + (steps[-1] - steps[-2] if steps.size > 1 else 1)
    return np.append(steps, last)


def activations(runs: Sequence[Run], cols: Sequence, path: Path, stats: Sequence = LAYER_STATS,
                switch: str = "monitor.activations") -> list[str]:
    """Per-layer statistics (by default what was recorded of output std and mean, residual-stream norm,
    attention entropy and max attention logit; ``RESIDUAL_STATS`` for residual_stream.png) against layer: one
    row of panels per statistic, one column per chosen step (each run's first, middle and last logged step with
    finite values), one line per run."""
    recorded = [s for s in stats if any(r.layer_keys(s[0]) for r in runs)]
    missing = [f"{stat[0]}/layer_i" for stat in stats if stat not in recorded]
    if not recorded:
        fig, (ax,) = _figure(6, 3, [])
        _not_recorded(ax, f"these per-layer statistics ({switch})")
        save_png(fig, path)
        return [f"{path.name}: none of {', '.join(s[0] + '/layer_i' for s in stats)} recorded by any run"]
    fig, axes = _figure(12, 2.9 * len(recorded), _legend_labels(runs), ncols=3, nrows=len(recorded),
                        sharey="row", sharex=True)
    grid = axes.reshape(len(recorded), 3)
    for row, (prefix, title, log) in zip(grid, recorded, strict=True):
        steps_at: list[set[int]] = [set(), set(), set()]
        values = []
        for run, c in zip(runs, cols, strict=True):
            picks = _first_last_rows(*run.layer_matrix(prefix))
            where = ((2,), (0, 2), (0, 1, 2))[len(picks) - 1] if picks else ()
            for (step, v), j in zip(picks, where, strict=True):
                row[j].plot(np.arange(v.size), v, color=c, marker="o", ms=3, lw=1.2)
                steps_at[j].add(int(step))
                values.append(v)
        for ax, at, when in zip(row, steps_at, CHOSEN_STEPS, strict=True):
            which = f"step {min(at)}" if len(at) == 1 else "steps differ per run" if at else "no data"
            ax.set_title(f"{title}\n{when} ({which})", fontsize="small")
            ax.grid(True, which="both", alpha=0.25)
        if log and values:
            log_axis(row[0], np.concatenate(values))
    for ax in grid[-1]:
        ax.set_xlabel("layer")
        ax.xaxis.get_major_locator().set_params(integer=True)
    _legend(fig, runs, cols)
    save_png(fig, path)
    return [f"{path.name}: {k} not recorded by any run" for k in missing]


def residual_stream(runs: Sequence[Run], cols: Sequence, path: Path) -> list[str]:
    """The residual stream's rms and max |x| after each block and each block's input/output cosine against
    layer, at three steps (Peri-LN's variance growth, the curse of depth's near-identity deep blocks)."""
    return activations(runs, cols, path, RESIDUAL_STATS, "monitor.residual_stats, monitor.block_cos")


def update(runs: Sequence[Run], cols: Sequence, path: Path) -> list[str]:
    """The model update ‖F(x,θt) − F(x,θ0)‖ on a probe batch (DeepNet) and the per-step relative parameter
    update ‖Δθ‖/‖θ‖ averaged over blocks, against step. A panel with no data says "not recorded"."""
    fig, axes = _figure(11, 4.5, _legend_labels(runs), ncols=2)
    notes = []
    out_ax, rel_ax = axes
    plotted = [], []
    for run, c in zip(runs, cols, strict=True):
        x, y = run.series("update/output_change")
        keep = np.isfinite(y) & (y > 0)  # step 0 is 0 by definition: off a log axis
        if keep.any():
            out_ax.plot(x[keep], y[keep], color=c, lw=1.3, marker="o", ms=2.5)
            plotted[0].append(y[keep])
        steps, v = run.layer_matrix("update")
        if v.size:
            good = np.isfinite(v) & (v > 0)
            count = good.sum(axis=1)
            mean = np.where(good, v, 0.0).sum(axis=1) / np.maximum(count, 1)
            keep = count > 0
            if keep.any():
                rel_ax.plot(steps[keep], mean[keep], color=c, lw=1.3, marker="o", ms=2.5)
                plotted[1].append(mean[keep])
    titles = ("Model update ‖F(x,θt) − F(x,θ0)‖ (probe batch)", "Relative update ‖Δθ‖/‖θ‖, mean over blocks")
    keys = ("update/output_change", "update/layer_i")
    switches = ("monitor.output_change", "monitor.update_ratio")
    for ax, values, title, key, switch in zip(axes, plotted, titles, keys, switches, strict=True):
        if not values:
            _not_recorded(ax, f"{key} (switch: {switch})")
            notes.append(f"update.png: {key} not recorded by any run")
            continue
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("step")
        log_axis(ax, np.concatenate(values))
        ax.grid(True, which="both", alpha=0.25)
    _legend(fig, runs, cols)
    save_png(fig, path)
    return notes
