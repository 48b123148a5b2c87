"""Xiong et al. 2020, §3.2: Post-LN needs learning-rate warm-up; Pre-LN trains without it.

Four arms, Post-LN and Pre-LN each without and with warm-up, every arm at several learning rates; the paper's
claim is judged with each arm at its own best lr, chosen on held-out windows (normtrain/study/best_lr.py), at T and
at T/2 and with a near-tied Post-LN lr (protocol v5: normtrain/study/robustness.py); the v3 comparison at the
paper's two learning rates is kept beside it.
"""

from __future__ import annotations

import math
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import Experiment, Findings
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.plan import Plan

WARMUP_AXIS = "optim.warmup_steps"
ARMS = ("post, no warm-up", "post, warm-up", "pre, no warm-up", "pre, warm-up")  # the order of rows and lines
PRIMARY = ARMS[:2]  # the primary check's arms: its preconditions read these
REFERENCE = ("post, warm-up", "pre, warm-up")  # the guard's arms
PRIMARY_QUANTITY = "post_cold_minus_warm_at_best"
POST_MAX_LR, PRE_MIN_LR = 1e-3, 1e-3  # Post-LN runs the grid up to 1e-3, Pre-LN from 1e-3 (the YAML's lr axis)
PAPER_LRS = (5e-4, 1e-3)  # Xiong et al.'s two learning rates: the secondary checks at given lrs
COLORS = {"post, no warm-up": plots.PLACEMENT_COLORS["post"], "post, warm-up": "#ff9896",
          "pre, no warm-up": plots.PLACEMENT_COLORS["pre"], "pre, warm-up": "#9ecae1"}


def arm_of(row: dict[str, Any]) -> str:
    return f"{row['placement']}, " + ("warm-up" if int(row[WARMUP_AXIS]) > 0 else "no warm-up")


def penalty_at(rows: list[dict[str, Any]], placement: str, lr: float) -> dict[str, float | None]:
    """Per seed: the final loss without warm-up − with warm-up, both at ``lr`` (v3's penalty at a given lr)."""
    def losses(cold: bool) -> dict[str, float | None]:
        mine = [r for r in rows if r["placement"] == placement and best_lr.lr_of(r) == lr
                and (int(r[WARMUP_AXIS]) == 0) == cold]
        return stats.per_seed(mine, stats.final_or_inf)

    return stats.paired(losses(True), losses(False), stats.difference)


def primary_gap(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr]) -> dict[str, dict[str, float | None]]:
    """The primary: per seed, Post-LN without warm-up at its best lr − with warm-up at its best."""
    return {"": best_lr.paired_at_best(rows, "arm", best, *ARMS[:2])}


def measure_checks(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr], unigram: float | None
                   ) -> dict[str, dict[str, dict[str, float | None]]]:
    """Every quantity the registration's rules name, per condition and seed (``rows``: one budget's)."""
    post, pre = primary_gap(rows, best)[""], best_lr.paired_at_best(rows, "arm", best, *ARMS[2:])
    paper = [lr for lr in PAPER_LRS if penalty_at(rows, "post", lr)]
    return {
        PRIMARY_QUANTITY: {"": post},
        "pre_cold_minus_warm_at_best": {"": pre},
        "post_minus_pre_penalty_at_best": {"": stats.paired(post, pre, stats.minus) if post and pre else {}},
        "post_penalty": {f"lr {lr:g}": penalty_at(rows, "post", lr) for lr in paper},
        "post_penalty_growth": {"": stats.paired(penalty_at(rows, "post", PAPER_LRS[1]),
                                                 penalty_at(rows, "post", PAPER_LRS[0]), stats.minus)
                                if len(paper) == 2 else {}},
        "reference_margin": {a: stats.margin_below(unigram, best_lr.at_best(rows, "arm", best[a], stats.final_or_inf))
                             for a in REFERENCE if a in best},
        "best_lr_inside_grid": best_lr.inside_grid(best),
        "val_quarter_drop_at_best": {a: best_lr.at_best(rows, "arm", best[a], "val_quarter_drop")
                                     for a in PRIMARY[1:] if a in best},
    }


class Warmup(Experiment):
    name = "xiong_warmup"
    title = "Warm-up sensitivity of Post-LN and Pre-LN (Xiong et al. 2020, §3.2)"
    paper = "Xiong et al. 2020, §3.2"
    reference = "**Xiong et al. 2020**, *On Layer Normalization in the Transformer Architecture*, §3.2 and Fig. 2"
    method = ("Scaled down: 12 layers of the 64-128-2 model (d 64, FFN 128 GELU, 2 heads, learned positions), "
              "LayerNorm, Adam β = (0.9, 0.98), no weight decay, no gradient clipping, 2000 steps of 8 × 128 bytes, "
              "evaluated every 5% on 512 fixed windows, seeds 11–15. The learning rate follows WSD: the peak until "
              "step 1600, then linearly to 10% of it; the warm-up, none or linear over the first 200 steps (10%), "
              "*multiplies* that schedule (`optim.warmup_overlaps`), so the two arms of a placement differ in the "
              "ramp alone. Every run is measured again at T/2 (1000 steps): a decay branch that leaves the T run at "
              "step 800. Peak learning rates: Post-LN 1.25e-4, 2.5e-4, 5e-4, 1e-3 (the paper's 5e-4 and 1e-3 among "
              "them); Pre-LN 1e-3, 2e-3, 4e-3, 8e-3. Each arm is judged at its own best lr, at each budget: "
              + best_lr.HELD_OUT_RULE + ".")
    gpu_recipe = Recipe()
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)

    def keeps(self, combo: dict[str, str]) -> bool:
        if "optim.lr" not in combo:
            return True
        lr = float(combo["optim.lr"])
        return lr <= POST_MAX_LR if combo.get("placement", "post") == "post" else lr >= PRE_MIN_LR

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["arm"] = arm_of(r)
        full, half = robustness.budgets(rows)
        arms = [a for a in ARMS if any(r["arm"] == a for r in full)]
        unigram = stats.unigram_of(full)
        best = best_lr.best_lrs(full, "arm", arms, select_or_inf)
        measured = measure_checks(full, best, unigram)
        measured.update(robustness.primary_again(PRIMARY_QUANTITY, primary_gap, full, half, "arm", arms,
                                                 [a for a in PRIMARY if a in arms]))
        post = stats.median_and_interval(measured[PRIMARY_QUANTITY][""].values())
        pre = stats.median_and_interval(measured["pre_cold_minus_warm_at_best"][""].values())
        ours = f"Post-LN without − with warm-up, each at its best lr: {post} nats (seeds)"
        key = f"{ours}; Pre-LN: {pre} nats."
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *best_lr.rule_notes(full, "arm", best),
                 *plateau_notes(full), execution_note(rows)]
        half_best = best_lr.best_lrs(half, "arm", arms, select_or_inf) if half else {}
        return Findings(table=self.tables(full, best, unigram, half, half_best), measured=measured, key=key,
                        ours=ours, notes=notes,
                        figures={"warmup.png": lambda path: self.draw(full, best, unigram, path),
                                 "penalty.png": lambda path: self.draw_penalty(full, path)})

    @staticmethod
    def tables(rows, best, unigram, half=(), half_best=None) -> str:
        parts = [
            "The whole loss-vs-lr curve: final validation loss per arm and peak lr, median [range] over seeds (n); "
            f"**bold**: the arm's best lr by the selection rule:\n\n{best_lr.curve_table(rows, 'arm', best)}",
            "The selection loss (the held-out windows' loss at the run's end), median [range] over seeds:\n\n"
            + best_lr.curve_table(rows, "arm", best, select_or_inf),
            f"Each arm at its best lr ({stats.CELL_NOTE}):\n\n{at_best_table(rows, best)}"]
        if half:
            parts.append(f"At T/2 ({int(half[0]['steps'])} steps; under WSD a decay branch of each T run), each arm "
                         f"at its own best lr there ({stats.CELL_NOTE}):\n\n{at_best_table(list(half), half_best)}")
        parts.append("At the paper's learning rates (v3's comparison, secondary): the no-warm-up penalty per seed (no "
                     f"warm-up − warm-up, paired by seed; ∞ = diverged); {stats.CELL_NOTE}:\n\n{paper_lr_table(rows)}")
        return "\n\n".join(parts)

    @staticmethod
    def draw(rows, best, unigram, path) -> None:
        """Left: validation curves at each arm's best lr; right: final loss against lr."""
        fig, axes = plots.figure(ncols=2, width=4.8, height=3.6)
        best_lr.draw_val_at_best(axes[0], rows, "arm", best, COLORS, unigram, "val loss at each arm's best lr (thin: "
                                 "seeds)", style=lambda arm: "-" if "no warm-up" in arm else "--")
        best_lr.draw_curves(axes[1], rows, "arm", best, COLORS, unigram=unigram)
        plots.save(fig, path)

    @staticmethod
    def draw_penalty(rows, path) -> None:
        """The no-warm-up penalty per seed at the paper's learning rates (v3's figure)."""
        fig, (ax,) = plots.figure(width=5.2, height=3.4)
        cells = [(p, lr) for p in ("post", "pre") for lr in PAPER_LRS if penalty_at(rows, p, lr)]
        for x, (p, lr) in enumerate(cells):
            vals = [v for v in penalty_at(rows, p, lr).values() if v is not None]
            shown = [min(v, 3.0) for v in vals]  # a diverged run (∞) is drawn at the top, as a triangle
            ax.scatter([x] * len(shown), shown, color=plots.PLACEMENT_COLORS[p], s=14, alpha=0.6,
                       marker="o" if all(math.isfinite(v) for v in vals) else "^")
            if vals and all(math.isfinite(v) for v in vals):
                ax.hlines(stats.median(vals), x - 0.3, x + 0.3, color=plots.PLACEMENT_COLORS[p], lw=2.5)
        ax.set_xticks(range(len(cells)), [f"{p}\nlr {lr:g}" for p, lr in cells], fontsize=7)
        ax.axhline(0, color="k", lw=0.8)
        plots.finish(ax, "no-warm-up penalty per seed at the paper's lrs (bar: median)", "",
                     "final loss difference (nats)", legend=False)
        plots.save(fig, path)


def at_best_table(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr]) -> str:
    body = []
    for a, b in best.items():
        mine = best_lr.runs_at_best(rows, "arm", b)
        loss = best_lr.at_best(rows, "arm", b, stats.final_or_inf)
        drop = best_lr.at_best(rows, "arm", b, "val_quarter_drop")
        body.append([a, "–" if b.lr is None else f"{b.lr:g}" + (" (edge)" if b.at_edge else ""),
                     stats.cell(loss.values(), mine), stats.median_and_interval(drop.values())])
    return markdown_table(["arm", "best lr", "final val loss", "val loss fall over the last quarter (median)"], body)


def paper_lr_table(rows: list[dict[str, Any]]) -> str:
    body = []
    for p in ("post", "pre"):
        for lr in PAPER_LRS:
            cells = []
            for cold in (True, False):
                mine = [r for r in rows if r["placement"] == p and best_lr.lr_of(r) == lr
                        and (int(r[WARMUP_AXIS]) == 0) == cold]
                cells.append(stats.cell([stats.final_or_inf(r) for r in mine], mine) if mine else "–")
            body.append([p, f"{lr:g}", *cells, stats.median_and_interval(penalty_at(rows, p, lr).values())])
    return markdown_table(["placement", "lr", "no warm-up", "warm-up", "penalty (median)"], body)


def plateau_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Runs that sat on the unigram line and then left it (a transient plateau), with the step they left it."""
    left = [f"{r['arm']} lr {best_lr.lr_of(r):g} seed {r.get('train.seed')} (left at step {r['left_line_at_step']})"
            for r in rows if r.get("plateaued")]
    if not left:
        return []
    return [f"{len(left)} run(s) sat on the unigram line for at least 10% of the run and then left it: "
            + "; ".join(left) + "."]


def execution_note(rows: list[dict[str, Any]]) -> str:
    """How the runs executed (thread counts, determinism switches): a rerun that moves a number is compared to it."""
    seen = sorted({(str(r.get("threads")), str(r.get("deterministic"))) for r in rows})
    return ("How the runs executed (torch threads, deterministic algorithms), as recorded in each run's summary: "
            + ", ".join(f"{t} thread(s), deterministic {d}" for t, d in seen) + ".")
