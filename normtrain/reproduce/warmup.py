"""Xiong et al. 2020, §3.2: Post-LN needs learning-rate warm-up; Pre-LN trains without it."""

from __future__ import annotations

import math
from typing import Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, curve_points, present
from normtrain.reproduce.writeup import markdown_table

WARMUP_AXIS = "optim.warmup_steps"


class Warmup(Experiment):
    name = "xiong_warmup"
    title = "Warm-up sensitivity of Post-LN and Pre-LN (Xiong et al. 2020, §3.2)"
    paper = "Xiong et al. 2020, §3.2"
    reference = "**Xiong et al. 2020**, *On Layer Normalization in the Transformer Architecture*, §3.2 and Fig. 2"
    method = ("Scaled down: 12 layers of the 64-128-2 model (d 64, FFN 128 GELU, 2 heads, learned positions), "
              "LayerNorm, Adam β = (0.9, 0.98), no weight decay, no gradient clipping, 1500 steps of 8 × 128 bytes, "
              "at the paper's two learning rates (5e-4 and 1e-3), 5 seeds. The learning rate follows a cosine from "
              "the peak to 10% of it over the whole run (so the with-warm-up runs flatten by the end); the warm-up, "
              "none or linear over the first 150 steps (10%), *multiplies* that schedule (`optim.warmup_overlaps`), "
              "so the two runs of a pair differ in the ramp alone.")
    gpu_recipe = Recipe()

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        lrs = sorted({r["optim.lr"] for r in rows}, key=float)
        warmups = sorted({r[WARMUP_AXIS] for r in rows}, key=int)
        places = present(rows, "placement", PLACEMENT_ORDER)
        lo, hi, cold, warm = lrs[0], lrs[-1], warmups[0], warmups[-1]
        unigram = stats.unigram_of(rows)

        def losses(p, lr, w):
            return stats.seeds(rows, stats.final_or_inf, placement=p, optim__lr=lr, optim__warmup_steps=w)

        def penalty(p, lr):
            return stats.paired(losses(p, lr, cold), losses(p, lr, warm), stats.difference)

        minus = lambda a, b: a - b  # noqa: E731
        measured = {
            "post_penalty": {f"lr {lr}": penalty("post", lr) for lr in lrs},
            "post_minus_pre_penalty": {f"lr {lr}": stats.paired(penalty("post", lr), penalty("pre", lr), minus)
                                       for lr in lrs},
            "post_penalty_growth": {"": stats.paired(penalty("post", hi), penalty("post", lo), minus)
                                    if lo != hi else {}},
            "pre_penalty": {f"lr {lr}": penalty("pre", lr) for lr in lrs},
            "reference_margin": {f"{p}, lr {lr}, warm-up {warm}": stats.margin_below(unigram, losses(p, lr, warm))
                                 for p in places for lr in lrs},
        }
        table = self.table(rows, places, lrs, warmups, losses, penalty)
        gap = measured["post_minus_pre_penalty"]
        ours = (f"Post-LN − Pre-LN warm-up penalty {stats.spread(gap[f'lr {hi}'].values())} nats at lr {hi}, "
                f"{stats.spread(gap[f'lr {lo}'].values())} at lr {lo}")
        key = (f"No warm-up costs Post-LN {stats.spread(penalty('post', hi).values())} nats at lr {hi} and Pre-LN "
               f"{stats.spread(penalty('pre', hi).values())}; {ours}.")
        return Findings(table=table, measured=measured, key=key, ours=ours, figures={
            "val_loss.png": lambda path: self.draw_curves(rows, lrs, places, unigram, path),
            "penalty.png": lambda path: self.draw_penalty(places, lrs, penalty, path)})

    @staticmethod
    def table(rows, places, lrs, warmups, losses, penalty) -> str:
        def cell(p, lr, w):
            return stats.cell(losses(p, lr, w).values(), stats.select(rows, placement=p, optim__lr=lr,
                                                                       optim__warmup_steps=w))

        def tail(p, lr, w):  # the fitted fall of the training loss over the last 20% of the run
            return stats.spread(r.get("tail_drop") for r in stats.select(rows, placement=p, optim__lr=lr,
                                                                          optim__warmup_steps=w))

        body = [[p, lr, *[cell(p, lr, w) for w in warmups], stats.spread(penalty(p, lr).values()),
                 *[tail(p, lr, w) for w in warmups]] for p in places for lr in lrs]
        return (f"Final validation loss (nats per byte; ∞ = diverged) with and without warm-up, and the no-warm-up "
                f"penalty per seed; {stats.CELL_NOTE}. 'Fall over the last 20%' is the fitted fall of the training "
                "loss over the run's last 300 steps (≈ 0: it has stopped falling):\n\n"
                + markdown_table(["placement", "lr", *[f"warm-up {w}" for w in warmups],
                                  "penalty (no warm-up − warm-up)", *[f"fall over the last 20%, warm-up {w}"
                                                                      for w in warmups]], body))

    @staticmethod
    def draw_curves(rows, lrs, places, unigram, path) -> None:
        fig, axes = plots.figure(ncols=len(lrs), width=4.8, height=3.6)
        for ax, lr in zip(axes, lrs, strict=True):
            for p in places:
                for w in sorted({r[WARMUP_AXIS] for r in rows}, key=int):
                    mine = stats.select(rows, placement=p, optim__lr=lr, optim__warmup_steps=w)
                    plots.curves(ax, [curve_points(r["val_curve"]) for r in mine if r["val_curve"]],
                                 plots.PLACEMENT_COLORS[p], f"{p}, warm-up {w}", style="-" if w == "0" else "--")
            plots.unigram_line(ax, unigram)
            plots.finish(ax, f"LayerNorm, lr {lr}", "step", "val loss (nats/byte)")
        plots.save(fig, path)

    @staticmethod
    def draw_penalty(places, lrs, penalty, path) -> None:
        fig, (ax,) = plots.figure(width=5.2, height=3.4)
        for i, p in enumerate(places):
            for j, lr in enumerate(lrs):
                x = i * (len(lrs) + 1) + j
                vals = [v for v in penalty(p, lr).values() if v is not None]
                shown = [min(v, 3.0) for v in vals]  # a diverged run (∞) is drawn at the top, as a triangle
                ax.scatter([x] * len(shown), shown, color=plots.PLACEMENT_COLORS[p], s=14, alpha=0.6,
                           marker="o" if all(math.isfinite(v) for v in vals) else "^")
                med = stats.median(vals) if all(math.isfinite(v) for v in vals) else None
                if med is not None:
                    ax.hlines(med, x - 0.3, x + 0.3, color=plots.PLACEMENT_COLORS[p], lw=2.5)
        ax.set_xticks([i * (len(lrs) + 1) + j for i in range(len(places)) for j in range(len(lrs))],
                      [f"{p}\nlr {lr}" for p in places for lr in lrs], fontsize=7)
        ax.axhline(0, color="k", lw=0.8)
        plots.finish(ax, "no-warm-up penalty per seed (bar: median), LayerNorm", "", "final loss difference (nats)",
                     legend=False)
        plots.save(fig, path)
