"""Soft-cap or QK-norm? Pre-LN with no attention-logit control, Gemma 2's soft-cap, QK-norm or both, under AdamW and
Muon (and QK-Clip under Muon), at 1×, 2× and 4× the best stable learning rate.

**The best stable lr, a rule fixed before the runs**: under each optimizer, the ``none`` arm's best lr by
normtrain/study/best_lr.py's selection rule (the lowest median over seeds of the mean training loss over the
last 10% of the steps) on the grid's factor-2 lrs; the 2× and 4× points are the grid's lrs at twice and four times
it. Every arm is read at those three lrs of its optimizer (``at_multiple``), seed by seed, so the arms share the
lrs they are compared at: the question is which control holds up when the lr is pushed past the baseline's best,
not which control has the best lr of its own. ``multiples_in_grid`` is 1 where the best is not the grid's
smallest and 4× of it was run (the precondition), 0 otherwise.

The max attention logit is the largest ``attn_logit_max/layer_i`` at the run's last log step: each head's largest
q·k/√d_head *before* any soft-cap (a cap hides the growth it is there to contain).
"""

from __future__ import annotations

import math
from typing import Any

from normtrain.config.schema import OptimSchema
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.lr_sensitivity import attn_logit_columns
from normtrain.reproduce.runner import Experiment, Findings
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.claim import ALT, HALF
from normtrain.study.plan import Plan

ARMS = ("none", "softcap", "qknorm", "both", "qkclip")
PRIMARY_ARMS = ("none", "softcap", "qknorm")  # every seed; the secondary arms run the first 3 seeds only
SECONDARY_SEEDS = ("5", "6", "7")  # v5's first three (v4 ran 0-4)
PRIMARY_QUANTITY = "softcap_minus_qknorm"
OPTIMIZERS = ("adamw", "muon")
MULTIPLES = (1, 2, 4)
MUON_RATIO = 2.0  # optim.muon_lr = 2 × optim.lr under Muon (the YAML's paired axes)
ADAMW_MUON_LR = OptimSchema.muon_lr  # under AdamW muon_lr stays at its default (validation refuses another)
COLORS = {"none": "#7f7f7f", "softcap": "#ff7f0e", "qknorm": "#1f77b4", "both": "#2ca02c", "qkclip": "#d62728"}
LOGIT = "final_attn_logit_max"


def arm_of(combo: dict[str, Any]) -> str:
    """The attention-logit control of a run: none, softcap, qknorm, both (cap and QK-norm) or qkclip."""
    cap = float(combo.get("model.attn_softcap", 0) or 0) > 0
    qk = str(combo.get("model.qk_norm", "none")) not in ("none", "false", "False")
    if float(combo.get("optim.qk_clip", 0) or 0) > 0:
        return "qkclip" if not (cap or qk) else "invalid"
    return {(False, False): "none", (True, False): "softcap", (False, True): "qknorm", (True, True): "both"}[(cap, qk)]


def in_design(combo: dict[str, str], lrs: tuple[float, ...]) -> bool:
    """The part of the grid's product that is run: valid arms (QK-Clip under Muon only), Muon's lr tied to
    AdamW's (AdamW's runs keep Muon's default, unused), ``none`` at every lr (it sets the best stable lr), the
    others above the smallest, the secondary arms on seeds 0-2 (compute goes to the primary check first)."""
    arm, lr = arm_of(combo), float(combo.get("optim.lr", lrs[0] if lrs else 0))
    if arm == "invalid" or (arm == "qkclip" and combo.get("optim") != "muon"):
        return False
    tied = MUON_RATIO * lr if combo.get("optim", "adamw") == "muon" else ADAMW_MUON_LR
    if "optim.muon_lr" in combo and not math.isclose(float(combo["optim.muon_lr"]), tied):
        return False
    if arm != "none" and lrs and math.isclose(lr, min(lrs)):
        return False
    return arm in PRIMARY_ARMS or combo.get("train.seed", "0") in SECONDARY_SEEDS


def best_stable(rows: list[dict[str, Any]], optimizer: str) -> best_lr.BestLr:
    """The ``none`` arm's best lr under ``optimizer`` by the selection rule: the 1× of every comparison."""
    return best_lr.choose([r for r in rows if r.get("optim") == optimizer], "arm", "none", select_or_inf)


def multiples_in_grid(best: best_lr.BestLr) -> float | None:
    """1.0 when the best stable lr is not the grid's smallest and 4× of it was run, else 0.0 (None: no best)."""
    if best.lr is None:
        return None
    inside = best.lr != best.lrs[0] and any(math.isclose(lr, 4 * best.lr) for lr in best.lrs)
    return float(inside)


def marked_best(arms: list[str], best: best_lr.BestLr) -> dict[str, best_lr.BestLr]:
    """Each arm for the curve table and figure, only ``none`` with its best (the best stable lr) marked."""
    return {a: best if a == "none" else best_lr.BestLr(a, best.lrs, {}, None) for a in arms}


def at_multiple(rows: list[dict[str, Any]], optimizer: str, arm: str, lr: float | None,
                value: str | best_lr.Value = stats.final_or_inf) -> dict[str, float | None]:
    """``{seed: value}`` of an arm's runs under ``optimizer`` at learning rate ``lr`` (empty where not run)."""
    if lr is None:
        return {}
    chosen = [r for r in rows if r.get("optim") == optimizer and r["arm"] == arm
              and math.isclose(best_lr.lr_of(r), lr)]
    return stats.per_seed(chosen, value)


def paired_at(rows, optimizer: str, lr: float | None, arm: str, reference: str, value=stats.final_or_inf,
              op=stats.difference) -> dict[str, float | None]:
    """``op(arm, reference)`` seed by seed, both under ``optimizer`` at ``lr``."""
    return stats.paired(at_multiple(rows, optimizer, arm, lr, value), at_multiple(rows, optimizer, reference, lr,
                                                                                    value), op)


class SoftcapVsQKNorm(Experiment):
    name = "softcap_vs_qknorm"
    title = "Attention soft-cap vs QK-norm at 1×, 2× and 4× the best stable lr, under AdamW and Muon"
    paper = "Gemma 2 (soft-cap 50); Gemma 3 and Qwen3 (QK-norm); Kimi K2 (QK-Clip)"
    reference = ("**Gemma Team 2024**, *Gemma 2* (attention logits soft-capped at 50); **Gemma Team 2025**, *Gemma 3 "
                 "Technical Report* §2 (the soft-cap replaced by QK-norm); **Qwen Team 2025**, *Qwen3*; **Kimi Team "
                 "2025**, *Kimi K2* (MuonClip's QK-Clip, τ = 100); nanochat's tracker (is a cap redundant with "
                 "QK-norm?)")
    method = ("Pre-LN (RMSNorm), 4 layers, d 64, 4 heads of 16, GELU FFN 128, RoPE; 1000 steps of 8 × 128 bytes, a "
              "5% warm-up, WSD (the peak to step 800, then linearly to 10%), weight decay 0.1, clip 1, evaluated "
              "every 5% on 512 fixed windows; the "
              "max attention logit (before any cap) every 10 steps. Arms: none, `model.attn_softcap=50`, "
              "`model.qk_norm=per_head`, both; under Muon also `optim.qk_clip=100`. Peak lr 2.5e-3 … 4e-2 "
              "(factor 2; Muon's matrices at 2× it). The best stable lr of each optimizer is the `none` arm's best "
              "by the rule " + best_lr.HELD_OUT_RULE + "; every arm is read at 1×, 2× and 4× of it, at T and at T/2 "
              "(500 steps, a WSD decay branch from step 400). Seeds 5–9 (both and QK-Clip: 5–7).")
    lr_tuned = False  # the lrs are the design: --quick keeps every one
    gpu_recipe = Recipe()
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)

    def keeps(self, combo: dict[str, str]) -> bool:
        from normtrain.study.plan import sweep_axes

        lrs = getattr(self, "_lrs", None)
        if lrs is None:
            lrs = self._lrs = tuple(float(v) for v in sweep_axes(self.name).get("optim.lr", []))
        return in_design(combo, lrs)

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), "arm": arm_of(combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss"), **attn_logit_columns(run)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["arm"] = arm_of(r)
        rows, half = robustness.budgets(rows)
        optimizers = [o for o in OPTIMIZERS if any(r.get("optim") == o for r in rows)]
        best = {o: best_stable(rows, o) for o in optimizers}
        measured = {**self.quantities(rows, best), **self.again(rows, half, best, optimizers)}
        unigram = stats.unigram_of(rows)
        gain = measured["softcap_minus_qknorm"]
        ours = "soft-cap − QK-norm final loss, paired by seed: " + "; ".join(
            f"{c} {stats.median_and_interval(v.values())}" for c, v in gain.items()) + " nats"
        notes = [f"Best stable lr rule (declared before the runs): under each optimizer, the `none` arm's best lr: "
                 f"{best_lr.HELD_OUT_RULE}.",
                 *(f"{o}: best stable lr {b.lr:g}; 4× of it "
                   f"{'was run' if multiples_in_grid(b) else 'is outside the grid (or the best is its smallest)'}"
                   for o, b in best.items() if b.lr is not None),
                 *(n for o, b in best.items() for n in best_lr.rule_notes(
                     [r for r in rows if r.get("optim") == o], "arm", {"none": b}, f"{o}: "))]
        return Findings(table=self.tables(rows, best, measured), measured=measured, key=ours + ".", ours=ours,
                        notes=notes, figures={"softcap_vs_qknorm.png": lambda p: self.draw(rows, best, unigram, p)})

    def again(self, rows, half, best, optimizers) -> dict[str, Any]:
        """The primary with an optimizer's near-tied runner-up as its best stable lr, and at T/2 (claim.py)."""
        from dataclasses import replace

        found = {}
        for o in optimizers:
            second, _, _ = best_lr.runner_up([r for r in rows if r.get("optim") == o], "arm", best[o], select_or_inf)
            if second is not None:
                moved = {**best, o: replace(best[o], lr=second)}
                found[f"{PRIMARY_QUANTITY}{ALT}{o}'s best stable lr at its runner-up {second:g}"] = self.quantities(
                    rows, moved)[PRIMARY_QUANTITY]
        if half:
            found[PRIMARY_QUANTITY + HALF] = self.quantities(half, {o: best_stable(half, o) for o in optimizers})[
                PRIMARY_QUANTITY]
        return found

    @staticmethod
    def quantities(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr]) -> dict[str, Any]:
        """Every judged quantity, per condition ``"optimizer m×"`` (m = 2, 4) and seed."""
        unigram = stats.unigram_of(rows)
        high = {(o, m): (b.lr * m if b.lr is not None else None) for o, b in best.items() for m in (2, 4)}
        cond = {k: f"{k[0]} {k[1]}×" for k in high}
        ref = at_multiple(rows, "adamw", "none", best["adamw"].lr) if "adamw" in best else {}
        return {
            "softcap_minus_qknorm": {cond[k]: paired_at(rows, k[0], lr, "softcap", "qknorm") for k, lr in high.items()},
            "qknorm_minus_both": {cond[k]: paired_at(rows, k[0], lr, "qknorm", "both") for k, lr in high.items()},
            "qkclip_minus_qknorm": {cond[k]: paired_at(rows, k[0], lr, "qkclip", "qknorm")
                                    for k, lr in high.items() if k[0] == "muon"},
            "reference_margin": {"none, AdamW, 1×": stats.margin_below(unigram, ref)},
            "multiples_in_grid": {o: {best_lr.ALL_SEEDS: multiples_in_grid(b)} for o, b in best.items()},
            "logit_growth_none": {o: stats.paired(at_multiple(rows, o, "none", high[(o, 4)], LOGIT),
                                                  at_multiple(rows, o, "none", b.lr, LOGIT), stats.ratio)
                                  for o, b in best.items()}}

    @staticmethod
    def tables(rows, best, measured) -> str:
        parts = []
        for o, b in best.items():
            mine = [r for r in rows if r.get("optim") == o]
            arms = [a for a in ARMS if any(r["arm"] == a for r in mine)]
            marked = marked_best(arms, b)
            curve = best_lr.curve_table(mine, "arm", marked)
            logits = best_lr.curve_table(mine, "arm", marked, lambda r: r.get(LOGIT))
            parts += [f"**{o}**: final validation loss per arm and peak lr, median [range] over seeds (n); "
                      f"**bold**: the best stable lr (the `none` arm's best by the rule):\n\n{curve}",
                      f"**{o}**: max attention logit at the end (before any cap), median [range] over seeds:\n\n"
                      f"{logits}"]
        body = [[q, c, stats.median_and_interval(v.values())] for q in ("softcap_minus_qknorm", "qknorm_minus_both",
                                                                          "qkclip_minus_qknorm")
                for c, v in measured[q].items()]
        parts.append("Paired by seed at the same lr (nats):\n\n"
                     f"{markdown_table(['difference', 'condition', 'median [range]'], body)}")
        return "\n\n".join(parts)

    @staticmethod
    def draw(rows, best, unigram, path) -> None:
        """Per optimizer: final loss against lr (left) and the max attention logit against lr (right), every seed."""
        fig, axes = plots.figure(ncols=2, nrows=max(1, len(best)), width=4.4, height=3.4)
        for i, (o, b) in enumerate(best.items()):
            left, right = axes[2 * i], axes[2 * i + 1]
            mine = [r for r in rows if r.get("optim") == o]
            arms = marked_best([a for a in ARMS if any(r["arm"] == a for r in mine)], b)
            best_lr.draw_curves(left, mine, "arm", arms, COLORS, unigram=unigram)
            left.set_title(f"{o}: final val loss (ring: the best stable lr)", fontsize=8)
            best_lr.draw_curves(right, mine, "arm", arms, COLORS, value=lambda r: r.get(LOGIT))
            right.set_yscale("log")
            plots.finish(right, f"{o}: max attention logit (before any cap)", "peak learning rate", "max logit")
        plots.save(fig, path)
