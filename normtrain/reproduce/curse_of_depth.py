"""Sun et al. 2025 (The Curse of Depth): in Pre-LN the deep blocks approach the identity and removing one costs
little; LayerNorm Scaling (each block's norms × 1/√ℓ) makes them count again and lowers the loss.

The runs keep their checkpoints and ``normtrain-probe`` measures each trained model on the run's own validation
windows (normtrain/reproduce/probing.py): the eval loss with each block skipped in turn (Δ = skipped − full), the
cosine of each block's input and output streams, and the stream's rms after each block. The early half of the blocks
is 0…L/2−1, the deep half L/2…L−1.
"""

from __future__ import annotations

from typing import Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.grid import train_grid
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.probing import halves, per_layer, probe_runs, profile_text, profile_values
from normtrain.reproduce.runner import Experiment, Findings, curve_points, present
from normtrain.reproduce.writeup import markdown_table

PRE, LNS, PERI = "Pre-LN", "Pre-LN + LayerNorm Scaling", "Peri-LN"
ARMS = {("pre", "false"): PRE, ("pre", "true"): LNS, ("peri", "false"): PERI}  # (placement, depth_scaled) -> arm
COLORS = {PRE: plots.PLACEMENT_COLORS["pre"], LNS: "#2ca02c", PERI: plots.PLACEMENT_COLORS["peri"]}


def arm_of(values: dict[str, Any]) -> str | None:
    return ARMS.get((str(values.get("placement")), str(values.get("norm.depth_scaled", "false")).lower()))


def probe_row(probe: dict[str, Any] | None) -> dict[str, Any]:
    """What the analysis reads from a run's probe: the per-block profiles and their early/deep-half means."""
    skip, cos, rms = (per_layer(probe, k) for k in ("skip_delta", "block_cos", "act_rms"))
    (skip_early, skip_deep), (cos_early, cos_deep) = halves(skip), halves(cos)
    return {"probe_val_loss": probe["val_loss"] if probe else None, "skip_early": skip_early, "skip_deep": skip_deep,
            "cos_early": cos_early, "cos_deep": cos_deep, "rms_exponent": stats.variance_exponent(rms),
            "skip_profile": profile_text(skip), "cos_profile": profile_text(cos), "rms_profile": profile_text(rms)}


class CurseOfDepth(Experiment):
    name = "curse_of_depth"
    title = "The curse of depth: Pre-LN's idle deep blocks, LayerNorm Scaling and Peri-LN (Sun et al. 2025)"
    paper = "Sun et al. 2025 (Curse of Depth)"
    reference = ("**Sun et al. 2025**, *The Curse of Depth in Large Language Models* (arXiv 2502.05795, NeurIPS "
                 "2025): Fig. 1 (the loss of skipping each layer), the angular distance between layers, and the "
                 "perplexity tables of LayerNorm Scaling")
    method = ("d 64, 4 heads, SwiGLU, RoPE, RMSNorm, Xavier init (no depth-scaled init); 24 layers; AdamW (0.9, "
              "0.95), lr 1e-3 with a 50-step warm-up then cosine to 10%, weight decay 0.1, clipping 1; 1000 steps of "
              "8 × 128 bytes; Pre-LN, Pre-LN with LayerNorm Scaling (`norm.depth_scaled=true`: both sublayer-input "
              "norms of block ℓ times 1/√ℓ, the final norm unscaled, as the authors' code) and Peri-LN; 5 seeds. "
              "After training, `normtrain-probe` measures every run on its 512 validation windows: the loss with each "
              "block skipped, the block input/output cosine and the stream's rms per block.")
    keep_checkpoints = True  # the probe reads the trained model
    gpu_recipe = Recipe(extra_steps=300)  # the probe: the eval loss with each of 24 blocks skipped

    def keeps(self, combo: dict[str, str]) -> bool:
        return "placement" not in combo or arm_of(combo) is not None

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        """Train the grid, then probe every run (a probe already made of the same run is reused)."""
        done = train_grid(plan, keep_checkpoints=True)
        probes = probe_runs(plan, [combo for combo, _ in done])
        return [{**combo, **self.row(run, combo), **probe_row(p)} for (combo, run), p in zip(done, probes,
                                                                                             strict=True)]

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["arm"] = arm_of(r)
        arms = present(rows, "arm", tuple(ARMS.values()))
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        unigram = stats.unigram_of(rows)

        def per(a, d, key):
            return stats.seeds(rows, key, arm=a, model__n_layers=d)

        def loss(a, d):
            return per(a, d, stats.final_or_inf)

        def at_depths(fn):
            return {f"L={d}": fn(d) for d in depths}

        measured = {
            "lns_minus_pre_deep_skip": at_depths(lambda d: stats.paired(per(LNS, d, "skip_deep"),
                                                                        per(PRE, d, "skip_deep"), stats.minus)),
            "pre_minus_lns_deep_cos": at_depths(lambda d: stats.paired(per(PRE, d, "cos_deep"),
                                                                       per(LNS, d, "cos_deep"), stats.minus)),
            "pre_cos_deep_minus_early": at_depths(lambda d: stats.paired(per(PRE, d, "cos_deep"),
                                                                         per(PRE, d, "cos_early"), stats.minus)),
            "lns_minus_pre_loss": at_depths(lambda d: stats.paired(loss(LNS, d), loss(PRE, d), stats.difference)),
            "reference_margin": at_depths(lambda d: stats.margin_below(unigram, loss(PRE, d))),
        }
        deep = depths[-1]
        gain = measured["lns_minus_pre_deep_skip"][f"L={deep}"]
        ours = (f"deep-half skip Δ, LNS − Pre-LN at L={deep}: {stats.spread(gain.values())} nats; final loss LNS − "
                f"Pre-LN {stats.spread(measured['lns_minus_pre_loss'][f'L={deep}'].values())}")
        key = (f"{ours}; Pre-LN deep − early block cosine "
               f"{stats.spread(measured['pre_cos_deep_minus_early'][f'L={deep}'].values())}; Peri-LN deep-half skip "
               f"Δ {stats.spread(per(PERI, deep, 'skip_deep').values())} (Pre-LN "
               f"{stats.spread(per(PRE, deep, 'skip_deep').values())}).")
        return Findings(table=self.table(rows, arms, depths, per, loss), measured=measured, key=key, ours=ours,
                        figures={"depth_profile.png": lambda path: self.draw(rows, arms, depths, unigram, path)})

    @staticmethod
    def table(rows, arms, depths, per, loss) -> str:
        body = [[f"L={d}", a, stats.cell(loss(a, d).values(), stats.select(rows, arm=a, model__n_layers=d)),
                 *[stats.spread(per(a, d, k).values()) for k in ("skip_early", "skip_deep", "cos_early", "cos_deep",
                                                                 "rms_exponent")]]
                for d in depths for a in arms]
        return (f"Per arm, mean ± sd over seeds (n); {stats.CELL_NOTE}. Skip Δ: the eval loss with one block skipped "
                "minus the full model's, averaged over the early or the deep half of the blocks (nats per byte); cos: "
                "the mean cosine of a block's input and output streams over that half; k: the exponent of "
                "Var(x_ℓ) ∝ ℓ^k of the stream after block ℓ (the probe's rms).\n\n"
                + markdown_table(["depth", "arm", "final val loss", "skip Δ early", "skip Δ deep", "cos early",
                                  "cos deep", "k"], body))

    @staticmethod
    def draw(rows, arms, depths, unigram, path) -> None:
        fig, axes = plots.figure(ncols=4, nrows=len(depths), width=4.2, height=3.3)
        for i, d in enumerate(depths):
            ax_skip, ax_cos, ax_rms, ax_loss = axes[4 * i: 4 * i + 4]
            blocks = list(range(d))
            for a in arms:
                chosen = stats.select(rows, arm=a, model__n_layers=d)
                for ax, key in ((ax_skip, "skip_profile"), (ax_cos, "cos_profile"), (ax_rms, "rms_profile")):
                    profiles = [profile_values(r.get(key)) for r in chosen]
                    if profiles and all(len(p) == d for p in profiles):
                        plots.seeds_and_mean(ax, blocks, profiles, COLORS[a], a)
                plots.curves(ax_loss, [curve_points(r["val_curve"]) for r in chosen if r["val_curve"]], COLORS[a], a)
            ax_skip.set_yscale("symlog", linthresh=1e-3)
            ax_rms.set_yscale("log")
            plots.unigram_line(ax_loss, unigram)
            plots.finish(ax_skip, f"L={d}: loss rise when block i is skipped", "block i", "Δ val loss (nats/byte)")
            plots.finish(ax_cos, f"L={d}: cos(block input, output)", "block i", "cosine")
            plots.finish(ax_rms, f"L={d}: stream rms after block i", "block i", "rms")
            plots.finish(ax_loss, f"L={d}: val loss (RMSNorm)", "step", "val loss (nats/byte)")
        plots.save(fig, path)

