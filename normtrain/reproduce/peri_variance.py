"""Kim et al. 2025 (Peri-LN): the residual stream's variance across depth and over training under Pre-LN, Peri-LN
and Post-LN; gradient-norm spikes; the final loss and its seed spread.

Every number comes from the runs' own logs (``monitor.residual_stats``: ``act_rms/layer_i`` and
``act_absmax/layer_i`` of the stream after block i; ``grad_norm/layer_i``; the OLMo-2 spike score in the summary).
The growth exponent k fits Var(x_ℓ) ∝ ℓ^k over the blocks ℓ = 1…L at the end of training: k ≈ 1 is the linear growth
Peri-LN's analysis predicts; a faster growth (Pre-LN's, exponential in the paper's bound) gives a larger k.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from normtrain.compare.runs import Run
from normtrain.reproduce import plots, stats
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.probing import profile_text, profile_values
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, curve_points, curve_text, present
from normtrain.reproduce.writeup import markdown_table
from normtrain.util.numbers import number
from normtrain.util.spread import mean_sd

TRAINS = ("pre", "peri")  # the reference arms of the guard


def logged_profiles(run: Run, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values[step, layer]) of the logged rows where every layer of ``prefix`` is finite."""
    steps, values = run.layer_matrix(prefix)
    keep = np.isfinite(values).all(axis=1) if values.size else np.zeros(0, dtype=bool)
    return steps[keep], values[keep]


def spikes(summary: dict[str, Any], series: str) -> int | None:
    """How many scored steps of ``series`` (loss, grad_norm) spiked (share × steps scored)."""
    share, points = summary.get(f"spike_score_{series}"), summary.get("spike_points")
    return round(share * points) if share is not None and points else None


class PeriVariance(Experiment):
    name = "peri_variance"
    title = "Residual-stream variance, massive activations and gradients: Post-LN, Pre-LN and Peri-LN (Kim et al. 2025)"
    paper = "Kim et al. 2025 (Peri-LN)"
    reference = ("**Kim et al. 2025**, *Peri-LN: Revisiting Normalization Layer in the Transformer Architecture* "
                 "(arXiv 2502.02732), §3–4 and the figures of hidden-state variance by layer and over training")
    method = ("d 64, 4 heads, GELU FFN 128, RoPE, no biases, LayerNorm; AdamW (0.9, 0.95), lr 2e-3 with a 50-step "
              "warm-up then cosine to 10%, weight decay 0.1, clipping 1; 1000 steps of 8 × 128 bytes; Post-LN, Pre-LN "
              "and Peri-LN (x ← x + N(F(N(x))), a final norm) at 6 and 24 layers, 5 seeds. Every 10 steps the run "
              "logs the stream's rms and max |x| after each block and each block's gradient norm; the OLMo-2 spike "
              "score (points ≥ 7σ from the mean of the previous 100 steps) counts loss and gradient-norm spikes.")
    gpu_recipe = Recipe()

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        _, rms = logged_profiles(run, "act_rms")
        steps, absmax = logged_profiles(run, "act_absmax")
        _, grads = logged_profiles(run, "grad_norm")
        final_rms = rms[-1].tolist() if len(rms) else []
        peak = absmax.max(axis=1) if len(absmax) else np.empty(0)
        first_last = grads[:, 0] / grads[:, -1] if len(grads) and grads.shape[1] > 1 else np.empty(0)
        return {**super().row(run, combo), "growth_exponent": stats.variance_exponent(final_rms),
                "final_absmax": float(peak[-1]) if peak.size else None,
                "absmax_growth": float(peak[-1] / peak[0]) if peak.size and peak[0] > 0 else None,
                "grad_first_over_last": float(np.median(first_last)) if first_last.size else None,
                "grad_spikes": spikes(run.summary, "grad_norm"), "loss_spikes": spikes(run.summary, "loss"),
                "rms_profile": profile_text(final_rms), "absmax_curve": curve_text(steps, peak)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        places = present(rows, "placement", PLACEMENT_ORDER)
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        deep, unigram = depths[-1], stats.unigram_of(rows)

        def per(p, d, key):
            return stats.seeds(rows, key, placement=p, model__n_layers=d)

        def loss(p, d):
            return per(p, d, stats.final_or_inf)

        measured = {
            "pre_minus_peri_growth_exponent": {f"L={d}": stats.paired(per("pre", d, "growth_exponent"),
                                                                      per("peri", d, "growth_exponent"), stats.minus)
                                               for d in depths},
            "pre_over_peri_absmax": {f"L={deep}": stats.paired(per("pre", deep, "final_absmax"),
                                                               per("peri", deep, "final_absmax"), stats.ratio)},
            "peri_minus_pre_loss": {f"L={d}": stats.paired(loss("peri", d), loss("pre", d), stats.difference)
                                    for d in depths},
            "post_over_pre_grad_ratio": {f"L={deep}": stats.paired(
                per("post", deep, "grad_first_over_last"), per("pre", deep, "grad_first_over_last"), stats.ratio)},
            "reference_margin": {f"{p}, L={d}": stats.margin_below(unigram, loss(p, d))
                                 for p in TRAINS if p in places for d in depths},
        }
        exps = {p: stats.spread(per(p, deep, "growth_exponent").values()) for p in places}
        ours = (f"variance growth exponent k (Var ∝ ℓ^k) at L={deep}: " + ", ".join(f"{p} {exps[p]}" for p in places)
                + f"; Peri − Pre final loss {stats.spread(measured['peri_minus_pre_loss'][f'L={deep}'].values())}")
        key = (f"{ours}; Pre/Peri final max |x| at L={deep}: "
               f"{stats.spread(measured['pre_over_peri_absmax'][f'L={deep}'].values())}.")
        notes = [f"Seed spread (sd of the final loss over seeds) at L={d}: "
                 + ", ".join(f"{p} {seed_sd(loss(p, d))}" for p in places) + " (Peri-LN's smaller spread is the "
                 "paper's claim; reported, not judged: 5 seeds do not pin down a standard deviation)" for d in depths]
        return Findings(table=self.table(rows, places, depths, per, loss), measured=measured, key=key, ours=ours,
                        notes=notes, figures={"variance.png": lambda path: self.draw(rows, places, depths, unigram,
                                                                                     path)})

    @staticmethod
    def table(rows, places, depths, per, loss) -> str:
        body = []
        for d in depths:
            for p in places:
                chosen = stats.select(rows, placement=p, model__n_layers=d)
                grad_spikes = [r["grad_spikes"] for r in chosen if r.get("grad_spikes") is not None]
                loss_spikes = [r["loss_spikes"] for r in chosen if r.get("loss_spikes") is not None]
                body.append([f"L={d}", p, stats.cell(loss(p, d).values(), chosen),
                             stats.spread(per(p, d, "growth_exponent").values()),
                             stats.spread(per(p, d, "final_absmax").values()),
                             stats.spread(per(p, d, "absmax_growth").values()),
                             stats.spread(per(p, d, "grad_first_over_last").values()),
                             f"{sum(grad_spikes)} / {sum(loss_spikes)}" if grad_spikes else "–"])
        return (f"Per placement and depth, mean ± sd over seeds (n); {stats.CELL_NOTE}. k: the exponent of Var(x_ℓ) ∝ "
                "ℓ^k over the blocks at the end; max |x|: the largest |x| in the stream after any block at the end, "
                "and its ratio to the same at step 0; gradient first/last: block 0's gradient norm over the last "
                "block's (median over the logged steps); spikes: gradient-norm / loss spikes summed over seeds.\n\n"
                + markdown_table(["depth", "placement", "final val loss", "k", "final max |x|", "max |x| end/start",
                                  "gradient first/last", "spikes (grad / loss)"], body))

    @staticmethod
    def draw(rows, places, depths, unigram, path) -> None:
        fig, axes = plots.figure(ncols=3, nrows=len(depths), width=4.4, height=3.3)
        for row_i, d in enumerate(depths):
            ax_var, ax_max, ax_loss = axes[3 * row_i: 3 * row_i + 3]
            for p in places:
                chosen = stats.select(rows, placement=p, model__n_layers=d)
                color = plots.PLACEMENT_COLORS[p]
                profiles = [[v * v for v in profile_values(r["rms_profile"])] for r in chosen]
                if profiles and all(len(pr) == d for pr in profiles):
                    plots.seeds_and_mean(ax_var, list(range(1, d + 1)), profiles, color, p)
                plots.curves(ax_max, [curve_points(r["absmax_curve"]) for r in chosen if r["absmax_curve"]], color, p)
                plots.curves(ax_loss, [curve_points(r["val_curve"]) for r in chosen if r["val_curve"]], color, p)
            ax_var.set_yscale("log")
            ax_max.set_yscale("log")
            plots.unigram_line(ax_loss, unigram)
            plots.finish(ax_var, f"L={d}: Var(x) after block ℓ, end of training", "block ℓ", "mean square of x")
            plots.finish(ax_max, f"L={d}: max |x| over blocks, during training", "step", "max |x|")
            plots.finish(ax_loss, f"L={d}: val loss (LayerNorm)", "step", "val loss (nats/byte)")
        plots.save(fig, path)


def seed_sd(values: dict[str, float | None]) -> str:
    _, sd, n = mean_sd(list(values.values()))
    return f"{number(float(sd), 4)} (n={n})" if n > 1 else "–"
