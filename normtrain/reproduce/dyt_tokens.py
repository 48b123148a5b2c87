"""DyT at more tokens (issue 39): does DyT's gap to RMSNorm move with the token budget, each norm at its own best lr?

A 2026 replication (arXiv 2604.23434) reports DyT improving the validation loss at 1M tokens and worsening it at
118M; this project's dyt experiment found DyT behind RMSNorm at ~0.8M tokens. Here DyT (α₀ fixed for the width
before the runs) and RMSNorm train at two budgets a factor 8 apart (the run length is the axis: the same batch, more
steps), each at 3 learning rates; at each budget each norm is judged at its own best lr (best_lr.py), and the gap
DyT − RMSNorm is paired by seed. The primary quantity is how much the gap grows from the smaller budget to the
larger, per seed. Each budget's warm-up and evaluation interval are 5% of its length (``BudgetPlan``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import Experiment, Findings, curve_points, present
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.plan import STEPS_AXIS, Plan

NORMS = ("rmsnorm", "dyt")
FRACTION = 20  # warm-up and evaluation interval: 1/20 = 5% of each budget's steps


@dataclass
class BudgetPlan(Plan):
    """A plan whose runs get their budget's warm-up and evaluation interval: 5% of the combo's ``train.max_steps``
    (a step count in the YAML would be 5% of one budget only)."""

    @classmethod
    def of(cls, plan: Plan) -> BudgetPlan:
        return cls(**{f.name: getattr(plan, f.name) for f in fields(Plan)})

    def overrides(self, combo: dict[str, str]) -> list[str]:
        steps = int(combo.get(STEPS_AXIS, 0))
        if not steps:
            return super().overrides(combo)
        return [*super().overrides(combo), f"optim.warmup_steps={steps // FRACTION}",
                f"train.eval_every={max(1, steps // FRACTION)}"]


def relative(a: float | None, b: float | None) -> float | None:
    """a / b − 1 of two losses (the replication reports DyT's effect in %), None where either is missing or
    infinite."""
    return a / b - 1 if a is not None and b and math.isfinite(a) and math.isfinite(b) else None


class Budget:
    """One budget's rows, each norm's best lr and the values at it."""

    def __init__(self, rows: list[dict[str, Any]], steps: int, unigram: float | None):
        self.steps, self.unigram = steps, unigram
        self.rows = [r for r in rows if int(r[STEPS_AXIS]) == steps]
        self.norms = present(self.rows, "norm", NORMS)
        self.best = best_lr.best_lrs(self.rows, "norm", self.norms, select_or_inf)

    def loss(self, norm: str) -> dict[str, float | None]:
        return best_lr.at_best(self.rows, "norm", self.best[norm], stats.final_or_inf) if norm in self.best else {}

    def gap(self, op=stats.difference) -> dict[str, float | None]:
        """DyT − RMSNorm seed by seed, each at its best lr (``op``: relative for the replication's %)."""
        return best_lr.paired_at_best(self.rows, "norm", self.best, "dyt", "rmsnorm", op=op)


def gap_growth(small: dict[str, float | None], large: dict[str, float | None]) -> dict[str, float | None]:
    """Per seed: the gap at the larger budget − the gap at the smaller (None where either is missing or either gap
    is infinite: a diverged best run makes the change undefined, and the preconditions say so)."""
    return {s: (large[s] - v if v is not None and large.get(s) is not None and math.isfinite(v)
                and math.isfinite(large[s]) else None) for s, v in small.items() if s in large}


def measured_of(budgets: list[Budget]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Every quantity the registration names, per condition (a budget, or a norm at a budget) and seed."""
    small, large = budgets[0], budgets[-1]
    label = {b.steps: f"{b.steps} steps" for b in budgets}
    return {
        "gap_growth": {f"{small.steps} → {large.steps} steps": gap_growth(small.gap(), large.gap())}
        if len(budgets) > 1 else {},
        "gap_small": {label[small.steps]: small.gap()},
        "gap_large": {label[large.steps]: large.gap()} if len(budgets) > 1 else {},
        "reference_margin": {f"RMSNorm, {label[b.steps]}": stats.margin_below(b.unigram, b.loss("rmsnorm"))
                             for b in budgets},
        "dyt_margin": {f"DyT, {label[b.steps]}": stats.margin_below(b.unigram, b.loss("dyt")) for b in budgets},
        "best_lr_inside_grid": {f"{n}, {label[b.steps]}": best_lr.inside_grid({n: b.best[n]})[n]
                                for b in budgets for n in b.norms},
    }


class DyTTokens(Experiment):
    name = "dyt_tokens"
    title = "DyT against RMSNorm at two token budgets a factor 8 apart (arXiv 2604.23434)"
    paper = "Verma 2026 (arXiv 2604.23434), a replication of Zhu et al. 2025 (DyT)"
    reference = ("**Verma 2026**, *When Does Removing LayerNorm Help? Activation Bounding as a Regime-Dependent "
                 "Implicit Regularizer* (arXiv 2604.23434): DyT −27.3% in validation loss at 64M parameters / 1M "
                 "tokens, +18.8% at 64M / 118M; DyT itself: **Zhu et al. 2025**, *Transformers without "
                 "Normalization* (CVPR 2025)")
    method = ("Pre-LN, the dyt experiment's model (6 layers, d 64, 4 heads, SwiGLU, RoPE); AdamW (0.9, 0.95), "
              "weight decay 0.1, clipping 1, a 5% warm-up then cosine decay to 10%; 500 and 4000 steps of 8 × 128 "
              "bytes (0.51M and 4.10M tokens), evaluated every 5% on 256 fixed windows; RMSNorm and DyT (α₀ = 1, "
              "the dyt experiment's best at d 64) at peak lr 1e-3, 3e-3, 1e-2 and 3e-2 (3e-2 added after the "
              "registered grid's RMSNorm runs put its best at the top edge), seeds 5–9. At each budget each norm is "
              "judged at its own best lr: " + best_lr.HELD_OUT_RULE + ".")
    gpu_recipe = Recipe(width=1.0, batch=2.0, seq=2.0)  # α₀ was tuned at this width: tokens grow, width does not

    def runs_plan(self, plan: Plan) -> Plan:
        return BudgetPlan.of(plan)

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        cfg = (run.summary.get("config") or {})
        per_step = ((cfg.get("train") or {}).get("batch_size") or 0) * ((cfg.get("model") or {}).get("seq_len") or 0)
        return {**super().row(run, combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss"), "tokens": int(combo.get(STEPS_AXIS, 0)) * per_step}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        unigram = stats.unigram_of(rows)
        budgets = [Budget(rows, s, unigram) for s in sorted({int(r[STEPS_AXIS]) for r in rows})]
        measured = measured_of(budgets)
        tokens = {int(r[STEPS_AXIS]): r.get("tokens") for r in rows}
        ours = "DyT − RMSNorm at each one's best lr: " + "; ".join(
            f"{b.steps} steps ({(tokens[b.steps] or 0) / 1e6:.2f}M tokens) "
            f"{stats.median_and_interval(b.gap().values())}" for b in budgets) + " nats"
        growth = next(iter(measured["gap_growth"].values()), {})
        key = (f"{ours}; the gap's growth from the smaller budget to the larger "
               f"{stats.median_and_interval(growth.values())} nats (relative gaps: " + "; ".join(
                   f"{b.steps} steps {stats.median_and_interval(b.gap(relative).values())}" for b in budgets) + ").")
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *(n for b in budgets for n in best_lr.rule_notes(b.rows, "norm", b.best, f"{b.steps} steps: "))]
        return Findings(table=self.table(budgets, tokens), measured=measured, key=key, ours=ours, notes=notes,
                        figures={"dyt_tokens.png": lambda path: self.draw(budgets, path)})

    @staticmethod
    def table(budgets: list[Budget], tokens: dict[int, Any]) -> str:
        parts = []
        for b in budgets:
            body = []
            for n, best in b.best.items():
                mine = [r for r in best_lr.arm_rows(b.rows, "norm", n) if best.lr is not None
                        and best_lr.lr_of(r) == best.lr]
                body.append([n, "–" if best.lr is None else f"{best.lr:g}" + (" (edge)" if best.at_edge else ""),
                             stats.cell(b.loss(n).values(), mine)])
            parts += [f"**{b.steps} steps ({(tokens.get(b.steps) or 0) / 1e6:.2f}M tokens)**: final validation "
                      "loss against lr (median [range] over seeds; the rule's best in bold), then each norm at its "
                      f"best lr. DyT − RMSNorm paired by seed: {stats.median_and_interval(b.gap().values())} nats, "
                      f"relative {stats.median_and_interval(b.gap(relative).values())}.",
                      best_lr.curve_table(b.rows, "norm", b.best),
                      markdown_table(["norm", "best lr", "final val loss"], body)]
        return f"{stats.CELL_NOTE}.\n\n" + "\n\n".join(parts)

    @staticmethod
    def draw(budgets: list[Budget], path) -> None:
        """Top: final loss against lr per budget; bottom: validation curves at each norm's best lr."""
        fig, axes = plots.figure(ncols=len(budgets), nrows=2, width=4.2, height=3.4)
        for i, b in enumerate(budgets):
            best_lr.draw_curves(axes[i], b.rows, "norm", b.best, plots.NORM_COLORS, unigram=b.unigram)
            axes[i].set_title(f"{b.steps} steps: final val loss against lr", fontsize=8)
            ax, drawn = axes[len(budgets) + i], []
            for n, best in b.best.items():
                mine = [curve_points(r["val_curve"]) for r in best_lr.arm_rows(b.rows, "norm", n)
                        if r.get("val_curve") and best.lr is not None and best_lr.lr_of(r) == best.lr]
                plots.curves(ax, mine, plots.NORM_COLORS[n], f"{n} at lr {best.lr:g}" if best.lr else n)
                drawn += mine
            plots.unigram_line(ax, b.unigram)
            plots.loss_range(ax, b.unigram, drawn)
            plots.finish(ax, f"{b.steps} steps: val loss at each norm's best lr", "step", "val loss (nats/byte)")
        plots.save(fig, path)
