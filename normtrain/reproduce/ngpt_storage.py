"""nGPT (Loshchilov et al., ICLR 2025) against Pre-LN, each with fp32 and with bf16 parameter storage: how much of
nGPT's lead over the baseline does bf16 storage explain?

Four arms, ``placement/storage``: ``pre/float32``, ``pre/bfloat16``, ``ngpt/float32``, ``ngpt/bfloat16``, each
trained at three learning rates (its own grid) and compared at its own best lr (normtrain/study/best_lr.py). v5's
bf16 storage computes in fp32 (``train.param_rounding=bfloat16``: the values rounded after each step,
normtrain/training/rounding.py), so storage is not confounded with compute; v4's ``train.param_dtype`` rows are read
too, as the arm of their storage.
The gap of a storage is Pre-LN's final loss − nGPT's at that storage (positive: nGPT ahead), seed by seed; the
primary quantity is how much the gap grows when both are stored in bf16:

    storage_gap_change(s) = [Pre(bf16, s) − nGPT(bf16, s)] − [Pre(fp32, s) − nGPT(fp32, s)],

each arm at its own best lr, seed s of every arm (the seeds pair the data order and the init draws, not the
weights: the arms are different models). The paper's own measure, steps to reach the baseline's loss, is reported:
the first evaluation (every 5% of the run) at which nGPT's validation loss is at or below Pre-LN's final one, and
the run's length over it (``steps_to_reach``, ``step_speedup``).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import Experiment, Findings, curve_points
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, significance, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.plan import Plan
from normtrain.util.numbers import number

ARMS = ("pre/float32", "pre/bfloat16", "ngpt/float32", "ngpt/bfloat16")
STORAGES = ("float32", "bfloat16")
RECIPE = {"pre": {"optim.weight_decay": 0.1, "optim.warmup_steps": 80},  # the project's AdamW, a 5% warm-up
          "ngpt": {"optim.weight_decay": 0.0, "optim.warmup_steps": 0}}  # the paper's: neither (§2.6)
# Each around its v4 best (v5); nGPT's 3e-3 is the registered edge rule's first point (CHECK_HISTORY entry 4):
# its best, 1e-2, was the grid's smallest with both storages.
LRS = {"pre": (3e-3, 1e-2, 3e-2), "ngpt": (3e-3, 1e-2, 3e-2, 1e-1)}
ROUNDING = "train.param_rounding"
PRIMARY_QUANTITY = "storage_gap_change"
COLORS = {"pre/float32": "#1f77b4", "pre/bfloat16": "#9ecae1", "ngpt/float32": "#d62728", "ngpt/bfloat16": "#fc9272"}


def arm_of(combo: dict[str, Any]) -> str:
    """``placement/storage``: v5's rounded storage (``train.param_rounding``) or v4's ``train.param_dtype``."""
    rounded = str(combo.get(ROUNDING, "null")).lower() not in ("null", "none", "")
    return f"{combo['placement']}/{'bfloat16' if rounded else combo.get('train.param_dtype', 'float32')}"


def in_recipe(combo: dict[str, str]) -> bool:
    """A combination of the grid's product that this experiment runs: the optimizer settings of its placement's
    recipe and an lr of its placement's grid (the sweep's other combinations mix the recipes)."""
    placement = combo.get("placement", "pre")
    fixed = RECIPE.get(placement, {})
    if "optim.weight_decay" in combo and float(combo["optim.weight_decay"]) != fixed.get("optim.weight_decay"):
        return False
    if "optim.warmup_steps" in combo and (float(combo["optim.warmup_steps"]) > 0) != (fixed.get(
            "optim.warmup_steps", 0) > 0):  # a warm-up or none: --scale gpu stretches its length with the run
        return False
    return "optim.lr" not in combo or float(combo["optim.lr"]) in LRS.get(placement, ())


def steps_to_reach(curve: list[tuple[float, float]], target: float | None) -> float | None:
    """The first evaluated step at which the validation loss is at or below ``target`` (None: never, or no
    target)."""
    if target is None:
        return None
    return next((step for step, loss in curve if loss <= target), None)


def step_speedup(ngpt_curve: list[tuple[float, float]], baseline_final: float | None, steps: float) -> float | None:
    """The paper's measure on one pair: the run's length over the steps nGPT took to reach the baseline's final
    loss (1: only at the end; None: never; the evaluation grid, every 5%, bounds it at 20)."""
    reached = steps_to_reach(ngpt_curve, baseline_final)
    return steps / reached if reached else None


def gaps(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr]) -> dict[str, dict[str, float | None]]:
    """Per storage, per seed: Pre-LN − nGPT, each at its arm's best lr (positive: nGPT ahead)."""
    return {s: best_lr.paired_at_best(rows, "arm", best, f"pre/{s}", f"ngpt/{s}") if {f"pre/{s}", f"ngpt/{s}"}
            <= set(best) else {} for s in STORAGES}


def gap_change(gap_bf16: dict[str, float | None], gap_fp32: dict[str, float | None]) -> dict[str, float | None]:
    """The primary quantity per seed: the bf16 gap minus the fp32 gap (None where either is missing)."""
    return stats.paired(gap_bf16, gap_fp32, stats.minus)


class NgptStorage(Experiment):
    name = "ngpt_storage"
    title = "nGPT vs Pre-LN with fp32 and bf16 parameter storage (NVIDIA's caveat)"
    paper = "Loshchilov et al. 2025 (nGPT); NVIDIA/ngpt README"
    reference = ("**Loshchilov, Hsieh, Sun & Ginsburg 2025**, *nGPT: Normalized Transformer with Representation "
                 "Learning on the Hypersphere* (ICLR 2025), Fig. 1 and §4; and the caveat in the README of "
                 "NVIDIA's reimplementation (github.com/NVIDIA/ngpt)")
    method = ("Pre-LN (RMSNorm; AdamW (0.9, 0.95), weight decay 0.1, a 5% warm-up) and nGPT (its paper's AdamW: no "
              "weight decay, no warm-up), both WSD to 0 (the peak to step 1280, then linearly to 0), clip 1, a "
              "4-layer model (d 64, 4 heads, SwiGLU, RoPE), 1600 steps of 16 × 128 bytes (the same steps and tokens "
              "for every arm), evaluated every 5% on 512 fixed windows, and again at T/2 (800 steps, a decay "
              "branch from step 640); each with fp32 storage and with bf16 storage computed in fp32 "
              "(`train.param_rounding=bfloat16`: parameters and AdamW's moments rounded to bf16 after each step); "
              "Pre-LN at lr 3e-3, 1e-2, 3e-2, nGPT at 1e-2, 3e-2, 1e-1 and the edge rule's 3e-3, seeds 10–14. Each "
              "arm is judged at its own best lr, at each budget: " + best_lr.HELD_OUT_RULE + ".")
    gpu_recipe = Recipe(width=4.0)  # d 256 (4 heads of 64), batch × 2: the claim is about scale
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)

    def keeps(self, combo: dict[str, str]) -> bool:
        return in_recipe(combo)

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), "arm": arm_of(combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}

    def committed_row(self, row: dict[str, str]) -> dict[str, str] | None:
        """v4's rows stored in bf16 computed in bf16 too (about twice a step's time on a CPU): only its fp32 rows
        time today's runs, as the arm of no rounding."""
        if row.get("train.param_dtype", "float32") != "float32":
            return None
        return {**row, ROUNDING: row.get(ROUNDING, "null")}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["arm"] = arm_of(r)
        rows, half = robustness.budgets(rows)
        arms = [a for a in ARMS if any(r["arm"] == a for r in rows)]
        best = best_lr.best_lrs(rows, "arm", arms, select_or_inf)
        unigram = stats.unigram_of(rows)
        gap = gaps(rows, best)
        cost = {p: best_lr.paired_at_best(rows, "arm", best, f"{p}/bfloat16", f"{p}/float32") for p in RECIPE}
        speedup = {s: self.speedups(rows, best, s) for s in STORAGES}
        ref = best_lr.at_best(rows, "arm", best["pre/float32"], stats.final_or_inf) if "pre/float32" in best else {}
        measured = {PRIMARY_QUANTITY: {"": gap_change(gap["bfloat16"], gap["float32"])},
                    "ngpt_gain_fp32": {"": gap["float32"]}, "ngpt_gain_bf16": {"": gap["bfloat16"]},
                    "bf16_cost_pre": {"": cost["pre"]}, "bf16_cost_ngpt": {"": cost["ngpt"]},
                    "step_speedup": {s: v for s, v in speedup.items()},
                    "reference_margin": {"Pre-LN (fp32)": stats.margin_below(unigram, ref)},
                    "best_lr_inside_grid": best_lr.inside_grid(best),
                    **robustness.primary_again(PRIMARY_QUANTITY, lambda rs, bs: {"": gap_change(
                        *(gaps(rs, bs)[s] for s in ("bfloat16", "float32")))}, rows, half, "arm", arms)}
        change = stats.median_and_interval(measured[PRIMARY_QUANTITY][""].values())
        ours = (f"gap Pre-LN − nGPT, bf16 − fp32 storage, each arm at its best lr: {change} nats; the fp32 gap "
                f"{stats.median_and_interval(gap['float32'].values())}, the bf16 gap "
                f"{stats.median_and_interval(gap['bfloat16'].values())}")
        table = self.tables(rows, best, gap, cost, speedup)
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *best_lr.rule_notes(rows, "arm", best)]
        return Findings(table=table, measured=measured, key=ours + ".", ours=ours, notes=notes,
                        figures={"ngpt_storage.png": lambda path: self.draw(rows, best, unigram, path)})

    @staticmethod
    def speedups(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr], storage: str) -> dict[str, float | None]:
        """Per seed, at each arm's best lr: steps / (steps nGPT took to reach Pre-LN's final loss), one storage."""
        pre, ngpt = best.get(f"pre/{storage}"), best.get(f"ngpt/{storage}")
        if pre is None or ngpt is None:
            return {}
        target = best_lr.at_best(rows, "arm", pre, stats.final_or_inf)
        curves = best_lr.at_best(rows, "arm", ngpt, lambda r: r.get("val_curve") or None)
        return {s: step_speedup(points, target.get(s), points[-1][0])
                for s, c in curves.items() if c and (points := curve_points(c))}

    @staticmethod
    def tables(rows, best, gap, cost, speedup) -> str:
        at_best = []
        for arm, b in best.items():
            loss = best_lr.at_best(rows, "arm", b, stats.final_or_inf)
            mine = best_lr.runs_at_best(rows, "arm", b)
            at_best.append([arm, "–" if b.lr is None else f"{b.lr:g}" + (" (edge)" if b.at_edge else ""),
                            stats.cell(loss.values(), mine)])
        paired = [[name, stats.median_and_interval(v.values()), t_text(v.values())]
                  for name, v in (("Pre-LN − nGPT, fp32 storage", gap["float32"]),
                                  ("Pre-LN − nGPT, bf16 storage", gap["bfloat16"]),
                                  ("Pre-LN bf16 − fp32", cost["pre"]), ("nGPT bf16 − fp32", cost["ngpt"]),
                                  ("gap change (bf16 gap − fp32 gap)", gap_change(gap["bfloat16"], gap["float32"])))]
        speed = [[s, stats.median_and_interval(v.values())] for s, v in speedup.items()]
        return "\n\n".join([
            "The whole loss-vs-lr curve: final validation loss per arm and peak lr, median [range] over seeds (n); "
            f"**bold**: the arm's best lr by the selection rule:\n\n{best_lr.curve_table(rows, 'arm', best)}",
            f"Each arm at its best lr ({stats.CELL_NOTE}):\n\n"
            f"{markdown_table(['arm', 'best lr', 'final val loss'], at_best)}",
            "Paired by seed, each arm at its best lr (nats; positive gap: nGPT ahead):\n\n"
            f"{markdown_table(['difference', 'median [range]', 'mean, one-sided t-test of > 0'], paired)}",
            "The paper's measure, reported: run length / steps nGPT took to reach Pre-LN's final loss (evaluations "
            f"every 5%: at most 20; none where it never did), per seed:\n\n"
            f"{markdown_table(['storage', 'speed-up, median [range]'], speed)}"])

    @staticmethod
    def draw(rows, best, unigram, path) -> None:
        """Left: validation curves at each arm's best lr; right: final loss against lr."""
        fig, axes = plots.figure(ncols=2, width=4.6, height=3.6)
        best_lr.draw_val_at_best(axes[0], rows, "arm", best, COLORS, unigram, "val loss at each arm's best lr (thin: "
                                 "seeds)", style=lambda arm: "--" if arm.endswith("bfloat16") else "-")
        best_lr.draw_curves(axes[1], rows, "arm", best, COLORS, unigram=unigram)
        plots.save(fig, path)


def t_text(values) -> str:
    """The mean and the one-sided t-test of mean > 0 (p), for a paired difference over seeds."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    found = significance.t_test(vals) if vals else None
    if found is None:
        return "–"
    return f"{number(statistics.fmean(vals))} (t = {found[0]:.2f}, df {found[1]}, p = {found[2]:.3g})"
