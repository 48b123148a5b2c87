"""Wang et al. 2022 (DeepNet), Fig. 4(a)/5: the early model update by placement and depth, unsaturated."""

from __future__ import annotations

from typing import Any

from normtrain.compare.runs import Run
from normtrain.reproduce import plots, stats
from normtrain.reproduce.runner import (
    PLACEMENT_ORDER,
    Experiment,
    Findings,
    Plan,
    Scale,
    curve_points,
    curve_text,
    present,
)
from normtrain.reproduce.writeup import markdown_table

EARLY = 10  # the step the checks read: "the beginning of training" (a tenth of the 100 logged steps)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


class ModelUpdate(Experiment):
    name = "deepnet_update"
    title = "Early model update by placement and depth (Wang et al. 2022, DeepNet Fig. 4a/5)"
    paper = "Wang et al. 2022 (DeepNet), Fig. 4a/5"
    reference = "**Wang et al. 2022**, *DeepNet: Scaling Transformers to 1,000 Layers*, Fig. 4(a), Fig. 5, Thm. 4.1/4.2"
    method = ("64-128-2 models (d 64, FFN 128 GELU, 2 heads, as in DeepNet Fig. 5) of 6, 24 and 96 layers, LayerNorm, "
              "Adam lr 5e-4 β = (0.9, 0.98), no warm-up, constant learning rate, no clipping, 100 steps of 8 × 128 "
              f"bytes, 5 seeds. Every step logs `update/output_kl` (the checks read step {EARLY}) and the old, "
              "saturating `update/output_change` (‖ΔF‖ of the normalized final hidden state, shown for comparison).")
    gpu = Scale(overrides=("model.d_model=256", "model.n_heads=4", "model.d_ff=1024", "train.max_steps=300",
                           "train.batch_size=32"),
                grid={"model.n_layers": "6,24,96,192"})

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        steps, kl = run.series("update/output_kl")
        _, change = run.series("update/output_change")
        kl_at = dict(zip(steps.astype(int).tolist(), kl.tolist(), strict=True))
        return {**super().row(run, combo), "kl_first": kl_at.get(1), "kl_early": kl_at.get(EARLY),
                "kl_final": kl_at.get(max(kl_at, default=0)),
                "kl_curve": curve_text(steps, kl), "change_curve": curve_text(steps, change)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        shallow, deep = depths[0], depths[-1]

        def early(p, d):
            return stats.per_seed(rows, "kl_early", lambda r: r["placement"] == p and int(r["model.n_layers"]) == d)

        def over(a: dict, b: dict) -> dict:
            return {s: ratio(a[s], b.get(s)) for s in a}

        measured = {
            "post_over_deepnorm": {f"L={d}": over(early("post", d), early("deepnorm", d)) for d in depths},
            "post_deep_over_shallow": {"": over(early("post", deep), early("post", shallow))},
            "deepnorm_deep_over_shallow": {"": over(early("deepnorm", deep), early("deepnorm", shallow))},
        }
        table = markdown_table(
            ["placement", *[f"KL at step {EARLY}, L={d}" for d in depths], f"L={deep} / L={shallow}"],
            [[p, *[stats.spread(early(p, d).values()) for d in depths],
              stats.spread(over(early(p, deep), early(p, shallow)).values())] for p in places])
        ratios = markdown_table(["", *[f"L={d}" for d in depths]],
                                [["Post-LN / DeepNorm", *[stats.spread(v.values()) for v in
                                                          measured["post_over_deepnorm"].values()]]])
        table = (f"KL(p_θ0 ‖ p_θt) per token at step {EARLY}, mean ± std over seeds (n):\n\n{table}\n\n"
                 f"Post-LN's update over DeepNorm's, per seed:\n\n{ratios}")
        ours = "Post-LN / DeepNorm KL at step 10: " + ", ".join(
            f"{stats.spread(measured['post_over_deepnorm'][f'L={d}'].values())} (L={d})" for d in depths)
        key = (f"{ours}; Post-LN L={deep}/L={shallow}: "
               f"{stats.spread(measured['post_deep_over_shallow'][''].values())}, DeepNorm: "
               f"{stats.spread(measured['deepnorm_deep_over_shallow'][''].values())}.")
        first = {d: over(stats.per_seed(rows, "kl_first", lambda r, d=d: r["placement"] == "post"
                                        and int(r["model.n_layers"]) == d),
                         stats.per_seed(rows, "kl_first", lambda r, d=d: r["placement"] == "deepnorm"
                                        and int(r["model.n_layers"]) == d)) for d in depths}
        notes = ["Exploratory, not a pre-registered check (step 1 was picked after seeing the curves): after the first "
                 "update, Post-LN / DeepNorm KL = " + ", ".join(f"{stats.spread(first[d].values())} (L={d})"
                                                                 for d in depths) + "."]
        return Findings(table=table, measured=measured, key=key, ours=ours, notes=notes,
                        figures={"model_update.png": lambda path: self.draw(rows, depths, places, path)})

    @staticmethod
    def draw(rows, depths, places, path) -> None:
        fig, axes = plots.figure(ncols=len(depths), nrows=2, width=4.0, height=3.2)
        for col, d in enumerate(depths):
            for row_i, (key, label) in enumerate((("kl_curve", "KL(p_θ0 ‖ p_θt) per token"),
                                                  ("change_curve", "‖ΔF‖, normalized F (saturates)"))):
                ax = axes[row_i * len(depths) + col]
                for p in places:
                    mine = [r for r in rows if r["placement"] == p and int(r["model.n_layers"]) == d]
                    per_seed = [[(s, v) for s, v in curve_points(r[key]) if v > 0] for r in mine if r[key]]
                    plots.curves(ax, per_seed, plots.PLACEMENT_COLORS[p], p)
                ax.set_yscale("log")
                ax.axvline(EARLY, color="0.5", lw=0.8, ls=":")
                plots.finish(ax, f"L = {d}, LayerNorm", "step", label, legend=(row_i == 0 and col == 0))
        plots.save(fig, path)
