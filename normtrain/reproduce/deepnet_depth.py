"""DeepNet / Admin: Post-LN degrades or fails with depth even with warm-up; DeepNorm keeps training.

Post-LN and DeepNorm, both with warm-up, at several depths, each placement at several learning rates and compared
at its own best lr *at that depth* (normtrain/study/best_lr.py; the arm of the selection rule is a placement at
one depth).
"""

from __future__ import annotations

import math
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, present
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, stats
from normtrain.study.plan import Plan

DEEP_FROM = 18  # the primary check's depths: these and deeper (a narrowed grid without them: its deepest)
LR_RANGE = {"post": (1.25e-4, 1e-3), "deepnorm": (5e-4, 4e-3), "pre": (5e-4, 4e-3)}  # each placement's lr grid
# Added at the grid's top edge during the v4 runs (the registration's EXTENSION): placement -> depths -> lrs
EXTENDED = {"post": {6: (2e-3, 4e-3, 8e-3)}, "deepnorm": {6: (8e-3, 1.6e-2), 18: (8e-3, 1.6e-2), 24: (8e-3, 1.6e-2)}}


def arm_of(row: dict[str, Any]) -> str:
    return f"{row['placement']}, L={int(row['model.n_layers'])}"


def deep_depths(depths: list[int]) -> list[int]:
    return [d for d in depths if d >= DEEP_FROM] or depths[-1:]


def measure_checks(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr], depths: list[int],
                   unigram: float | None) -> dict[str, dict[str, dict[str, float | None]]]:
    """Every quantity the registration's rules name, per condition (a depth) and seed."""
    def gap(a: str, b: str) -> dict[str, float | None]:
        return best_lr.paired_at_best(rows, "arm", best, a, b)

    def loss(a: str) -> dict[str, float | None]:
        return best_lr.at_best(rows, "arm", best[a], stats.final_or_inf) if a in best else {}

    shallow, deep = depths[0], deep_depths(depths)
    return {
        "post_minus_deepnorm_at_best": {f"L={d}": gap(f"post, L={d}", f"deepnorm, L={d}") for d in deep},
        "post_deep_minus_shallow_at_best": {f"L={d}": gap(f"post, L={d}", f"post, L={shallow}") for d in deep},
        "deepnorm_deep_minus_shallow_at_best": {f"L={d}": gap(f"deepnorm, L={d}", f"deepnorm, L={shallow}")
                                                for d in depths[1:]},
        "post_minus_deepnorm_shallow": {f"L={shallow}": gap(f"post, L={shallow}", f"deepnorm, L={shallow}")},
        "reference_margin": {f"deepnorm, L={d}": stats.margin_below(unigram, loss(f"deepnorm, L={d}"))
                             for d in depths},
        "best_lr_inside_grid": best_lr.inside_grid({a: best[a] for d in deep if (a := f"deepnorm, L={d}") in best}),
        "best_lr_not_smallest": {a: {best_lr.ALL_SEEDS: None if best[a].lr is None else
                                     float(best[a].lr != best[a].lrs[0])}
                                 for d in deep if (a := f"post, L={d}") in best},
    }


class Depth(Experiment):
    name = "deepnet_depth"
    title = ("Depth stability of Post-LN and DeepNorm with warm-up, each at its best lr (Wang et al. 2022; "
             "Liu et al. 2020)")
    paper = "Wang et al. 2022 (DeepNet); Liu et al. 2020 (Admin)"
    reference = "**Wang et al. 2022**, *DeepNet*, Fig. 1 and Table 1; **Liu et al. 2020**, *Admin*, Table 1"
    method = ("The 64-128-2 model (d 64, GELU FFN 128, 2 heads; DeepNet Fig. 5), learned positions, LayerNorm, Adam "
              "β = (0.9, 0.98), no clipping, 1000 steps of 8 × 128 bytes, a 100-step linear warm-up (10%) multiplying "
              "a cosine to 10% counted from step 0, evaluated every 5% on 512 fixed windows, at 6, 18 and 24 "
              "layers, seeds 3–7. Post-LN at peak learning rates 1.25e-4, 2.5e-4, 5e-4, 1e-3; DeepNorm at 5e-4, "
              "1e-3, 2e-3, 4e-3; the grids extended at their top edge during the runs: Post-LN at 6 layers by 2e-3, "
              "4e-3 and 8e-3, DeepNorm at every depth by 8e-3 and 1.6e-2. Each placement is judged at its own best "
              "lr at each depth: " + best_lr.RULE + ".")
    gpu_recipe = Recipe()

    def keeps(self, combo: dict[str, str]) -> bool:
        placement = combo.get("placement", "post")
        low, high = LR_RANGE.get(placement, (0.0, 1.0))
        if "optim.lr" not in combo or low <= (lr := float(combo["optim.lr"])) <= high:
            return True
        added = EXTENDED.get(placement, {}).get(int(combo.get("model.n_layers", 0)), ())
        return any(math.isclose(lr, a) for a in added)

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), best_lr.SELECTION: best_lr.selection_of(run)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["arm"] = arm_of(r)
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        unigram = stats.unigram_of(rows)
        arms = [f"{p}, L={d}" for p in places for d in depths]
        best = best_lr.best_lrs(rows, "arm", arms)
        measured = measure_checks(rows, best, depths, unigram)
        gaps = measured["post_minus_deepnorm_at_best"]
        ours = "Post-LN − DeepNorm, each at its best lr: " + "; ".join(
            f"{stats.median_and_interval(v.values())} nats at {c}" for c, v in gaps.items())
        notes = [f"Best lr rule (declared before the runs): {best_lr.RULE}.",
                 *best_lr.rule_notes(rows, "arm", best), *mid_depth_notes(rows, best, depths)]
        return Findings(table=self.tables(rows, best, places, depths), measured=measured, key=ours + ".",
                        ours=ours, notes=notes,
                        figures={"depth.png": lambda path: self.draw(rows, best, places, depths, unigram, path)})

    @staticmethod
    def tables(rows, best, places, depths) -> str:
        parts = [f"The whole loss-vs-lr curve per placement and depth: final validation loss, median [range] over "
                 f"seeds (n); **bold**: the best lr at that depth by the selection rule:\n\n"
                 f"{best_lr.curve_table(rows, 'arm', best)}",
                 "The selection loss (mean training loss over the last 10% of steps), median [range] over seeds:\n\n"
                 + best_lr.curve_table(rows, "arm", best, best_lr.selection_or_inf)]
        body = []
        for p in places:
            cells = []
            for d in depths:
                b = best.get(f"{p}, L={d}")
                mine = best_lr.runs_at_best(rows, "arm", b) if b else []
                text = stats.cell([stats.final_or_inf(r) for r in mine], mine) if mine else "–"
                cells.append(f"{text} at lr {b.lr:g}" + (" (edge)" if b.at_edge else "") if mine else text)
            body.append([p, *cells])
        parts.append(f"Each placement at its best lr per depth ({stats.CELL_NOTE}):\n\n"
                     + markdown_table(["placement", *[f"L={d}" for d in depths]], body))
        return "\n\n".join(parts)

    @staticmethod
    def draw(rows, best, places, depths, unigram, path) -> None:
        """Left: final loss at each placement's best lr against depth; middle: loss against lr at the deepest
        depth; right: validation curves there at the best lr."""
        fig, axes = plots.figure(ncols=3, width=4.4, height=3.6)
        deep = depths[-1]
        for p in places:
            color = plots.PLACEMENT_COLORS[p]
            per_depth = [best_lr.at_best(rows, "arm", best[f"{p}, L={d}"], stats.final_or_inf) for d in depths]
            seeds = sorted({s for v in per_depth for s in v})
            per_seed = [[v.get(s) if v.get(s) != float("inf") else None for v in per_depth] for s in seeds]
            plots.seeds_and_mean(axes[0], depths, per_seed, color, p)
            b = best[f"{p}, L={deep}"]
            mine = best_lr.val_curves_at_best(rows, "arm", b)
            plots.curves(axes[2], mine, color, f"{p} at lr {b.lr:g}" if b.lr else p)
        for ax in (axes[0], axes[2]):
            plots.unigram_line(ax, unigram)
        plots.log_axis(axes[0], depths)
        plots.finish(axes[0], "final val loss at each depth's best lr (thin: seeds)", "depth L",
                     "val loss (nats/byte)")
        at_deep = [r for r in rows if int(r["model.n_layers"]) == deep]
        best_lr.draw_curves(axes[1], at_deep, "arm", {a: b for a, b in best.items() if a.endswith(f"L={deep}")},
                            {f"{p}, L={deep}": plots.PLACEMENT_COLORS[p] for p in places}, unigram=unigram)
        axes[1].set_title(f"L = {deep}: " + axes[1].get_title(), fontsize=8)
        plots.finish(axes[2], f"L = {deep}: val loss at the best lr (thin: seeds)", "step", "val loss (nats/byte)")
        plots.save(fig, path)


def mid_depth_notes(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr], depths: list[int]) -> list[str]:
    """Reported, not judged: the gap at the depths between the shallow one and the judged ones (where Post-LN
    starts to fail)."""
    notes = []
    for d in [d for d in depths if depths[0] < d < deep_depths(depths)[0]]:
        gap = best_lr.paired_at_best(rows, "arm", best, f"post, L={d}", f"deepnorm, L={d}")
        notes.append(f"Reported, not judged: Post-LN − DeepNorm at L={d}, each at its best lr: "
                     f"{stats.median_and_interval(gap.values())} nats.")
    return notes
