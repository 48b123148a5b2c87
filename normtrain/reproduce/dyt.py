"""Zhu et al. 2025 (Transformers without Normalization): DyT = γ·tanh(α·x) + β against RMSNorm, each at its own best
learning rate (DyT also at its best α₀); and how much DyT's loss depends on α₀.

Every run is one arm of the best-lr machinery (normtrain/study/best_lr.py): RMSNorm, and DyT at each α₀ of the
grid (``dyt α₀=1`` ...). Each arm's best lr is chosen by the selection rule; DyT's best α₀ is the arm whose best lr
scores lowest by the same rule (the lowest median selection loss over the α₀ × lr grid), so α₀ is tuned on a rule
fixed before the runs, on training batches, never on the judged validation loss. DyT there is compared with RMSNorm
at RMSNorm's best lr, seed by seed.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import Experiment, Findings
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.claim import ALT, HALF
from normtrain.study.plan import Plan

REFERENCE = "rmsnorm"  # the paper's LLaMA baseline
DEFAULT_ALPHA = 0.5  # DyT's default α init; the reference norm runs with it (it does not use it)
ALPHA = "norm.alpha_init"
REGISTERED_ALPHAS = (0.125, 0.25, 0.5)  # the α₀ grid registered with v5; the secondary's range is over these alone
ARM_LRS = {"dyt": (2e-3, 5e-3, 1.25e-2), REFERENCE: (8e-4, 2e-3, 5e-3)}  # each around its v4 best (the YAML's axis)
EXTENDED_LRS = {0.5: (8e-4,)}  # DyT's α₀ -> lrs the registered edge rule added (CHECK_HISTORY entry 6)
ARM = "arm"
PRIMARY_QUANTITY = "dyt_minus_rms_at_best"
CONFIG = "dyt_config"  # DyT's α₀ × lr grid as one tuned key: the index of the configuration


def alpha_of(row: dict[str, Any]) -> float:
    return float(row.get(ALPHA, DEFAULT_ALPHA))


def arm_of(row: dict[str, Any]) -> str:
    """``rmsnorm`` (or another reference norm), or ``dyt α₀=A``: one lr curve each."""
    return f"dyt α₀={alpha_of(row):g}" if row.get("norm") == "dyt" else str(row.get("norm"))


def arm_alpha(arm: str) -> float:
    """The α₀ of a DyT arm's label (``dyt α₀=A``), the inverse of :func:`arm_of`."""
    return float(arm.split("=")[1])


def dyt_arms(rows: list[dict[str, Any]]) -> list[str]:
    """DyT's arms in the order of α₀."""
    return [f"dyt α₀={a:g}" for a in sorted({alpha_of(r) for r in rows if r.get("norm") == "dyt"})]


def registered_arms(arms: list[str]) -> list[str]:
    """DyT's arms at the registered α₀ (``REGISTERED_ALPHAS``), without the edge rule's extension."""
    return [a for a in arms if arm_alpha(a) in REGISTERED_ALPHAS]


def score_at_best(b: best_lr.BestLr) -> float | None:
    return None if b.lr is None else b.score.get(b.lr)


def best_alpha_arm(best: dict[str, best_lr.BestLr], arms: list[str]) -> str | None:
    """DyT's best α₀: the arm whose best lr has the lowest selection score (a tie goes to the smaller α₀)."""
    scored = [(s, i) for i, a in enumerate(arms) if (s := score_at_best(best[a])) is not None]
    return arms[min(scored)[1]] if scored else None


def alpha_inside(arms: list[str], chosen: str | None) -> dict[str, dict[str, float | None]]:
    """The precondition's quantity: 1.0 when DyT's best α₀ lies strictly inside its α₀ grid (≥ 3 points), else 0."""
    value = None if chosen is None else float(len(arms) >= 3 and chosen not in (arms[0], arms[-1]))
    return {"DyT": {best_lr.ALL_SEEDS: value}}


def alpha_range(rows: list[dict[str, Any]], arms: list[str], lr: float | None) -> dict[str, float | None]:
    """Per seed, DyT's worst final loss over the α₀ grid minus its best, all at ``lr`` (+∞ when a run diverged).
    ``arms`` is the grid: the registered one, not its extension, so that the secondary measures what it declared."""
    by_seed: dict[str, list[float]] = {}
    for r in rows:
        if arm_of(r) in arms and lr is not None and best_lr.lr_of(r) == lr and (v := stats.final_or_inf(r)) is not None:
            by_seed.setdefault(str(r["train.seed"]), []).append(v)
    return {s: max(v) - min(v) for s, v in by_seed.items() if len(v) == len(arms) > 1}


class DyT(Experiment):
    name = "dyt"
    title = "DyT against RMSNorm, each at its best learning rate, and DyT's α₀ (Zhu et al. 2025)"
    paper = "Zhu et al. 2025 (DyT)"
    reference = ("**Zhu et al. 2025**, *Transformers without Normalization* (CVPR 2025): the LLaMA results (DyT "
                 "on par with RMSNorm) and the α₀ ablations")
    method = ("Pre-LN, 6 layers, d 128, 4 heads, SwiGLU, RoPE; AdamW (0.9, 0.95), an 80-step (5%) warm-up then WSD "
              "(the peak to step 1280, then linearly to 10%), weight decay 0.1, clipping 1; 1600 steps of 8 × 128 "
              "bytes, evaluated every 5% on 512 fixed windows, and again at T/2 (800 steps, a decay branch from step "
              "640); RMSNorm at peak lrs 8e-4, 2e-3, 5e-3 and DyT (one scalar α per norm, γ = 1, β = 0 at init) at "
              "α₀ ∈ {0.125, 0.25, 0.5}, each at 2e-3, 5e-3, 1.25e-2; seeds 10–14. Each arm is judged at its own "
              "best lr, at each budget: " + best_lr.HELD_OUT_RULE + "; DyT's α₀ is the one whose best lr scores "
              "lowest by the same rule.")
    gpu_recipe = Recipe()
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)

    def keeps(self, combo: dict[str, str]) -> bool:
        norm, lr = combo.get("norm", "dyt"), combo.get(best_lr.LR_AXIS)
        if norm != "dyt" and alpha_of(combo) != DEFAULT_ALPHA:
            return False  # the reference does not use α₀: one of its values
        if norm not in ARM_LRS or lr is None:
            return True
        lrs = ARM_LRS[norm] + (EXTENDED_LRS.get(alpha_of(combo), ()) if norm == "dyt" else ())
        return any(math.isclose(float(lr), x) for x in lrs)

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), ARM: arm_of(combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r[ARM] = arm_of(r)
        rows, half = robustness.budgets(rows)
        dyts = dyt_arms(rows)
        refs = [a for a in (REFERENCE,) if any(r[ARM] == a for r in rows)]
        best = best_lr.best_lrs(rows, ARM, [*refs, *dyts], select_or_inf)
        pick = best_alpha_arm(best, dyts)
        unigram = stats.unigram_of(rows)
        measured = {**quantities(rows, best, refs, dyts, pick, unigram), **again(rows, half, best, refs, dyts, pick)}
        gap = measured[PRIMARY_QUANTITY][""]
        picked = "none" if pick is None else f"{pick} at lr {best[pick].lr:g}"
        ours = f"DyT ({picked}) − RMSNorm at its best lr: {stats.median_and_interval(gap.values())} nats"
        rng = measured["dyt_alpha_range"]
        spread = stats.median_and_interval(next(iter(rng.values())).values())
        key = f"{ours}; DyT's α₀ range ({REGISTERED_ALPHAS[0]:g}–{REGISTERED_ALPHAS[-1]:g}) at its best lr {spread}."
        half_gap = measured.get(PRIMARY_QUANTITY + HALF, {}).get("", {})
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}. DyT's α₀: the arm whose best lr "
                 "scores lowest by the same rule.",
                 *(note for a in [*refs, pick] if a and (note := best[a].edge_note())),
                 *best_lr.judged_pick_notes(rows, ARM, best),
                 *([f"At T/2 ({half[0]['steps']} steps), each arm and DyT's α₀ chosen again there: DyT − RMSNorm "
                    f"{stats.median_and_interval(half_gap.values())} nats."] if half else []),
                 f"DyT's best α₀ and lr are chosen from {len(dyts) * len(best[dyts[0]].lrs) if dyts else 0} "
                 f"configurations, RMSNorm's lr from {len(best[REFERENCE].lrs) if refs else 0}: the larger search "
                 "favours DyT by a little seed noise (the rule reads held-out windows, the judged loss others)."]
        return Findings(table=table(rows, best, refs, pick, dyts), measured=measured, key=key, ours=ours,
                        notes=notes, figures={"dyt_alpha.png": lambda path: draw(rows, best, refs, pick, unigram,
                                                                                 path)})


def gap_at(rows, best, pick) -> dict[str, float | None]:
    """The primary per seed: DyT at ``pick`` (an α₀ arm at its lr in ``best``) − RMSNorm at its best lr."""
    return best_lr.paired_at_best(rows, ARM, best, pick, REFERENCE) if pick and REFERENCE in best else {}


def again(rows, half, best, refs, dyts, pick) -> dict[str, dict[str, dict[str, float | None]]]:
    """The primary at a near-tied RMSNorm lr, at DyT's near-tied configuration (α₀ and lr) and at T/2, keyed as
    normtrain/study/claim.py reads them."""
    found = {PRIMARY_QUANTITY + ALT + label: {"": gap_at(rows, moved, pick)}
             for label, moved in best_lr.near_tied(rows, ARM, best, refs, select_or_inf).items()}
    if (second := dyt_runner_up(rows, dyts)) is not None:
        arm, lr = second
        moved = {**best, arm: best_lr.BestLr(arm, best[arm].lrs, best[arm].score, lr)}
        found[f"{PRIMARY_QUANTITY}{ALT}DyT at its runner-up {arm} lr {lr:g}"] = {"": gap_at(rows, moved, arm)}
    if half:
        half_best = best_lr.best_lrs(half, ARM, [*refs, *dyts], select_or_inf)
        found[PRIMARY_QUANTITY + HALF] = {"": gap_at(half, half_best, best_alpha_arm(half_best, dyts))}
    return found


def dyt_runner_up(rows, dyts) -> tuple[str, float] | None:
    """DyT's second-best configuration (α₀ arm, lr) when near-tied with its pick: best_lr.runner_up's rule over the
    α₀ × lr grid read as one tuned key."""
    configs = sorted({(arm_alpha(r[ARM]), best_lr.lr_of(r)) for r in rows if r[ARM] in dyts})
    one = [{**r, ARM: "dyt", CONFIG: configs.index((arm_alpha(r[ARM]), best_lr.lr_of(r)))} for r in rows
           if r[ARM] in dyts]
    if not one:
        return None
    chosen = best_lr.choose(one, ARM, "dyt", select_or_inf, key=CONFIG)
    second, _, _ = best_lr.runner_up(one, ARM, chosen, select_or_inf)
    if second is None:
        return None
    alpha, lr = configs[int(second)]
    return f"dyt α₀={alpha:g}", lr


def quantities(rows, best, refs, dyts, pick, unigram) -> dict[str, dict[str, dict[str, float | None]]]:
    """Every quantity the registration names: DyT at its best α₀ and lr against RMSNorm at its best lr."""
    ref = best.get(REFERENCE)
    chosen = {a: best[a] for a in [*refs, pick] if a}
    gap = best_lr.paired_at_best(rows, ARM, best, pick, REFERENCE) if pick and ref else {}
    reference = best_lr.at_best(rows, ARM, ref, stats.final_or_inf) if ref else {}
    return {PRIMARY_QUANTITY: {"": gap},
            "dyt_alpha_range": {"DyT's best lr": alpha_range(rows, registered_arms(dyts), best[pick].lr if pick
                                                             else None)},
            "reference_margin": {"": stats.margin_below(unigram, reference)},
            "best_lr_inside_grid": best_lr.inside_grid(chosen),
            "best_alpha_inside_grid": alpha_inside(dyts, pick),
            "val_quarter_drop_at_best": {a: best_lr.at_best(rows, ARM, b, "val_quarter_drop")
                                         for a, b in chosen.items()}}


def table(rows, best, refs, pick, dyts) -> str:
    body = []
    for a in [*refs, *dyts]:
        b = best[a]
        mine = best_lr.runs_at_best(rows, ARM, b)
        body.append([a + (" (DyT's pick)" if a == pick else ""),
                     best_lr.lr_text(b),
                     stats.cell([stats.final_or_inf(r) for r in mine], mine),
                     stats.median_and_interval(best_lr.paired_at_best(rows, ARM, best, a, REFERENCE).values())
                     if refs and a != REFERENCE else "–",
                     stats.median_and_interval(r.get("val_quarter_drop") for r in mine)])
    return "\n\n".join([
        "The whole loss-vs-lr curve: final validation loss per arm (RMSNorm; DyT at each α₀) and peak lr, median "
        f"[range] over seeds (n); **bold**: the arm's best lr by the selection rule:\n\n"
        f"{best_lr.curve_table(rows, ARM, best)}",
        "The selection loss (the held-out windows' loss at the run's end), median [range] over seeds (DyT's α₀: "
        "the arm whose bold value is lowest):\n\n" + best_lr.curve_table(rows, ARM, best, select_or_inf),
        f"Each arm at its best lr ({stats.CELL_NOTE}); the rest median [range] over seeds:\n\n"
        + markdown_table(["arm", "best lr", "final val loss", "− RMSNorm at its best lr, paired by seed",
                          "val loss fall over the last quarter"], body)])


def draw(rows, best, refs, pick, unigram, path) -> None:
    """Left: final loss against lr per arm; middle: against α₀ at DyT's best lr; right: val curves at the best."""
    fig, axes = plots.figure(ncols=3, width=4.4, height=3.6)
    colors = {a: plots.NORM_COLORS.get(a, "k") for a in best}
    shades = ("#ff9896", "#d62728", "#8c564b", "#e377c2", "#7f7f7f")
    colors.update({a: shades[i % len(shades)] for i, a in enumerate(x for x in best if x not in refs)})
    best_lr.draw_curves(axes[0], rows, ARM, best, colors, unigram=unigram)
    lr = best[pick].lr if pick else None
    dyts = [a for a in best if a not in refs]
    per_seed: dict[str, dict[str, float]] = {}
    for r in rows:
        if r[ARM] in dyts and lr is not None and best_lr.lr_of(r) == lr and (v := stats.final_or_inf(r)) is not None:
            per_seed.setdefault(str(r["train.seed"]), {})[r[ARM]] = v
    alphas = [arm_alpha(a) for a in dyts]
    plots.seeds_and_mean(axes[1], alphas, [[s.get(a) for a in dyts] for s in per_seed.values()],
                         plots.NORM_COLORS.get("dyt", "k"), f"DyT at lr {lr:g}" if lr else "DyT")
    for a in refs:
        vals = stats.finite(best_lr.at_best(rows, ARM, best[a], stats.final_or_inf).values())
        if vals:
            axes[1].axhline(statistics.median(vals), color=colors[a], ls="--", lw=1.5, label=f"{a} at its best lr")
    if alphas:
        plots.log_axis(axes[1], alphas)
    plots.finish(axes[1], "final val loss vs DyT's α₀ (thin: seeds)", "α₀", "val loss (nats/byte)")
    for a in [*refs, pick]:
        if a and best[a].lr is not None:
            mine = best_lr.val_curves_at_best(rows, ARM, best[a])
            plots.curves(axes[2], mine, colors[a], f"{a} at lr {best[a].lr:g}")
    plots.unigram_line(axes[2], unigram)
    plots.finish(axes[2], "val loss at the best lr (thin: seeds)", "step", "val loss (nats/byte)")
    plots.save(fig, path)
