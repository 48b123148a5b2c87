"""Xiong et al. 2020, §3.2: Post-LN needs learning-rate warm-up; Pre-LN trains without it."""

from __future__ import annotations

import math
from typing import Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.runner import (
    PLACEMENT_ORDER,
    Experiment,
    Findings,
    Plan,
    Scale,
    curve_points,
    present,
)
from normtrain.reproduce.writeup import markdown_table


def final_loss(row: dict[str, Any]) -> float | None:
    """The final val loss, +∞ for a diverged run (a penalty or a gap then reads as infinite)."""
    return math.inf if row.get("status") == "diverged" else row.get("final_val_loss")


def difference(a: float | None, b: float | None) -> float | None:
    """a − b of two final losses, where both infinite (both diverged) is no difference."""
    if a is None or b is None:
        return None
    return 0.0 if math.isinf(a) and math.isinf(b) and a == b else a - b


class Warmup(Experiment):
    name = "xiong_warmup"
    title = "Warm-up sensitivity of Post-LN and Pre-LN (Xiong et al. 2020, §3.2)"
    paper = "Xiong et al. 2020, §3.2"
    reference = "**Xiong et al. 2020**, *On Layer Normalization in the Transformer Architecture*, §3.2 and Fig. 2"
    method = ("Scaled down: 12 layers of the 64-128-2 model (d 64, FFN 128 GELU, 2 heads, learned positions), "
              "LayerNorm, Adam β = (0.9, 0.98), no weight decay, no gradient clipping, 600 steps of 8 × 128 bytes, at "
              "the paper's two learning rates (5e-4 and 1e-3). Warm-up: none, or linear over the first 150 steps "
              "(25% of the run); after it the learning rate is constant in both, so the two runs of a pair differ "
              "only in the ramp (the paper's inverse-square-root decay would also change the rest of the schedule "
              "with the warm-up length).")
    gpu = Scale(overrides=("model.d_model=256", "model.n_heads=4", "model.d_ff=1024", "train.max_steps=8000",
                           "train.batch_size=32", "train.eval_every=500"),
                grid={"optim.warmup_steps": "0,800"})  # warm-up a tenth of a long run

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        lrs = sorted({r["optim.lr"] for r in rows}, key=float)
        warmups = sorted({r["optim.warmup_steps"] for r in rows}, key=int)
        places = present(rows, "placement", PLACEMENT_ORDER)
        lo, hi, cold, warm = lrs[0], lrs[-1], warmups[0], warmups[-1]

        def losses(p, lr, w):
            return stats.per_seed(rows, final_loss, lambda r: (r["placement"], r["optim.lr"],
                                                               r["optim.warmup_steps"]) == (p, lr, w))

        def penalty(p, lr):
            a, b = losses(p, lr, cold), losses(p, lr, warm)
            return {s: difference(a[s], b.get(s)) for s in a}

        unigram = next((r["unigram_val_loss"] for r in rows if r.get("unigram_val_loss") is not None), None)
        growth = {s: difference(penalty("post", hi).get(s), penalty("post", lo).get(s)) for s in penalty("post", hi)}
        margin = {f"lr {lr}": {s: (unigram - v if unigram is not None and v is not None else None)
                               for s, v in losses("pre", lr, cold).items()} for lr in lrs}
        measured = {
            "post_penalty": {f"lr {lr}": penalty("post", lr) for lr in lrs},
            "post_penalty_growth": {"": growth if lo != hi else {}},
            "pre_abs_penalty": {f"lr {lr}": {s: abs(v) if v is not None else None
                                             for s, v in penalty("pre", lr).items()} for lr in lrs},
            "pre_no_warmup_margin": margin,
        }
        table = markdown_table(
            ["placement", "lr", *[f"warm-up {w}" for w in warmups], "penalty (no warm-up − warm-up)", "collapsed"],
            [[p, lr, *[stats.spread(losses(p, lr, w).values()) for w in warmups],
              stats.spread(penalty(p, lr).values()), self.collapsed(rows, p, lr)] for p in places for lr in lrs])
        table = ("Final validation loss (nats per byte) and the no-warm-up penalty, mean ± std over seeds (n); "
                 "∞ = diverged:\n\n" + table)
        ours = (f"Post-LN penalty {stats.spread(penalty('post', hi).values())} nats at lr {hi}, "
                f"{stats.spread(penalty('post', lo).values())} at lr {lo}; Pre-LN "
                f"{stats.spread(penalty('pre', hi).values())} at lr {hi}")
        key = f"No warm-up costs {ours}."
        return Findings(table=table, measured=measured, key=key, ours=ours,
                        figures={"val_loss.png": lambda path: self.draw_curves(rows, lrs, places, unigram, path),
                                 "penalty.png": lambda path: self.draw_penalty(places, lrs, penalty, path)})

    @staticmethod
    def collapsed(rows, p, lr) -> str:
        mine = [r for r in rows if r["placement"] == p and r["optim.lr"] == lr]
        return f"{sum(bool(r.get('collapsed')) for r in mine)}/{len(mine)}"

    @staticmethod
    def draw_curves(rows, lrs, places, unigram, path) -> None:
        fig, axes = plots.figure(ncols=len(lrs), width=4.8, height=3.6)
        for ax, lr in zip(axes, lrs, strict=True):
            for p in places:
                for w in sorted({r["optim.warmup_steps"] for r in rows}, key=int):
                    mine = [r for r in rows if (r["placement"], r["optim.lr"], r["optim.warmup_steps"]) == (p, lr, w)]
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
