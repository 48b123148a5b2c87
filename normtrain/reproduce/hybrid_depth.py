"""HybridNorm past 16 layers (issue 39; v5, issue 59): once HybridNorm reproduces the paper's ordering at 12 layers
(inside its depths, with the reference's init and a warm-up a Post-LN FFN needs), does it train at 24 (and 48)
layers where Pre-LN does, each at its own best learning rate?

Zhuo et al. 2025 trained HybridNorm at most 16 layers deep; a reimplementation reports divergence deeper. Every arm
(Pre-LN, HybridNorm, HybridNorm*) runs at every depth and at 3 learning rates of its own (a pilot put HybridNorm's
best a factor 10 below Pre-LN's: ``ARM_LRS``); at each depth each arm's best lr is picked by the rule of
normtrain/study/best_lr.py, and the arms are compared there seed by seed. Beside the best-against-best losses
the analysis counts, per seed, the learning rates at which HybridNorm diverged while Pre-LN at the same lr and seed
did not ("diverges where Pre-LN trains"), and how HybridNorm's gap to Pre-LN moves from 12 layers to the deeper
ones. At the CPU scale HybridNorm* (a secondary arm) does not run, and 48 layers run 3 seeds (``keeps_at``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import Experiment, Findings
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.claim import ALT, HALF
from normtrain.study.plan import SEED_AXIS, Plan, sweep_axes

ARM = "arm"  # the runs.csv column naming the arm (from placement and placement.first_pre)
FIRST_PRE = "placement.first_pre"
DEPTH = "model.n_layers"
ARMS = ("pre", "hybrid", "hybrid*")
PRIMARY = ("pre", "hybrid")  # the primary check's arms: the preconditions read these
PAPER_MAX_DEPTH = 16  # the deepest model the paper trained: deeper is what the claim is about
ARM_LRS = {"pre": (3e-3, 1e-2, 3e-2),  # each arm's peak lrs around its v4 bests (the YAML's axis is their union)
           "hybrid": (3e-4, 1e-3, 3e-3), "hybrid*": (3e-4, 1e-3, 3e-3)}
CPU_STAR_DEPTHS: tuple[int, ...] = ()  # HybridNorm*'s depths at the CPU scale (v5: none; --scale gpu: every depth)
CPU_FEW_SEEDS = {48: 3}  # depth -> how many of the grid's seeds run there at the CPU scale (the budget)
# The registered edge rule's extensions at the CPU scale, (arm, depth) -> the added lrs (CHECK_HISTORY.md).
CPU_EXTENSION: dict[tuple[str, int], tuple[float, ...]] = {  # v5's first (CHECK_HISTORY entry 6): one point past
    ("hybrid", 12): (1e-2,), ("pre", 24): (1e-3,), ("pre", 48): (1e-3,)}  # each edge best, on the other arm's grid
PRIMARY_QUANTITY, PRIMARY_DEPTH, DEEPER_DEPTH = "hybrid_minus_pre_24", 24, 48
COLORS = {"pre": plots.PLACEMENT_COLORS["pre"], "hybrid": "#8c564b", "hybrid*": "#e377c2"}


def arm_of(combo: dict[str, Any]) -> str:
    """``pre``, ``hybrid`` (HybridNorm) or ``hybrid*`` (HybridNorm*: ``placement.first_pre=true``)."""
    if combo.get("placement") == "hybrid":
        return "hybrid*" if str(combo.get(FIRST_PRE)).lower() == "true" else "hybrid"
    return str(combo.get("placement", "pre"))


def diverged_where_reference_trains(rows: list[dict[str, Any]], arm: str, reference: str = "pre"
                                    ) -> dict[str, float | None]:
    """Per seed: how many learning rates the arm diverged at while the reference, at the same lr and seed, did
    not (None for a seed with no lr run by both)."""
    def status(a: str) -> dict[tuple[str, float], bool]:
        return {(str(r["train.seed"]), best_lr.lr_of(r)): r.get("status") == "diverged"
                for r in best_lr.arm_rows(rows, ARM, a)}

    mine, ref = status(arm), status(reference)
    out: dict[str, float | None] = {}
    for seed in sorted({s for s, _ in mine}, key=str):
        shared = [key for key in mine if key[0] == seed and key in ref]
        out[seed] = float(sum(mine[k] and not ref[k] for k in shared)) if shared else None
    return out


def in_design(combo: dict[str, str], extension: dict[tuple[str, int], tuple[float, ...]] | None = None) -> bool:
    """The part of the grid's product that is run: each arm at its own lrs (and, per arm and depth, the
    ``extension``'s), and no HybridNorm* form of Pre-LN."""
    if combo.get("placement") != "hybrid" and str(combo.get(FIRST_PRE, "null")).lower() not in ("null", "none"):
        return False
    arm = arm_of(combo)
    lrs = ARM_LRS.get(arm)
    if lrs is None or "optim.lr" not in combo:
        return True
    if extension and DEPTH in combo:
        lrs = (*lrs, *extension.get((arm, int(combo[DEPTH])), ()))
    return any(math.isclose(float(combo["optim.lr"]), lr) for lr in lrs)


def listed(conditions: dict[str, dict[str, float | None]]) -> str:
    """``24 layers median … (range …); 48 layers …``: each condition's median over seeds and its interval."""
    return "; ".join(f"{c} {stats.median_and_interval(v.values())}" for c, v in conditions.items()) or "–"


class Depth:
    """One depth's rows, its arms' best lrs (the held-out score) and the values at them."""

    def __init__(self, rows: list[dict[str, Any]], layers: int, unigram: float | None):
        self.layers, self.unigram = layers, unigram
        self.rows = stats.select(rows, model__n_layers=layers)
        self.arms = [a for a in ARMS if any(r[ARM] == a for r in self.rows)]
        self.best = best_lr.best_lrs(self.rows, ARM, self.arms, select_or_inf)

    @property
    def deep(self) -> bool:
        return self.layers > PAPER_MAX_DEPTH

    def minus_pre(self, arm: str, best: dict[str, best_lr.BestLr] | None = None) -> dict[str, float | None]:
        best = best or self.best
        return best_lr.paired_at_best(self.rows, ARM, best, arm, "pre") if {arm, "pre"} <= set(best) else {}

    def loss(self, arm: str) -> dict[str, float | None]:
        return best_lr.at_best(self.rows, ARM, self.best[arm], stats.final_or_inf) if arm in self.best else {}


def measured_of(depths: list[Depth]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Every quantity the registration names, per condition (a depth, or an arm at a depth) and seed."""
    deep, shallow = [d for d in depths if d.deep], [d for d in depths if not d.deep]
    base = shallow[0].minus_pre("hybrid") if shallow else {}
    at = {d.layers: d for d in depths}
    return {
        PRIMARY_QUANTITY: {f"{PRIMARY_DEPTH} layers": at[PRIMARY_DEPTH].minus_pre("hybrid")} if PRIMARY_DEPTH in at
        else {},
        "hybrid_minus_pre_deeper": {f"{DEEPER_DEPTH} layers": at[DEEPER_DEPTH].minus_pre("hybrid")
                                    if DEEPER_DEPTH in at else {}},  # a smoke run's grid stops at 24
        "hybrid_minus_pre_deep": {f"{d.layers} layers": d.minus_pre("hybrid") for d in deep},
        "hybrid_minus_pre_shallow": {f"{d.layers} layers": d.minus_pre("hybrid") for d in shallow},
        "hybrid_gap_growth_deep": {f"{d.layers} − {shallow[0].layers} layers": stats.paired(
            d.minus_pre("hybrid"), base, stats.difference) for d in deep if shallow},
        "star_minus_pre_deep": {f"{d.layers} layers": d.minus_pre("hybrid*") for d in deep if "hybrid*" in d.best},
        "hybrid_diverged_where_pre_trains": {f"{d.layers} layers": diverged_where_reference_trains(d.rows, "hybrid")
                                             for d in deep},
        "reference_margin": {f"Pre-LN, {d.layers} layers": stats.margin_below(d.unigram, d.loss("pre"))
                             for d in depths},
        "best_lr_inside_grid": {f"{a}, {d.layers} layers": best_lr.inside_grid({a: d.best[a]})[a]
                                for d in depths for a in PRIMARY if a in d.best},
        "val_quarter_drop_at_best": {f"{a}, {d.layers} layers": best_lr.at_best(d.rows, ARM, d.best[a],
                                                                                 "val_quarter_drop")
                                     for d in depths for a in PRIMARY if a in d.best},
    }


def primary_again(depths: list[Depth], half: list[Depth]) -> dict[str, dict[str, dict[str, float | None]]]:
    """The primary (HybridNorm − Pre-LN at 24 layers) with each near-tied runner-up lr and at T/2 (claim.py)."""
    where = f"{PRIMARY_DEPTH} layers"
    found: dict[str, dict[str, dict[str, float | None]]] = {}
    for d in (d for d in depths if d.layers == PRIMARY_DEPTH):
        for label, moved in best_lr.near_tied(d.rows, ARM, d.best, [a for a in PRIMARY if a in d.best],
                                              select_or_inf).items():
            found[PRIMARY_QUANTITY + ALT + label] = {where: d.minus_pre("hybrid", moved)}
    for d in (d for d in half if d.layers == PRIMARY_DEPTH):
        found[PRIMARY_QUANTITY + HALF] = {where: d.minus_pre("hybrid")}
    return found


class HybridDepth(Experiment):
    name = "hybrid_depth"
    title = "HybridNorm and HybridNorm* against Pre-LN at 12, 24 and 48 layers (Zhuo et al. 2025)"
    paper = "Zhuo et al. 2025 (HybridNorm)"
    reference = ("**Zhuo et al. 2025**, *HybridNorm: Towards Stable and Efficient Transformer Training via Hybrid "
                 "Normalization* (NeurIPS 2025, arXiv 2503.04598; code BryceZhuo/HybridNorm): dense models of at "
                 "most 16 layers")
    method = ("RMSNorm; Pre-LN and HybridNorm (per-head QKV-norm, Post-LN around the FFN) at 12, 24 and 48 layers "
              "of a narrow model (d 64, 4 heads, GELU FFN 128, RoPE), the reference's init (`model.init=gpt2`: "
              "N(0, 0.02²), each block's output projections ÷ √(2L)); AdamW (0.9, 0.95), weight decay 0.1, clipping "
              "1, a 100-step warm-up then WSD (the peak to step 480, then linearly to 10%); 600 steps of 8 × 128 "
              "bytes, evaluated every 5% on 128 fixed windows, and again at T/2 (300 steps, a decay branch from "
              "step 240); Pre-LN at peak lr 3e-3, 1e-2 and 3e-2, HybridNorm at 3e-4, 1e-3 and 3e-3 (each around its "
              "v4 bests); seeds 10–14 (48 layers: 10–12); HybridNorm* (block 0 Pre-LN) at `--scale gpu` only. At "
              "each depth and budget each arm is judged at its own best lr: " + best_lr.HELD_OUT_RULE + ".")
    gpu_recipe = Recipe(depth=1.0)  # width × 2 and tokens × 2 (the defaults); depth is the axis compared
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)

    def keeps(self, combo: dict[str, str]) -> bool:
        return in_design(combo)

    def keeps_at(self, scale: str) -> Callable[[dict[str, str]], bool]:
        """At the CPU scale HybridNorm* (secondary) runs at ``CPU_STAR_DEPTHS`` only (none), 48 layers run their
        first seeds only (``CPU_FEW_SEEDS``), and the registered grid has its extension (``CPU_EXTENSION``);
        --scale gpu runs the registered grid at every depth."""
        if scale != "cpu":
            return self.keeps
        seeds = [int(s) for s in sweep_axes(self.name).get(SEED_AXIS, [])]

        def keep(combo: dict[str, str]) -> bool:
            depth = int(combo[DEPTH]) if DEPTH in combo else None
            few = CPU_FEW_SEEDS.get(depth)
            return (in_design(combo, CPU_EXTENSION) and (arm_of(combo) != "hybrid*" or depth in CPU_STAR_DEPTHS)
                    and (few is None or SEED_AXIS not in combo or int(combo[SEED_AXIS]) in seeds[:few]))
        return keep

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), ARM: arm_of(combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        rows, half_rows = robustness.budgets(rows)
        unigram = stats.unigram_of(rows)
        depths = [Depth(rows, n, unigram) for n in sorted({int(r[DEPTH]) for r in rows})]
        half = [Depth(half_rows, n, unigram) for n in sorted({int(r[DEPTH]) for r in half_rows})]
        measured = {**measured_of(depths), **primary_again(depths, half)}
        ours = (f"HybridNorm − Pre-LN at each one's best lr: {listed(measured['hybrid_minus_pre_shallow'])} (the "
                f"control); {listed(measured['hybrid_minus_pre_deep'])} nats")
        diverged = sum(r.get("status") == "diverged" for r in rows if r[ARM] != "pre")
        key = (f"{ours}; the HybridNorm gap's growth with depth: {listed(measured['hybrid_gap_growth_deep'])}; "
               f"at T/2, 24 layers: {listed(measured.get(PRIMARY_QUANTITY + HALF, {}))}; {diverged} HybridNorm(*) "
               "runs diverged in all.")
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *(n for d in depths for n in best_lr.rule_notes(d.rows, ARM, d.best, f"{d.layers} layers: "))]
        return Findings(table=self.table(depths), measured=measured, key=key, ours=ours, notes=notes,
                        figures={"hybrid_depth.png": lambda path: self.draw(depths, path)})

    @staticmethod
    def table(depths: list[Depth]) -> str:
        parts = []
        for d in depths:
            body = []
            for a, b in d.best.items():
                mine = best_lr.runs_at_best(d.rows, ARM, b)
                body.append([a, best_lr.lr_text(b),
                             stats.cell(d.loss(a).values(), mine),
                             "–" if a == "pre" else stats.median_and_interval(d.minus_pre(a).values())])
            parts += [f"**{d.layers} layers**: final validation loss against lr (median [range] over seeds; the "
                      "rule's best in bold), then each arm at its best lr.",
                      best_lr.curve_table(d.rows, ARM, d.best),
                      markdown_table(["arm", "best lr", "final val loss", "Δ vs Pre-LN, paired by seed (median)"],
                                     body)]
        return f"{stats.CELL_NOTE}.\n\n" + "\n\n".join(parts)

    @staticmethod
    def draw(depths: list[Depth], path) -> None:
        """Top: final loss against lr at each depth; bottom: validation curves at each arm's best lr."""
        fig, axes = plots.figure(ncols=len(depths), nrows=2, width=4.2, height=3.4)
        for i, d in enumerate(depths):
            best_lr.draw_curves(axes[i], d.rows, ARM, d.best, COLORS, unigram=d.unigram)
            axes[i].set_title(f"{d.layers} layers: final val loss against lr", fontsize=8)
            best_lr.draw_val_at_best(axes[len(depths) + i], d.rows, ARM, d.best, COLORS, d.unigram,
                                     f"{d.layers} layers: val loss at each arm's best lr")
        plots.save(fig, path)
