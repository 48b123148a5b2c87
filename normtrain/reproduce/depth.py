"""DeepNet / Admin: Post-LN degrades or diverges with depth without warm-up; Pre-LN and DeepNorm train."""

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
    curve_points,
    curve_text,
    figure,
    mean_over_seeds,
    present,
    save,
)
from normtrain.reproduce.warmup import final_loss
from normtrain.reproduce.writeup import fmt, markdown_table


class Depth(Experiment):
    name = "deepnet_depth"
    title = "Depth stability of Post-LN, Pre-LN and DeepNorm (Wang et al. 2022; Liu et al. 2020)"
    paper = "Wang et al. 2022 (DeepNet); Liu et al. 2020 (Admin)"
    reference = ("**Wang et al. 2022**, *DeepNet*, Fig. 1 and Table 1; **Liu et al. 2020**, *Admin*, Table 1")
    claim = ("Post-LN trains at moderate depth but degrades or fails as the model gets deeper (Admin's WMT14 "
             "En-De Post-LN: 27.80 BLEU at 6 layers, training failed at 12 and 18); Pre-LN and DeepNorm keep "
             "training (DeepNet trained 1000-layer models).")
    method = ("d 64, 4 heads, GELU FFN 256, Adam lr 1e-3 β = (0.9, 0.98), **no warm-up**, constant lr, no "
              "clipping, 200 steps of 16 × 128 bytes. 'Converges' means the run did not diverge and ended at "
              "least 1.5 nats below its step-0 validation loss (≈ 5.8: uniform over bytes is ln 256 = 5.55).")
    gpu = Scale(overrides=("model.d_model=256", "model.d_ff=1024", "train.max_steps=2000", "train.batch_size=32",
                           "train.eval_every=250"),
                grid={"model.n_layers": "6,24,48,96,192", "train.seed": "0,1,2"})

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        steps, losses = run.series("val/loss")
        return {**super().row(run, combo), "initial_val_loss": losses[0].item() if losses.size else None,
                "val_curve": curve_text(steps, losses)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["final"] = final_loss(r)
            r["converged"] = (r["final"] is not None and r["initial_val_loss"] is not None
                              and r["final"] <= r["initial_val_loss"] - 1.5)
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        loss = mean_over_seeds(rows, ("placement", "model.n_layers"), "final")
        diverged = {(r["placement"], r["model.n_layers"]) for r in rows if r["status"] == "diverged"}

        def cell(p, d):
            return "diverged" if (p, str(d)) in diverged else loss.get((p, str(d)))

        table = "Final validation loss (nats per byte):\n\n" + markdown_table(
            ["placement", *[f"L={d}" for d in depths]], [[p, *[cell(p, d) for d in depths]] for p in places])

        deep = depths[-1]
        post, pre = loss.get(("post", str(deep))), loss.get(("pre", str(deep)))
        gap = float("inf") if ("post", str(deep)) in diverged else (post - pre if post and pre else None)
        others = [r for r in rows if r["placement"] in ("pre", "deepnorm")]
        post_shallow = loss.get(("post", str(depths[0])))
        checks = [
            Check(f"Post-LN is ≥ 0.5 nats behind Pre-LN at the deepest model (L={deep}), or diverges",
                  f"Post − Pre = {fmt(gap)} nats", None if gap is None else gap >= 0.5),
            Check("Post-LN degrades with depth (deepest ≥ 0.1 nats worse than shallowest, or diverges)",
                  f"Post-LN {fmt(post_shallow)} at L={depths[0]}, {fmt(cell('post', deep))} at L={deep}",
                  None if post_shallow is None else (("post", str(deep)) in diverged
                                                     or (post is not None and post - post_shallow >= 0.1))),
            Check("Pre-LN and DeepNorm converge at every depth",
                  f"{sum(r['converged'] for r in others)} of {len(others)} runs converged",
                  all(r["converged"] for r in others) if others else None),
        ]
        key = (f"At L={deep}: Post-LN {fmt(cell('post', deep))}, Pre-LN {fmt(pre)}, "
               f"DeepNorm {fmt(cell('deepnorm', deep))} nats (Post − Pre {fmt(gap)}).")

        def draw(path):
            fig, axes = figure(ncols=2, width=4.6)
            for p in places:
                axes[0].plot(depths, [loss.get((p, str(d))) for d in depths], marker="o", label=p)
            axes[0].set(xscale="log", xlabel="depth L", ylabel="final val loss (nats/byte)", title="final loss")
            axes[0].set_xticks(depths, [str(d) for d in depths])
            for r in rows:
                if int(r["model.n_layers"]) == deep and r["val_curve"]:
                    axes[1].plot(*zip(*curve_points(r["val_curve"]), strict=True), marker=".",
                                 label=f"{r['placement']} s{r.get('train.seed')}")
            axes[1].set(xlabel="step", ylabel="val loss", title=f"L = {deep}")
            for ax in axes:
                ax.grid(alpha=0.3)
                ax.legend(fontsize=7)
            save(fig, path)

        return Findings(table=table, checks=checks, key=key, figures={"depth.png": draw})
