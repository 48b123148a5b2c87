"""Sun et al. 2025 (The Curse of Depth): in Pre-LN the deep blocks approach the identity and removing one costs
little; LayerNorm Scaling (each block's norms × 1/√ℓ) makes them count again and lowers the loss.

Each arm (Pre-LN, Pre-LN + LNS) trains at several learning rates and is judged at its own best one
(normtrain/study/best_lr.py). The runs keep their checkpoints and ``normtrain-probe`` measures the trained
models at each arm's best lr on the run's own validation windows (normtrain/reproduce/probing.py): the eval loss
with each block skipped in turn (Δ = skipped − full), the cosine of each block's input and output streams, and the
stream's rms after each block. The early half of the blocks is 0…L/2−1, the deep half L/2…L−1.
"""

from __future__ import annotations

import math
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.probing import PROBE_FILE, halves, per_layer, probe_runs, profile_text, profile_values
from normtrain.reproduce.runner import Experiment, Findings, curve_points, present, read_rows
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.grid import train_grid
from normtrain.study.plan import Plan

PRE, LNS, PERI = "Pre-LN", "Pre-LN + LayerNorm Scaling", "Peri-LN"
ARMS = {("pre", "false"): PRE, ("pre", "true"): LNS, ("peri", "false"): PERI}  # (placement, depth_scaled) -> arm
ARM = "arm"
# each around its v4 best (the YAML's axis), and one point below each, by the registered edge rule (CHECK_HISTORY 4)
ARM_LRS = {PRE: (8e-4, 2e-3, 5e-3, 1.25e-2), LNS: (2e-3, 5e-3, 1.25e-2, 3.125e-2)}
PRIMARY_QUANTITY = "lns_minus_pre_loss_at_best"
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
    title = "The curse of depth: Pre-LN's idle deep blocks and LayerNorm Scaling (Sun et al. 2025)"
    paper = "Sun et al. 2025 (Curse of Depth)"
    reference = ("**Sun et al. 2025**, *The Curse of Depth in Large Language Models* (arXiv 2502.05795, NeurIPS "
                 "2025): Fig. 1 (the loss of skipping each layer), the angular distance between layers, and the "
                 "perplexity tables of LayerNorm Scaling")
    method = ("d 64, 4 heads, SwiGLU, RoPE, RMSNorm, Xavier init (no depth-scaled init); 24 layers; AdamW (0.9, "
              "0.95), a 100-step (5%) warm-up then WSD (the peak to step 1600, then linearly to 10%), weight decay "
              "0.1, clipping 1; 2000 steps of 8 × 128 bytes, evaluated every 5% on 512 fixed windows, and again at "
              "T/2 (1000 steps, a decay branch from step 800); Pre-LN at peak lrs 2e-3, 5e-3, 1.25e-2 and Pre-LN "
              "with LayerNorm Scaling (`norm.depth_scaled=true`: both sublayer-input norms of block ℓ times 1/√ℓ, "
              "the final norm unscaled, as the authors' code) at 5e-3, 1.25e-2, 3.125e-2; seeds 15–18. Each arm is "
              "judged at its own best lr, at each budget: " + best_lr.HELD_OUT_RULE + ". After training, "
              "`normtrain-probe` measures the T runs at each arm's best lr on their 512 validation windows: the loss "
              "with each block skipped, the block input/output cosine and the stream's rms per block.")
    keep_checkpoints = True  # the probe reads the trained model
    checkpoint_stand_in = PROBE_FILE  # and then nothing else does: a probed run travels in a pack without it
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)
    gpu_recipe = Recipe(extra_steps=300)  # the probe: the eval loss with each of 24 blocks skipped

    def keeps(self, combo: dict[str, str]) -> bool:
        arm = arm_of(combo)
        if "placement" in combo and arm is None:
            return False
        lr = combo.get(best_lr.LR_AXIS)
        return arm not in ARM_LRS or lr is None or any(math.isclose(float(lr), x) for x in ARM_LRS[arm])

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), ARM: arm_of(combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}

    def train_rows(self, runs: Plan) -> list[dict[str, Any]]:
        """Train the grid, then probe the runs at each arm's best lr (a probe already made of a run is reused)."""
        done = train_grid(runs, self.keep_checkpoints, self.checkpoint_stand_in)
        rows = read_rows(runs, done, self.row)
        best = best_lr.best_lrs(rows, ARM, present(rows, ARM, tuple(ARMS.values())), select_or_inf)
        probed = [i for i, r in enumerate(rows) if (b := best.get(r[ARM])) and b.lr == best_lr.lr_of(r)]
        for i, found in zip(probed, probe_runs(runs, [done[i][0] for i in probed]), strict=True):
            rows[i].update(probe_row(found))
        return rows

    def make_stand_ins(self, runs: Plan, combos: list[dict[str, str]]) -> None:
        """Probe every finished T run about to be packed: which lr is an arm's best is known only once its grid
        is whole, and the next machine has no checkpoint to probe."""
        probe_runs(runs, combos)

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r[ARM] = arm_of(r)
        rows, half = robustness.budgets(rows)
        arms = present(rows, ARM, tuple(ARMS.values()))
        unigram = stats.unigram_of(rows)
        best = best_lr.best_lrs(rows, ARM, arms, select_or_inf)
        measured = self.quantities(rows, best, unigram)
        measured.update(robustness.primary_again(
            PRIMARY_QUANTITY, lambda rs, bs: {"L=24": best_lr.paired_at_best(rs, ARM, bs, LNS, PRE, stats.final_or_inf,
                                                                             stats.difference)},
            rows, half, ARM, [a for a in (PRE, LNS) if a in arms]))
        loss, skip = (measured[k]["L=24"] for k in (PRIMARY_QUANTITY, "lns_minus_pre_deep_skip_at_best"))
        ours = (f"final loss LNS − Pre-LN, each at its best lr: {stats.median_and_interval(loss.values())} nats; "
                f"deep-half skip Δ LNS − Pre-LN {stats.median_and_interval(skip.values())}")
        key = (f"{ours}; best lr: " + ", ".join(f"{a} {b.lr:g}" for a, b in best.items() if b.lr is not None) + ".")
        half_gap = measured.get(PRIMARY_QUANTITY + robustness.HALF, {}).get("L=24", {})
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *best_lr.rule_notes(rows, ARM, best),
                 *([f"At T/2 ({half[0]['steps']} steps), each arm at its own best lr there: LNS − Pre-LN final loss "
                    f"{stats.median_and_interval(half_gap.values())} nats."] if half else [])]
        at = [r for r in rows if (b := best.get(r[ARM])) and b.lr == best_lr.lr_of(r)]
        return Findings(table=self.table(rows, at, arms, best), measured=measured, key=key, ours=ours, notes=notes,
                        figures={"depth_profile.png": lambda path: self.draw(rows, at, arms, best, unigram, path)})

    @staticmethod
    def quantities(rows, best, unigram) -> dict[str, dict[str, dict[str, float | None]]]:
        """Every quantity the registration names, read at each arm's best lr (paired by seed where two arms)."""
        def paired(arm, reference, value, op):
            return best_lr.paired_at_best(rows, ARM, best, arm, reference, value, op) if {arm, reference} <= set(best) \
                else {}

        pre = best.get(PRE)
        curse = (best_lr.at_best(rows, ARM, pre, lambda r: stats.minus(r.get("cos_deep"), r.get("cos_early")))
                 if pre else {})
        return {"lns_minus_pre_loss_at_best": {"L=24": paired(LNS, PRE, stats.final_or_inf, stats.difference)},
                "lns_minus_pre_deep_skip_at_best": {"L=24": paired(LNS, PRE, "skip_deep", stats.minus)},
                "pre_minus_lns_deep_cos_at_best": {"L=24": paired(PRE, LNS, "cos_deep", stats.minus)},
                "pre_cos_deep_minus_early_at_best": {"L=24": curse},
                "reference_margin": {"L=24": stats.margin_below(unigram, best_lr.at_best(rows, ARM, pre,
                                                                                         stats.final_or_inf)
                                                                  if pre else {})},
                "best_lr_inside_grid": best_lr.inside_grid(best),
                "val_quarter_drop_at_best": {a: best_lr.at_best(rows, ARM, b, "val_quarter_drop")
                                             for a, b in best.items()}}

    @staticmethod
    def table(rows, at, arms, best) -> str:
        body = [[a, "–" if best[a].lr is None else f"{best[a].lr:g}" + (" (edge)" if best[a].at_edge else ""),
                 stats.cell([stats.final_or_inf(r) for r in mine], mine),
                 *[stats.median_and_interval(r.get(k) for r in mine)
                   for k in ("val_quarter_drop", "skip_early", "skip_deep", "cos_early", "cos_deep", "rms_exponent")]]
                for a in arms for mine in [stats.select(at, arm=a)]]
        return "\n\n".join([
            "The whole loss-vs-lr curve: final validation loss per arm and peak lr, median [range] over seeds (n); "
            f"**bold**: the arm's best lr by the selection rule:\n\n{best_lr.curve_table(rows, ARM, best)}",
            "The selection loss (the held-out windows' loss at the run's end), median [range] over seeds:\n\n"
            + best_lr.curve_table(rows, ARM, best, select_or_inf),
            f"Each arm at its best lr ({stats.CELL_NOTE}); the rest median [range] over seeds. Quarter fall: the "
            "validation loss's fall over the last quarter of the run. Skip Δ: the eval loss with one block skipped "
            "minus the full model's, averaged over the early or the deep half of the blocks (nats per byte); cos: "
            "the mean cosine of a block's input and output streams over that half; k: the exponent of Var(x_ℓ) ∝ ℓ^k "
            "of the stream after block ℓ (the probe's rms).\n\n"
            + markdown_table(["arm", "best lr", "final val loss", "quarter fall", "skip Δ early", "skip Δ deep",
                              "cos early", "cos deep", "k"], body)])

    @staticmethod
    def draw(rows, at, arms, best, unigram, path) -> None:
        """Per block at each arm's best lr: skip Δ, cosine, stream rms; its val curves; the loss-vs-lr curve."""
        fig, axes = plots.figure(ncols=5, width=4.2, height=3.3)
        ax_skip, ax_cos, ax_rms, ax_loss, ax_lr = axes[:5]
        for a in arms:
            chosen = stats.select(at, arm=a)
            for ax, key in ((ax_skip, "skip_profile"), (ax_cos, "cos_profile"), (ax_rms, "rms_profile")):
                profiles = [profile_values(r.get(key)) for r in chosen]
                if profiles and len({len(p) for p in profiles}) == 1 and profiles[0]:
                    plots.seeds_and_mean(ax, list(range(len(profiles[0]))), profiles, COLORS[a], a)
            label = f"{a} at lr {best[a].lr:g}" if best[a].lr is not None else a
            plots.curves(ax_loss, [curve_points(r["val_curve"]) for r in chosen if r["val_curve"]], COLORS[a], label)
        ax_skip.set_yscale("symlog", linthresh=1e-3)
        ax_rms.set_yscale("log")
        plots.unigram_line(ax_loss, unigram)
        plots.finish(ax_skip, "loss rise when block i is skipped (best lr)", "block i", "Δ val loss (nats/byte)")
        plots.finish(ax_cos, "cos(block input, output) (best lr)", "block i", "cosine")
        plots.finish(ax_rms, "stream rms after block i (best lr)", "block i", "rms")
        plots.finish(ax_loss, "val loss at each arm's best lr (RMSNorm)", "step", "val loss (nats/byte)")
        best_lr.draw_curves(ax_lr, rows, ARM, best, COLORS, unigram=unigram)
        plots.save(fig, path)
