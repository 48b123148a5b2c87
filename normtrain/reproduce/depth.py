"""DeepNet / Admin: Post-LN degrades or fails with depth even with warm-up; Pre-LN and DeepNorm keep training."""

from __future__ import annotations

from typing import Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, curve_points, present
from normtrain.reproduce.writeup import markdown_table

TRAINS = ("pre", "deepnorm")  # the placements the papers say keep training at depth
ARMS = {(1e-3, False): "lr 1e-3, no warm-up", (1e-3, True): "lr 1e-3, warm-up",
        (3e-4, True): "lr 3e-4, warm-up"}  # (optim.lr, warm-up or not) -> name; the paper's claim: with warm-up


def arm_key(values: dict[str, Any]) -> tuple[float, bool]:
    """(lr, whether it warms up): the warm-up's length is a fraction of the run (10%), stretched with it at
    ``--scale gpu``."""
    return float(values["optim.lr"]), int(values["optim.warmup_steps"]) > 0


def arm_of(row: dict[str, Any]) -> str:
    return ARMS.get(arm_key(row), f"lr {row['optim.lr']}, warm-up {row['optim.warmup_steps']}")


class Depth(Experiment):
    name = "deepnet_depth"
    title = ("Depth stability of Post-LN, Pre-LN and DeepNorm, with and without warm-up (Wang et al. 2022; "
             "Liu et al. 2020)")
    paper = "Wang et al. 2022 (DeepNet); Liu et al. 2020 (Admin)"
    reference = "**Wang et al. 2022**, *DeepNet*, Fig. 1 and Table 1; **Liu et al. 2020**, *Admin*, Table 1"
    method = ("The 64-128-2 model (d 64, GELU FFN 128, 2 heads; DeepNet Fig. 5), learned positions, LayerNorm, Adam "
              "β = (0.9, 0.98), no clipping, 1000 "
              "steps of 8 × 128 bytes, a cosine to 10% counted from step 0, at 6 and 24 layers, 3 seeds, in three "
              "arms: lr 1e-3 without warm-up, lr 1e-3 with a 100-step warm-up (multiplying the schedule), and the "
              "lower lr 3e-4 with that warm-up.")
    gpu_recipe = Recipe()

    def keeps(self, combo: dict[str, str]) -> bool:
        return "optim.lr" not in combo or "optim.warmup_steps" not in combo or arm_key(combo) in ARMS

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["arm"] = arm_of(r)
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        arms = present(rows, "arm", tuple(ARMS.values()))
        shallow, deep = depths[0], depths[-1]
        unigram = stats.unigram_of(rows)

        def losses(p, d, arm):
            return stats.seeds(rows, stats.final_or_inf, placement=p, model__n_layers=d, arm=arm)

        def gap(a, b):
            return stats.paired(a, b, stats.difference)

        warmed = [a for a in arms if "no warm-up" not in a]
        behind = {a: gap(losses("post", deep, a), losses("deepnorm", deep, a)) for a in arms}
        measured = {
            "post_minus_deepnorm_deep_warmup": {a: behind[a] for a in warmed},
            "post_minus_deepnorm_deep_no_warmup": {a: behind[a] for a in arms if a not in warmed},
            "post_deep_minus_shallow_warmup": {a: gap(losses("post", deep, a), losses("post", shallow, a))
                                               for a in warmed},
            "deepnorm_deep_minus_shallow": {a: gap(losses("deepnorm", deep, a), losses("deepnorm", shallow, a))
                                            for a in arms},
            "reference_margin": {f"{p}, L={d}, {a}": stats.margin_below(unigram, losses(p, d, a))
                                 for p in TRAINS if p in places for d in depths for a in arms},
        }
        table = self.table(rows, places, depths, arms, losses)
        ours = (f"Post-LN − DeepNorm at L={deep} with warm-up (lr 1e-3): "
                f"{stats.spread(behind.get(ARMS[(1e-3, True)], {}).values())} nats")
        key = (f"{ours}; without warm-up: {stats.spread(behind.get(ARMS[(1e-3, 0)], {}).values())}; at lr 3e-4 with "
               f"warm-up: {stats.spread(behind.get(ARMS[(3e-4, True)], {}).values())}.")
        return Findings(table=table, measured=measured, key=key, ours=ours, figures={
            "depth.png": lambda path: self.draw(rows, places, depths, arms, losses, unigram, path)})

    @staticmethod
    def table(rows, places, depths, arms, losses) -> str:
        body = [[a, p, *[stats.cell(losses(p, d, a).values(), stats.select(rows, placement=p, model__n_layers=d,
                                                                             arm=a)) for d in depths]]
                for a in arms for p in places]
        return (f"Final validation loss (nats per byte; ∞ = diverged); {stats.CELL_NOTE}:\n\n"
                + markdown_table(["arm", "placement", *[f"L={d}" for d in depths]], body))

    @staticmethod
    def draw(rows, places, depths, arms, losses, unigram, path) -> None:
        deep = depths[-1]
        fig, axes = plots.figure(ncols=len(arms), nrows=2, width=4.4, height=3.4)
        for col, a in enumerate(arms):
            for p in places:
                per_seed = list(zip(*[[v if v is not None and v != float("inf") else None
                                       for v in losses(p, d, a).values()] for d in depths], strict=True))
                plots.seeds_and_mean(axes[col], depths, per_seed, plots.PLACEMENT_COLORS[p], p)
                mine = stats.select(rows, placement=p, model__n_layers=deep, arm=a)
                plots.curves(axes[len(arms) + col], [curve_points(r["val_curve"]) for r in mine if r["val_curve"]],
                             plots.PLACEMENT_COLORS[p], p)
            plots.log_axis(axes[col], depths)
            for ax in (axes[col], axes[len(arms) + col]):
                plots.unigram_line(ax, unigram)
            plots.finish(axes[col], f"{a}: final val loss (thin: seeds)", "depth L", "val loss (nats/byte)")
            plots.finish(axes[len(arms) + col], f"{a}, L = {deep}, LayerNorm", "step", "val loss (nats/byte)")
        plots.save(fig, path)
