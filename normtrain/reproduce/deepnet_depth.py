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
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.plan import Plan

DEEP_FROM = 18  # the primary check's depths: these and deeper (a narrowed grid without them: its deepest)
DEEP_GRID = (6.25e-5, 1.25e-4, 2.5e-4, 5e-4)  # Post-LN's deep grid: v4's best 2.5e-4 at 18 layers, and below
ARM_LRS = {"post": {6: (2e-3, 4e-3, 8e-3), 18: DEEP_GRID, 24: DEEP_GRID},  # placement -> depth -> its lrs (v5)
           "deepnorm": {d: (2e-3, 4e-3, 8e-3) for d in (6, 18, 24)}}
EXTENDED: dict[str, dict[int, tuple[float, ...]]] = {"post": {6: (1e-3,)}}  # the edge rule's (CHECK_HISTORY 8)
FLAT = 0.05  # a curve whose median final losses span less than this is flat: no lr trains it (the edge rule)
PRIMARY_QUANTITY = "post_gap_growth_with_depth"


def arm_of(row: dict[str, Any]) -> str:
    return f"{row['placement']}, L={int(row['model.n_layers'])}"


def deep_depths(depths: list[int]) -> list[int]:
    return [d for d in depths if d >= DEEP_FROM] or depths[-1:]


def gap_of(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr], a: str, b: str) -> dict[str, float | None]:
    return best_lr.paired_at_best(rows, "arm", best, a, b) if a in best and b in best else {}


def growth(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr], depths: list[int]
           ) -> dict[str, dict[str, float | None]]:
    """The primary per deep depth L and seed: [Post-LN − DeepNorm](L) − [Post-LN − DeepNorm](6)."""
    shallow = gap_of(rows, best, f"post, L={depths[0]}", f"deepnorm, L={depths[0]}")
    return {f"L={d}": stats.paired(gap_of(rows, best, f"post, L={d}", f"deepnorm, L={d}"), shallow,
                                   stats.difference) for d in deep_depths(depths)}


def inside_or_flat(best: dict[str, best_lr.BestLr], deep: list[int]) -> dict[str, dict[str, float | None]]:
    """The edge precondition: every arm's best inside its grid; deep Post-LN's may sit at an edge of a flat curve."""
    found = best_lr.inside_grid(best)
    for d in deep:
        b = best.get(f"post, L={d}")
        scores = [v for v in (b.score.values() if b else ()) if v is not None and math.isfinite(v)]
        if b is not None and b.at_edge and scores and max(scores) - min(scores) < FLAT:
            found[b.arm] = {best_lr.ALL_SEEDS: 1.0}
    return found


def measure_checks(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr], depths: list[int],
                   unigram: float | None) -> dict[str, dict[str, dict[str, float | None]]]:
    """Every quantity the registration's rules name, per condition (a depth) and seed."""
    def loss(a: str) -> dict[str, float | None]:
        return best_lr.at_best(rows, "arm", best[a], stats.final_or_inf) if a in best else {}

    shallow, deep = depths[0], deep_depths(depths)
    return {
        PRIMARY_QUANTITY: growth(rows, best, depths),
        "post_minus_deepnorm_at_best": {f"L={d}": gap_of(rows, best, f"post, L={d}", f"deepnorm, L={d}") for d in deep},
        "post_deep_minus_shallow_at_best": {f"L={d}": gap_of(rows, best, f"post, L={d}", f"post, L={shallow}")
                                            for d in deep},
        "deepnorm_deep_minus_shallow_at_best": {f"L={d}": gap_of(rows, best, f"deepnorm, L={d}",
                                                                 f"deepnorm, L={shallow}") for d in depths[1:]},
        "post_minus_deepnorm_shallow": {f"L={shallow}": gap_of(rows, best, f"post, L={shallow}",
                                                               f"deepnorm, L={shallow}")},
        "reference_margin": {f"deepnorm, L={d}": stats.margin_below(unigram, loss(f"deepnorm, L={d}"))
                             for d in depths},
        "best_lr_inside_grid": inside_or_flat(best, deep),
    }


class Depth(Experiment):
    name = "deepnet_depth"
    title = ("Depth stability of Post-LN and DeepNorm with warm-up, each at its best lr (Wang et al. 2022; "
             "Liu et al. 2020)")
    paper = "Wang et al. 2022 (DeepNet); Liu et al. 2020 (Admin)"
    reference = "**Wang et al. 2022**, *DeepNet*, Fig. 1 and Table 1; **Liu et al. 2020**, *Admin*, Table 1"
    method = ("The 64-128-2 model (d 64, GELU FFN 128, 2 heads; DeepNet Fig. 5), learned positions, LayerNorm, Adam "
              "β = (0.9, 0.98), no clipping, 1000 steps of 8 × 128 bytes, a 100-step linear warm-up (10%) multiplying "
              "WSD (the peak to step 800, then linearly to 10%), evaluated every 5% on 512 fixed windows, and again "
              "at T/2 (500 steps, a decay branch from step 400), at 6, 18 and 24 layers, seeds 8–12. DeepNorm at "
              "peak learning rates 2e-3, 4e-3, 8e-3 at every depth; Post-LN at 2e-3, 4e-3, 8e-3 at 6 layers (and 1e-3, "
              "the edge rule's extension) and "
              "6.25e-5, 1.25e-4, 2.5e-4, 5e-4 at 18 and 24. Each placement is judged at its own best lr at each "
              "depth and budget: " + best_lr.HELD_OUT_RULE + ".")
    gpu_recipe = Recipe()
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)

    def keeps(self, combo: dict[str, str]) -> bool:
        placement, depth = combo.get("placement", "post"), int(combo.get("model.n_layers", 0))
        lrs = (*ARM_LRS.get(placement, {}).get(depth, ()), *EXTENDED.get(placement, {}).get(depth, ()))
        return "optim.lr" not in combo or not lrs or any(math.isclose(float(combo["optim.lr"]), x) for x in lrs)

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["arm"] = arm_of(r)
        rows, half = robustness.budgets(rows)
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        unigram = stats.unigram_of(rows)
        arms = [a for p in places for d in depths if any(r["arm"] == (a := f"{p}, L={d}") for r in rows)]
        best = best_lr.best_lrs(rows, "arm", arms, select_or_inf)
        measured = {**measure_checks(rows, best, depths, unigram),
                    **robustness.primary_again(PRIMARY_QUANTITY, lambda rs, bs: growth(rs, bs, depths), rows, half,
                                               "arm", arms)}
        gaps = measured["post_minus_deepnorm_at_best"]
        ours = "Post-LN − DeepNorm, each at its best lr: " + "; ".join(
            f"{stats.median_and_interval(v.values())} nats at {c}" for c, v in gaps.items()) + (
            "; its growth from 6 layers: " + "; ".join(f"{stats.median_and_interval(v.values())} at {c}"
                                                        for c, v in measured[PRIMARY_QUANTITY].items()))
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *best_lr.rule_notes(rows, "arm", best), *mid_depth_notes(rows, best, depths)]
        return Findings(table=self.tables(rows, best, places, depths), measured=measured, key=ours + ".",
                        ours=ours, notes=notes,
                        figures={"depth.png": lambda path: self.draw(rows, best, places, depths, unigram, path)})

    @staticmethod
    def tables(rows, best, places, depths) -> str:
        parts = [f"The whole loss-vs-lr curve per placement and depth: final validation loss, median [range] over "
                 f"seeds (n); **bold**: the best lr at that depth by the selection rule:\n\n"
                 f"{best_lr.curve_table(rows, 'arm', best)}",
                 "The selection loss (the held-out windows' loss at the run's end), median [range] over seeds:\n\n"
                 + best_lr.curve_table(rows, "arm", best, select_or_inf)]
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
