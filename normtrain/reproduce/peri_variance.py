"""Kim et al. 2025 (Peri-LN): Peri-LN against Pre-LN, each at its own best learning rate: the final loss, the growth
of the residual stream's variance and largest |x| over training, the loss at a high learning rate, spikes and the
seed spread.

Every number comes from the runs' own logs (``monitor.residual_stats``: ``act_rms/layer_i`` and
``act_absmax/layer_i`` of the stream after block i; ``grad_norm/layer_i``; the OLMo-2 spike score in the summary).
The growth exponent k fits Var(x_ℓ) ∝ ℓ^k over the blocks ℓ = 1…L at the end of training: k ≈ 1 is the linear growth
Peri-LN's analysis predicts; a faster growth (Pre-LN's, exponential in the paper's bound) gives a larger k. Across
depth the profile is largely set by the placement at step 0 (each Peri-LN block adds two unit-rms outputs), so what
the registration judges is the growth *over training*: the last block's mean square (and the stream's largest |x|)
at the end over the same at the first logged step, each arm at its best lr (normtrain/study/best_lr.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from normtrain.compare.runs import Run
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.probing import profile_text, profile_values
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, curve_points, curve_text, present
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.plan import Plan
from normtrain.util.numbers import number
from normtrain.util.spread import mean_sd

ARMS = ("pre", "peri")  # the compared arms (v3 also ran Post-LN)
HIGH_LR = 1.25e-2  # the largest lr both arms run: the stability comparison's
LRS = (2e-3, 5e-3, 1.25e-2)  # both placements' registered grid
EXTENDED: dict[str, tuple[float, ...]] = {"peri": (8e-4,)}  # the registered edge rule's extensions (CHECK_HISTORY 4)
PRIMARY_QUANTITY = "peri_minus_pre_loss_at_best"


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
    title = "Peri-LN against Pre-LN: loss, variance growth over training and stability (Kim et al. 2025)"
    paper = "Kim et al. 2025 (Peri-LN)"
    reference = ("**Kim et al. 2025**, *Peri-LN: Revisiting Normalization Layer in the Transformer Architecture* "
                 "(arXiv 2502.02732), §3–4 and the figures of hidden-state variance by layer and over training")
    method = ("24 layers, d 64, 4 heads, GELU FFN 128, RoPE, no biases, LayerNorm; AdamW (0.9, 0.95), a 100-step "
              "(5%) warm-up then WSD (the peak to step 1600, then linearly to 10%), weight decay 0.1, clipping 1; "
              "2000 steps of 8 × 128 bytes, evaluated every 5% on 512 fixed windows, and again at T/2 (1000 steps, "
              "a decay branch from step 800); Pre-LN and Peri-LN (x ← x + N(F(N(x))), a final norm) at peak lrs "
              "2e-3, 5e-3, 1.25e-2, Peri-LN also at 8e-4 (the edge rule's extension); seeds 10–14. Each arm is "
              "judged at its own best lr, at each budget: "
              + best_lr.HELD_OUT_RULE + ". Every 10 steps the run logs the stream's rms and max |x| after each "
              "block and each block's gradient norm; the OLMo-2 spike score (points ≥ 7σ from the mean of the "
              "previous 100 steps) counts loss and gradient-norm spikes.")
    gpu_recipe = Recipe()
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)

    def keeps(self, combo: dict[str, str]) -> bool:
        """The registered grid for both placements, and each placement's edge extension (``EXTENDED``)."""
        if "optim.lr" not in combo:
            return True
        lrs = (*LRS, *EXTENDED.get(combo.get("placement", ""), ()))
        return any(math.isclose(float(combo["optim.lr"]), x) for x in lrs)

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        _, rms = logged_profiles(run, "act_rms")
        steps, absmax = logged_profiles(run, "act_absmax")
        final_rms = rms[-1].tolist() if len(rms) else []
        peak = absmax.max(axis=1) if len(absmax) else np.empty(0)
        return {**super().row(run, combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss"), "growth_exponent": stats.variance_exponent(final_rms),
                "variance_growth": variance_growth(rms),
                "final_absmax": float(peak[-1]) if peak.size else None,
                "absmax_growth": float(peak[-1] / peak[0]) if peak.size and peak[0] > 0 else None,
                "grad_spikes": spikes(run.summary, "grad_norm"), "loss_spikes": spikes(run.summary, "loss"),
                "rms_profile": profile_text(final_rms), "absmax_curve": curve_text(steps, peak)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        deep = max(int(r["model.n_layers"]) for r in rows)
        rows, half = robustness.budgets([r for r in rows if int(r["model.n_layers"]) == deep])
        places = [p for p in present(rows, "placement", PLACEMENT_ORDER) if p in ARMS]
        unigram = stats.unigram_of(rows)
        best = best_lr.best_lrs(rows, "placement", places, select_or_inf)
        measured = quantities(rows, best, unigram, f"L={deep}")
        measured.update(robustness.primary_again(
            PRIMARY_QUANTITY, lambda rs, bs: {f"L={deep}": best_lr.paired_at_best(
                rs, "placement", bs, "peri", "pre", stats.final_or_inf, stats.difference)},
            rows, half, "placement", places))
        loss = measured["peri_minus_pre_loss_at_best"][f"L={deep}"]
        growth = measured["pre_over_peri_variance_growth"][f"L={deep}"]
        ours = (f"Peri − Pre final loss, each at its best lr (L={deep}): {stats.median_and_interval(loss.values())} "
                f"nats; Pre/Peri variance growth over training {stats.median_and_interval(growth.values())}")
        key = f"{ours}; best lr: " + ", ".join(f"{p} {b.lr:g}" for p, b in best.items() if b.lr is not None) + "."
        at = [r for r in rows if (b := best.get(r["placement"])) and b.lr == best_lr.lr_of(r)]
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *best_lr.rule_notes(rows, "placement", best), *half_note(half, places, deep),
                 "Seed spread (sd of the final loss over seeds) at each arm's best lr: "
                 + ", ".join(f"{p} {seed_sd(best_lr.at_best(rows, 'placement', b, stats.final_or_inf))}"
                             for p, b in best.items()) + " (Peri-LN's smaller spread is the paper's claim; reported, "
                 "not judged: 5 seeds do not pin down a standard deviation)"]
        return Findings(table=self.table(rows, at, best), measured=measured, key=key, ours=ours, notes=notes,
                        figures={"variance.png": lambda path: self.draw(rows, at, best, unigram, path)})

    @staticmethod
    def table(rows, at, best) -> str:
        body = []
        for p, b in best.items():
            mine = stats.select(at, placement=p)
            grad_spikes = [r["grad_spikes"] for r in mine if r.get("grad_spikes") is not None]
            loss_spikes = [r["loss_spikes"] for r in mine if r.get("loss_spikes") is not None]
            body.append([p, "–" if b.lr is None else f"{b.lr:g}" + (" (edge)" if b.at_edge else ""),
                         stats.cell([stats.final_or_inf(r) for r in mine], mine),
                         *[stats.median_and_interval(r.get(k) for r in mine)
                           for k in ("val_quarter_drop", "variance_growth", "absmax_growth", "final_absmax",
                                     "growth_exponent")],
                         f"{sum(grad_spikes)} / {sum(loss_spikes)}" if grad_spikes else "–"])
        return "\n\n".join([
            "The whole loss-vs-lr curve: final validation loss per placement and peak lr, median [range] over seeds "
            f"(n); **bold**: the placement's best lr by the selection rule:\n\n"
            f"{best_lr.curve_table(rows, 'placement', best)}",
            "The selection loss (the held-out windows' loss at the run's end), median [range] over seeds:\n\n"
            + best_lr.curve_table(rows, "placement", best, select_or_inf),
            f"Each placement at its best lr ({stats.CELL_NOTE}); the rest median [range] over seeds. Quarter fall: "
            "the validation loss's fall over the last quarter; variance growth: the mean square of the stream after "
            "the last block at the end over the same at the first logged step; max |x| growth: the largest |x| "
            "after any block, end over start; k: the exponent of Var(x_ℓ) ∝ ℓ^k over the blocks at the end; "
            "spikes: gradient-norm / loss spikes summed over seeds.\n\n"
            + markdown_table(["placement", "best lr", "final val loss", "quarter fall", "variance growth",
                              "max |x| growth", "final max |x|", "k", "spikes (grad / loss)"], body)])

    @staticmethod
    def draw(rows, at, best, unigram, path) -> None:
        """At each arm's best lr: Var(x) per block at the end, max |x| over training, the val curves; and the
        loss-vs-lr curve."""
        fig, axes = plots.figure(ncols=4, width=4.4, height=3.3)
        ax_var, ax_max, ax_loss, ax_lr = axes[:4]
        for p, b in best.items():
            chosen = stats.select(at, placement=p)
            color, label = plots.PLACEMENT_COLORS[p], f"{p} at lr {b.lr:g}" if b.lr is not None else p
            profiles = [[v * v for v in profile_values(r["rms_profile"])] for r in chosen]
            if profiles and len({len(pr) for pr in profiles}) == 1 and profiles[0]:
                plots.seeds_and_mean(ax_var, list(range(1, len(profiles[0]) + 1)), profiles, color, label)
            plots.curves(ax_max, [curve_points(r["absmax_curve"]) for r in chosen if r["absmax_curve"]], color, label)
            plots.curves(ax_loss, [curve_points(r["val_curve"]) for r in chosen if r["val_curve"]], color, label)
        ax_var.set_yscale("log")
        ax_max.set_yscale("log")
        plots.unigram_line(ax_loss, unigram)
        plots.finish(ax_var, "Var(x) after block ℓ, end of training (best lr)", "block ℓ", "mean square of x")
        plots.finish(ax_max, "max |x| over blocks, during training (best lr)", "step", "max |x|")
        plots.finish(ax_loss, "val loss at each arm's best lr (LayerNorm)", "step", "val loss (nats/byte)")
        best_lr.draw_curves(ax_lr, rows, "placement", best, plots.PLACEMENT_COLORS, unigram=unigram)
        plots.save(fig, path)


def variance_growth(rms: np.ndarray) -> float | None:
    """The mean square of the stream after the last block at the last logged step over the same at the first."""
    if not len(rms) or not rms[0, -1] > 0:
        return None
    return float((rms[-1, -1] / rms[0, -1]) ** 2)


def quantities(rows, best, unigram, where: str) -> dict[str, dict[str, dict[str, float | None]]]:
    """Every quantity the registration names, each arm at its best lr (paired by seed where two arms)."""
    def pair(arm, reference, value, op):
        return best_lr.paired_at_best(rows, "placement", best, arm, reference, value, op)

    def at_high(p):
        return stats.per_seed([r for r in stats.select(rows, placement=p) if best_lr.lr_of(r) == HIGH_LR],
                              stats.final_or_inf)

    pre = best.get("pre")
    reference = best_lr.at_best(rows, "placement", pre, stats.final_or_inf) if pre else {}
    return {"peri_minus_pre_loss_at_best": {where: pair("peri", "pre", stats.final_or_inf, stats.difference)},
            "pre_over_peri_variance_growth": {where: pair("pre", "peri", "variance_growth", stats.ratio)},
            "pre_over_peri_absmax_growth": {where: pair("pre", "peri", "absmax_growth", stats.ratio)},
            "peri_minus_pre_loss_at_high_lr": {f"{where}, lr {HIGH_LR:g}": stats.paired(
                at_high("peri"), at_high("pre"), stats.difference)},
            "reference_margin": {where: stats.margin_below(unigram, reference)},
            "best_lr_inside_grid": best_lr.inside_grid(best),
            "val_quarter_drop_at_best": {p: best_lr.at_best(rows, "placement", b, "val_quarter_drop")
                                         for p, b in best.items()}}


def half_note(half: list[dict[str, Any]], places: list[str], deep: int) -> list[str]:
    """At T/2: each placement's best lr there and the paired difference (the primary's budget reading)."""
    if not half:
        return []
    best = best_lr.best_lrs(half, "placement", places, select_or_inf)
    gap = best_lr.paired_at_best(half, "placement", best, "peri", "pre", stats.final_or_inf, stats.difference)
    return [f"At T/2 ({half[0]['steps']} steps, L={deep}), each at its own best lr there ("
            + ", ".join(f"{p} {best_lr.lr_text(b)}" for p, b in best.items())
            + f"): Peri − Pre final loss {stats.median_and_interval(gap.values())} nats."]


def seed_sd(values: dict[str, float | None]) -> str:
    _, sd, n = mean_sd(list(values.values()))
    return f"{number(float(sd), 4)} (n={n})" if n > 1 else "–"
