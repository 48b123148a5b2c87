"""Xiong et al. 2020, Fig. 3: where the gradient sits at initialization, per layer, for Post- and Pre-LN."""

from __future__ import annotations

from typing import Any

from normtrain.compare.runs import Run
from normtrain.reproduce.runner import (
    PLACEMENT_ORDER,
    Check,
    Experiment,
    Findings,
    Plan,
    Scale,
    figure,
    loglog_slope,
    mean_over_seeds,
    present,
    save,
)
from normtrain.reproduce.writeup import fmt, markdown_table


class GradInit(Experiment):
    name = "xiong_grad_init"
    title = "Gradient norm per layer at initialization (Xiong et al. 2020, Fig. 3)"
    paper = "Xiong et al. 2020, Fig. 3"
    reference = "**Xiong et al. 2020**, *On Layer Normalization in the Transformer Architecture*, Fig. 3 and Thm. 1"
    claim = ("At initialization the gradient of Post-LN's FFN weights grows with the layer index, largest next "
             "to the output, and the last layer's gradient does not depend on depth L. Pre-LN's is flat (or "
             "falling) across layers, and its last layer's shrinks with depth, about as L^-1/2 (O(d·√(ln d/L))).")
    method = ("Each run takes one optimizer step on one batch (16 × 128 bytes of the default corpus); row `step = 0` "
              "of its `metrics.jsonl` is the gradient of the freshly initialized model. `grad_norm/layer_i` is the "
              "L2 norm over *all* of block i's gradients (attention, MLP, norms), not the FFN matrix alone. "
              "d 64, FFN 128 (GELU), 2 heads, Xavier-normal init, unit-variance embeddings.")
    gpu = Scale(overrides=("model.d_model=256", "model.n_heads=4", "model.d_ff=1024", "train.batch_size=64"),
                grid={"model.n_layers": "6,12,24,48,96,192", "train.seed": "0,1,2,3,4"})

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        profile = [float(run.rows[0][k]) for k in run.layer_keys("grad_norm")] if run.rows else []
        return {"last_layer": profile[-1] if profile else None, "first_layer": profile[0] if profile else None,
                "last_over_first": profile[-1] / profile[0] if profile and profile[0] else None,
                "profile": " ".join(f"{v:.4g}" for v in profile)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        last = mean_over_seeds(rows, ("placement", "model.n_layers"), "last_layer")
        rise = mean_over_seeds(rows, ("placement", "model.n_layers"), "last_over_first")
        profiles = _mean_profiles(rows)

        table = markdown_table(
            ["placement", *[f"last layer, L={d}" for d in depths], "slope vs L",
             *[f"last/first, L={d}" for d in depths]],
            [[p, *[last.get((p, str(d))) for d in depths],
              loglog_slope(depths, [last.get((p, str(d))) for d in depths]),
              *[rise.get((p, str(d))) for d in depths]] for p in places])

        def at(p, d, table_):
            return table_.get((p, str(d)))

        post_last = [at("post", d, last) for d in depths]
        post_spread = _spread(post_last)
        pre_slope = loglog_slope(depths, [at("pre", d, last) for d in depths])
        post_rises = [at("post", d, rise) for d in depths]
        pre_rises = [at("pre", d, rise) for d in depths]
        checks = [
            Check("Post-LN: the gradient grows toward the output (last/first block > 1 at every depth)",
                  "last/first = " + ", ".join(f"{fmt(v)} (L={d})" for v, d in zip(post_rises, depths, strict=True)),
                  _all(post_rises, lambda v: v > 1)),
            Check("Post-LN: the last layer's gradient is about independent of depth (max/min over L ≤ 1.5)",
                  f"{' / '.join(fmt(v) for v in post_last)} at L = {'/'.join(map(str, depths))}; "
                  f"max/min {fmt(post_spread)}", None if post_spread is None else post_spread <= 1.5),
            Check("Pre-LN: the last layer's gradient falls about as L^-1/2 (log-log slope in [-0.8, -0.25])",
                  f"slope {fmt(pre_slope)}", None if pre_slope is None else -0.8 <= pre_slope <= -0.25),
            Check("Pre-LN: the profile is flat or falling toward the output (last/first ≤ 1.2)",
                  "last/first = " + ", ".join(f"{fmt(v)} (L={d})" for v, d in zip(pre_rises, depths, strict=True)),
                  _all(pre_rises, lambda v: v <= 1.2)),
        ]
        key = (f"Last-layer gradient norm at L = {depths[0]} → {depths[-1]}: Post-LN {fmt(post_last[0])} → "
               f"{fmt(post_last[-1])}, Pre-LN {fmt(at('pre', depths[0], last))} → {fmt(at('pre', depths[-1], last))} "
               f"(slope {fmt(pre_slope)}).")

        def draw_profiles(path):
            fig, axes = figure(ncols=len(places))
            for ax, p in zip(axes, places, strict=True):
                for d in depths:
                    prof = profiles.get((p, str(d)))
                    if prof:
                        ax.plot([(i + 1) / len(prof) for i in range(len(prof))], prof, marker=".", label=f"L={d}")
                ax.set(title=p, xlabel="block index / L", yscale="log")
                ax.grid(alpha=0.3)
            axes[0].set_ylabel("gradient norm of the block at init")
            axes[0].legend(fontsize=8)
            save(fig, path)

        def draw_last(path):
            fig, (ax,) = figure(width=5)
            for p in places:
                ys = [at(p, d, last) for d in depths]
                ax.plot(depths, ys, marker="o", label=p)
            ref = at("pre", depths[0], last)
            if ref:
                ax.plot(depths, [ref * (d / depths[0]) ** -0.5 for d in depths], "k--", lw=1, label="∝ L^-1/2")
            ax.set(xscale="log", yscale="log", xlabel="depth L", ylabel="last block's gradient norm at init",
                   title="last layer vs depth (mean over seeds)")
            ax.set_xticks(depths, [str(d) for d in depths])
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            save(fig, path)

        return Findings(table=table, checks=checks, key=key,
                        figures={"grad_profile.png": draw_profiles, "last_layer_vs_depth.png": draw_last})


def _mean_profiles(rows: list[dict[str, Any]]) -> dict[tuple, list[float]]:
    groups: dict[tuple, list[list[float]]] = {}
    for r in rows:
        if r["profile"]:
            profile = [float(v) for v in r["profile"].split()]
            groups.setdefault((r["placement"], r["model.n_layers"]), []).append(profile)
    return {k: [sum(col) / len(col) for col in zip(*v, strict=True)] for k, v in groups.items()}


def _spread(values: list[float | None]) -> float | None:
    vals = [v for v in values if v]
    return max(vals) / min(vals) if len(vals) >= 2 else None


def _all(values, test) -> bool | None:
    vals = [v for v in values if v is not None]
    return all(test(v) for v in vals) if vals else None
