"""DeepNet / Admin: Post-LN degrades or diverges with depth without warm-up; Pre-LN and DeepNorm train."""

from __future__ import annotations

from typing import Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, Plan, Scale, curve_points, present
from normtrain.reproduce.warmup import difference, final_loss
from normtrain.reproduce.writeup import markdown_table

TRAINS = ("pre", "deepnorm")  # the placements the papers say keep training at depth


class Depth(Experiment):
    name = "deepnet_depth"
    title = "Depth stability of Post-LN, Pre-LN and DeepNorm (Wang et al. 2022; Liu et al. 2020)"
    paper = "Wang et al. 2022 (DeepNet); Liu et al. 2020 (Admin)"
    reference = "**Wang et al. 2022**, *DeepNet*, Fig. 1 and Table 1; **Liu et al. 2020**, *Admin*, Table 1"
    method = ("d 64, 4 heads, GELU FFN 256, learned positions, LayerNorm, Adam lr 1e-3 β = (0.9, 0.98), **no "
              "warm-up**, constant learning rate, no clipping, 200 steps of 8 × 128 bytes, at 6, 24 and 48 layers, "
              "3 seeds.")
    gpu = Scale(overrides=("model.d_model=256", "model.d_ff=1024", "train.max_steps=2000", "train.batch_size=32",
                           "train.eval_every=250"),
                grid={"model.n_layers": "6,24,48,96,192"})

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        shallow, deep = depths[0], depths[-1]
        unigram = next((r["unigram_val_loss"] for r in rows if r.get("unigram_val_loss") is not None), None)

        def losses(p, d):
            return stats.per_seed(rows, final_loss, lambda r: r["placement"] == p and int(r["model.n_layers"]) == d)

        def minus(a: dict, b: dict) -> dict:
            return {s: difference(a[s], b.get(s)) for s in a}

        measured = {
            "post_minus_pre_deepest": {f"L={deep}": minus(losses("post", deep), losses("pre", deep))},
            "post_deep_minus_shallow": {"": minus(losses("post", deep), losses("post", shallow))},
            "margin_below_unigram": {f"{p}, L={d}": {s: (unigram - v if unigram is not None and v is not None
                                                         else None) for s, v in losses(p, d).items()}
                                     for p in TRAINS if p in places for d in depths},
        }

        def cell(p, d):
            mine = [r for r in rows if r["placement"] == p and int(r["model.n_layers"]) == d]
            flags = [f"{n} {what}" for what in ("diverged", "collapsed")
                     if (n := sum(r.get("status") == what or (what == "collapsed" and r.get("collapsed"))
                                  for r in mine))]
            return stats.spread(losses(p, d).values()) + (f" ({', '.join(flags)})" if flags else "")

        table = ("Final validation loss (nats per byte), mean ± std over seeds (n); ∞ = diverged:\n\n"
                 + markdown_table(["placement", *[f"L={d}" for d in depths]],
                                  [[p, *[cell(p, d) for d in depths]] for p in places]))
        gap = measured["post_minus_pre_deepest"][f"L={deep}"]
        ours = f"Post-LN − Pre-LN at L={deep}: {stats.spread(gap.values())} nats"
        key = (f"{ours}; Post-LN L={deep} − L={shallow}: "
               f"{stats.spread(measured['post_deep_minus_shallow'][''].values())} nats.")

        def draw(path):
            fig, axes = plots.figure(ncols=2, width=4.8, height=3.6)
            for p in places:
                per_seed = list(zip(*[[v if v is not None and v != float("inf") else None
                                       for v in losses(p, d).values()] for d in depths], strict=True))
                plots.seeds_and_mean(axes[0], depths, per_seed, plots.PLACEMENT_COLORS[p], p)
                mine = [r for r in rows if r["placement"] == p and int(r["model.n_layers"]) == deep]
                plots.curves(axes[1], [curve_points(r["val_curve"]) for r in mine if r["val_curve"]],
                             plots.PLACEMENT_COLORS[p], p)
            plots.log_axis(axes[0], depths)
            for ax in axes:
                plots.unigram_line(ax, unigram)
            plots.finish(axes[0], "final val loss (thin: seeds; diverged runs left out)", "depth L",
                         "val loss (nats/byte)")
            plots.finish(axes[1], f"L = {deep}, LayerNorm", "step", "val loss (nats/byte)")
            plots.save(fig, path)

        return Findings(table=table, measured=measured, key=key, ours=ours, figures={"depth.png": draw})

