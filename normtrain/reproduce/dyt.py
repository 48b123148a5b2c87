"""Zhu et al. 2025 (Transformers without Normalization): DyT = γ·tanh(α·x) + β against LayerNorm and RMSNorm across
an α-init grid at two widths; does the best α shrink with width, and do trained LayerNorms follow a tanh?

LayerNorm and RMSNorm run once per width and seed; DyT at every α of the grid. The best α of a width is the grid
point with the lowest median final loss over seeds (a diverged run counts +∞); DyT there is compared with each norm
seed by seed. After training, ``normtrain-probe`` fits γ·tanh(α·x) to every norm's input → output curve
(normtrain/probe/norm_curves.py) of the LayerNorm runs (how S-shaped a trained LayerNorm is) and of the DyT runs at
the best α (the α DyT learned).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.grid import train_grid
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.probing import probe_runs
from normtrain.reproduce.runner import Experiment, Findings, present, read_rows
from normtrain.reproduce.writeup import markdown_table

NORMS = ("layernorm", "rmsnorm", "dyt")
REFERENCES = ("layernorm", "rmsnorm")
DEFAULT_ALPHA = 0.5  # DyT's default α init; the reference norms run with it (they do not use it)
ALPHA = "norm.alpha_init"
WIDTH = "model.d_model"
TRAINS_MARGIN = 0.3  # an α "trains" when every seed ends this far below the unigram line (the guard's margin)


def alpha_of(row: dict[str, Any]) -> float:
    return float(row.get(ALPHA, DEFAULT_ALPHA))


def block_fits(probe: dict[str, Any] | None) -> list[dict[str, float]]:
    """The tanh fits of the norms inside the blocks (not the final norm)."""
    return [n["fit"] for n in (probe or {}).get("norms", []) if n.get("layer") is not None]


def spread_of(rows: list[dict[str, Any]], key: str) -> str:
    return stats.spread(r.get(key) for r in rows)


def probe_row(probe: dict[str, Any] | None) -> dict[str, Any]:
    """Per probed run: the median over its block norms of the tanh fit's R², of its gain over a straight line, and
    of the fitted α (for DyT: the α it learned)."""
    fits = block_fits(probe)
    if not fits:
        return {}
    return {"tanh_r2": statistics.median(f["r2"] for f in fits),
            "tanh_gain": statistics.median(f["r2"] - f["r2_line"] for f in fits),
            "fitted_alpha": statistics.median(f["alpha"] for f in fits)}


class Grid:
    """Final losses by (norm, width, α, seed), and the best α of each width."""

    def __init__(self, rows: list[dict[str, Any]]):
        self.rows = rows
        self.widths = sorted({int(r[WIDTH]) for r in rows})
        self.alphas = sorted({alpha_of(r) for r in rows if r["norm"] == "dyt"})

    def loss(self, norm: str, width: int, alpha: float | None = None) -> dict[str, float | None]:
        chosen = [r for r in stats.select(self.rows, norm=norm, model__d_model=width)
                  if alpha is None or alpha_of(r) == alpha]
        return stats.per_seed(chosen, stats.final_or_inf)

    def best_alpha(self, width: int) -> float | None:
        """The α with the lowest median final DyT loss over seeds."""
        medians = {a: statistics.median(v) for a in self.alphas
                   if (v := [x for x in self.loss("dyt", width, a).values() if x is not None])}
        return min(medians, key=medians.get) if medians else None

    def best_alpha_per_seed(self, width: int) -> dict[str, float]:
        by_seed: dict[str, dict[float, float]] = {}
        for a in self.alphas:
            for s, v in self.loss("dyt", width, a).items():
                if v is not None:
                    by_seed.setdefault(s, {})[a] = v
        return {s: min(c, key=c.get) for s, c in by_seed.items()}

    def alpha_range(self, width: int) -> dict[str, float]:
        """Per seed, the worst DyT final loss over the α grid minus the best (+∞ when a run diverged)."""
        by_seed: dict[str, list[float]] = {}
        for a in self.alphas:
            for s, v in self.loss("dyt", width, a).items():
                if v is not None:
                    by_seed.setdefault(s, []).append(v)
        return {s: max(v) - min(v) for s, v in by_seed.items() if len(v) > 1}

    def trains(self, width: int, unigram: float | None) -> list[float]:
        """The α whose DyT runs all ended at least ``TRAINS_MARGIN`` below the unigram line."""
        if unigram is None:
            return []
        return [a for a in self.alphas if (v := list(self.loss("dyt", width, a).values()))
                and all(x is not None and x <= unigram - TRAINS_MARGIN for x in v)]


class DyT(Experiment):
    name = "dyt"
    title = "DyT against LayerNorm and RMSNorm across α-init and width (Zhu et al. 2025)"
    paper = "Zhu et al. 2025 (DyT)"
    reference = ("**Zhu et al. 2025**, *Transformers without Normalization* (CVPR 2025): Fig. 2 (trained LayerNorms' "
                 "S-shaped input → output), the LLaMA results, and the α₀ ablations (α₀ by width)")
    method = ("Pre-LN, the default model's shape (6 layers, 4 heads, SwiGLU, RoPE) at widths d 64 and 128; AdamW (0.9, "
              "0.95), lr 1e-3 with a 50-step warm-up then cosine to 10%, weight decay 0.1, clipping 1; 800 steps of "
              "8 × 128 bytes; LayerNorm and RMSNorm once per width and seed, DyT (one scalar α per norm, γ = 1, "
              "β = 0 at init) at α₀ ∈ {0.1, 0.2, 0.5, 1, 2}; 5 seeds. After training, `normtrain-probe` fits "
              "γ·tanh(α·x) to each block norm's input → output curve of the LayerNorm runs and of DyT at the best α₀.")
    keep_checkpoints = True  # the probe reads the trained LayerNorm and DyT models
    gpu_recipe = Recipe(extra_steps=50)  # widths × 2 (the width is an axis); the probe of some runs

    def keeps(self, combo: dict[str, str]) -> bool:
        return combo.get("norm", "dyt") == "dyt" or alpha_of(combo) == DEFAULT_ALPHA

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        """Train the grid, then probe the LayerNorm runs and DyT at each width's best α."""
        done = train_grid(plan, keep_checkpoints=True)
        rows = read_rows(plan, done, self.row)
        grid = Grid(rows)
        best = {w: grid.best_alpha(w) for w in grid.widths}
        probed = [i for i, r in enumerate(rows) if r["norm"] == "layernorm"
                  or (r["norm"] == "dyt" and alpha_of(r) == best[int(r[WIDTH])])]
        for i, probe in zip(probed, probe_runs(plan, [done[i][0] for i in probed]), strict=True):
            rows[i].update(probe_row(probe))
        return rows

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        g, unigram = Grid(rows), stats.unigram_of(rows)
        refs = [n for n in REFERENCES if any(r["norm"] == n for r in rows)]
        best = {w: g.best_alpha(w) for w in g.widths}
        narrow, wide = g.widths[0], g.widths[-1]
        per_seed = {w: g.best_alpha_per_seed(w) for w in g.widths}
        shift = {s: math.log2(per_seed[wide][s] / a) for s, a in per_seed[narrow].items()
                 if s in per_seed[wide]} if wide != narrow else {}
        measured = {
            "dyt_minus_reference": {f"d={w}, vs {n}": stats.paired(g.loss("dyt", w, best[w]), g.loss(n, w), stats.minus)
                                    for w in g.widths for n in refs if best[w] is not None},
            "best_alpha_shift": {f"d={narrow} → d={wide}": shift},
            "dyt_alpha_range": {f"d={w}": g.alpha_range(w) for w in g.widths},
            "reference_margin": {f"{n}, d={w}": stats.margin_below(unigram, g.loss(n, w)) for n in refs
                                 for w in g.widths},
        }
        gaps = "; ".join(f"{c} {stats.spread(v.values())}" for c, v in measured["dyt_minus_reference"].items())
        ours = ("best α₀: " + ", ".join(f"d={w} {best[w]:g}" for w in g.widths if best[w] is not None)
                + f"; DyT at it − norm: {gaps} nats")
        key = (f"{ours}. α₀ that train (every seed ≥ {TRAINS_MARGIN} below the unigram line): "
               + "; ".join(f"d={w}: {', '.join(f'{a:g}' for a in g.trains(w, unigram)) or 'none'}" for w in g.widths)
               + ".")
        return Findings(table=self.table(rows, g, unigram, best), measured=measured, key=key, ours=ours,
                        notes=self.curve_notes(rows, g, best),
                        figures={"dyt_alpha.png": lambda path: self.draw(g, refs, unigram, best, path)})

    @staticmethod
    def table(rows, g: Grid, unigram, best) -> str:
        norms = present(rows, "norm", NORMS)
        body = []
        for w in g.widths:
            for n in norms:
                alphas = g.alphas if n == "dyt" else [None]
                for a in alphas:
                    chosen = [r for r in stats.select(rows, norm=n, model__d_model=w) if a is None or alpha_of(r) == a]
                    mark = " (best)" if a is not None and a == best[w] else ""
                    body.append([f"d={w}", n, "–" if a is None else f"{a:g}{mark}",
                                 stats.cell(g.loss(n, w, a).values(), chosen)])
        return (f"Final validation loss per width, norm and α₀ (DyT only); {stats.CELL_NOTE}. Unigram line: "
                f"{unigram if unigram is None else round(unigram, 3)} nats.\n\n"
                + markdown_table(["width", "norm", "α₀", "final val loss"], body))

    @staticmethod
    def curve_notes(rows, g: Grid, best) -> list[str]:
        notes = []
        for w in g.widths:
            ln = stats.select(rows, norm="layernorm", model__d_model=w)
            dyt = [r for r in stats.select(rows, norm="dyt", model__d_model=w) if alpha_of(r) == best[w]]
            if best[w] is not None and any(r.get("tanh_gain") is not None for r in ln):
                notes.append(
                    f"d={w}: trained LayerNorms' input → output curves (median over block norms, per seed): tanh fit "
                    f"R² {spread_of(ln, 'tanh_r2')}, its gain over a straight line {spread_of(ln, 'tanh_gain')}, "
                    f"fitted α {spread_of(ln, 'fitted_alpha')}; DyT at α₀ = {best[w]:g} learned α "
                    f"{spread_of(dyt, 'fitted_alpha')}.")
        return notes

    @staticmethod
    def draw(g: Grid, refs, unigram, best, path) -> None:
        fig, axes = plots.figure(ncols=len(g.widths), width=4.6, height=3.6)
        for ax, w in zip(axes, g.widths, strict=True):
            per_seed = {}
            for a in g.alphas:
                for s, v in g.loss("dyt", w, a).items():
                    per_seed.setdefault(s, []).append(v if v is not None and math.isfinite(v) else None)
            plots.seeds_and_mean(ax, g.alphas, list(per_seed.values()), plots.NORM_COLORS["dyt"], "DyT")
            for n in refs:
                vals = stats.finite(g.loss(n, w).values())
                if vals:
                    ax.axhline(statistics.mean(vals), color=plots.NORM_COLORS[n], ls="--", lw=1.5,
                               label=f"{n} (mean of {len(vals)})")
            if best[w] is not None:
                ax.axvline(best[w], color="k", lw=0.6, alpha=0.5)
            plots.unigram_line(ax, unigram)
            plots.log_axis(ax, g.alphas)
            plots.finish(ax, f"d={w}: final val loss vs DyT's α₀ (thin: seeds)", "α₀", "val loss (nats/byte)")
        plots.save(fig, path)
