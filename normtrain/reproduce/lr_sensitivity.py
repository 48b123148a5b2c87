"""Wortsman et al. 2023: final loss against peak learning rate per placement, LR sensitivity and attention logits."""

from __future__ import annotations

import math
from typing import Any

from normtrain.compare.runs import Run
from normtrain.data.unigram import COLLAPSE_MARGIN, on_unigram_line
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import Experiment, Findings, curve_text
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.claim import HALF
from normtrain.study.plan import Plan

VARIANTS = ("pre", "pre+qk", "peri", "deepnorm", "post")  # the order of rows and lines (v3 runs pre, pre+qk, post)
SHALLOW_ONLY = ("pre", "pre+qk", "post")  # the variants run at L = 2
DEEP_ONLY = ("pre", "pre+qk")  # the variants run at L = 24, on the grid's top six learning rates
DEEP, DEEP_MIN_LR = 24, 1e-3  # at L = 24: the grid's top six learning rates (v3: five, from 3e-3)
PRIMARY = ("pre", "pre+qk")  # the primary check's variants: their best lr must lie inside the grid
STYLES = {"pre+qk": "--"}  # Pre-LN + QK-norm: Pre-LN's colour, dashed
HIGH = 2  # the attention-logit check and figure read the grid's highest learning rates, this many


def color(name: str) -> str:
    return plots.PLACEMENT_COLORS[name.removesuffix("+qk")]


def variant(row: dict[str, Any]) -> str:
    qk = str(row.get("model.qk_norm", "false")).lower() not in ("false", "none")
    return row["placement"] + ("+qk" if qk else "")


def sensitivity(losses: dict[float, float], l0: float) -> float | None:
    """E_η[min(ℓ(η), ℓ0) − ℓ*] over the grid (Wortsman et al. 2023, §2); a diverged run's ℓ is +∞."""
    if not losses or l0 is None:
        return None
    capped = [min(v, l0) for v in losses.values()]
    return sum(capped) / len(capped) - min(capped)


def best_by_rule(rows: list[dict[str, Any]], names: list[str], depths: list[int]) -> dict[str, best_lr.BestLr]:
    """Each variant's best lr at each depth by the selection rule (normtrain/study/best_lr.py), keyed
    ``"variant, L=depth"``: the precondition that ℓ* is not at the grid's edge reads it."""
    for r in rows:
        r["arm"] = f"{r['variant']}, L={int(r['model.n_layers'])}"
    arms = [f"{v}, L={d}" for d in depths for v in names if any(r["arm"] == f"{v}, L={d}" for r in rows)]
    return best_lr.best_lrs(rows, "arm", arms, select_or_inf)


def attn_logit_columns(run: Run) -> dict[str, Any]:
    """A run's max attention logit (the largest ``attn_logit_max/layer_i``, before any soft-cap) at its last log
    step, and the curve of it over the run (``step:value`` pairs): runs.csv's ``final_attn_logit_max`` and
    ``attn_logit_curve``."""
    keys = run.layer_keys("attn_logit_max")
    logged = [row for row in run.rows if any(k in row for k in keys)]
    peaks = [(row["step"], max((row[k] for k in keys if row.get(k) is not None), default=math.nan))
             for row in logged]
    finite = [(s, v) for s, v in peaks if math.isfinite(v)]
    return {"final_attn_logit_max": finite[-1][1] if finite else None,
            "attn_logit_curve": curve_text(*zip(*finite, strict=True)) if finite else ""}


PRIMARY_QUANTITY = "pre_minus_pre_qk_sensitivity"


class Curves:
    """Each variant's final loss ℓ(η) per depth and seed, and what the checks read from it."""

    def __init__(self, rows: list[dict[str, Any]]):
        self.by = {(r["variant"], int(r["model.n_layers"]), float(r["optim.lr"]), str(r.get("train.seed", "0"))): r
                   for r in rows}
        self.seeds = sorted({k[3] for k in self.by})
        self.lrs = sorted({k[2] for k in self.by})

    def lrs_at(self, d: int) -> list[float]:
        return sorted({k[2] for k in self.by if k[1] == d})

    def curve(self, v: str, d: int, s: str, lrs: list[float] | None = None) -> dict[float, float]:
        """η -> ℓ(η) of one seed (+∞ for a diverged run), over ``lrs`` (default: every lr run at that depth)."""
        out = {}
        for lr in lrs or self.lrs_at(d):
            r = self.by.get((v, d, lr, s))
            if r is not None and (loss := stats.final_or_inf(r)) is not None:
                out[lr] = loss
        return out

    def l0(self, v: str, d: int, s: str) -> float | None:
        return next((r["initial_val_loss"] for lr in self.lrs if (r := self.by.get((v, d, lr, s)))
                     and r.get("initial_val_loss") is not None), None)

    def sens(self, v: str, d: int, lrs: list[float] | None = None) -> dict[str, float | None]:
        return {s: sensitivity(c, self.l0(v, d, s)) for s in self.seeds if (c := self.curve(v, d, s, lrs))}

    def best(self, v: str, d: int) -> dict[str, float]:
        return {s: min(c.values()) for s in self.seeds if (c := self.curve(v, d, s))}

    def max_stable(self, v: str, d: int) -> dict[str, float | None]:
        """The largest η whose run neither diverged nor ended on the unigram line or above it (its final loss
        below the line by more than the band: normtrain/training/outcome.py)."""
        ok = lambda r: (r["status"] == "completed" and r.get("final_val_loss") is not None  # noqa: E731
                        and not on_unigram_line(r["final_val_loss"], r.get("unigram_val_loss")))
        return {s: max((lr for lr in self.lrs_at(d) if (r := self.by.get((v, d, lr, s))) and ok(r)), default=None)
                for s in self.seeds if self.curve(v, d, s)}


class LRSensitivity(Experiment):
    name = "lr_sensitivity"
    title = "Learning-rate sensitivity of the placements, with and without QK-norm (Wortsman et al. 2023)"
    paper = "Wortsman et al. 2023"
    reference = ("**Wortsman et al. 2023**, *Small-scale proxies for large-scale Transformer training "
                 "instabilities*, Fig. 1, 3 and §3.4")
    method = ("d 64, 4 heads (QK-norm per head), GELU FFN 128, RoPE, no biases, untied embeddings, LayerNorm; "
              "AdamW (0.9, 0.95), eps 1e-8, gradient clipping 1, a 50-step (5%) warm-up then WSD (the peak to step "
              "800, then linearly to 10%), independent weight decay 1e-4, z-loss 1e-4 (their recipe, WSD for the T/2 "
              "branch: 500 steps, from step 400); 1000 steps of 8 × 128 bytes, seeds 6–8, at "
              "peak learning rates 3e-4 … 3e-1. Pre-LN with and without QK-norm at 2, 8 and 24 layers (at 24 on "
              "the grid's top six learning rates) and Post-LN at 2 and 8, evaluated every 5%. The attention "
              "logits are logged every 10 steps (max q·k/√d_head per layer on one sequence).")
    lr_tuned = False  # the lrs are the design: --quick keeps every one
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)
    gpu_recipe = Recipe()

    def keeps(self, combo: dict[str, str]) -> bool:
        v, depth = variant(combo), int(combo.get("model.n_layers", 8))
        if v.endswith("+qk") and combo.get("placement") != "pre":
            return False  # QK-norm with Pre-LN only (a plain -m sweep runs the whole product)
        if depth <= 2:
            return v in SHALLOW_ONLY
        if depth >= DEEP:
            return v in DEEP_ONLY and float(combo.get("optim.lr", DEEP_MIN_LR)) >= DEEP_MIN_LR
        return True

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), **attn_logit_columns(run), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["variant"] = variant(r)
        rows, half = robustness.budgets(rows)
        c = Curves(rows)
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        names = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
        unigram = stats.unigram_of(rows)
        common = sorted(set.intersection(*[set(c.lrs_at(d)) for d in depths]))  # one grid for the depth check
        measured = self.measure_checks(c, depths, names, common, unigram)
        if half:  # ℓ0 is the loss at initialization: the T run's (a branch starts from its step, not from init)
            h = Curves([{**r, "initial_val_loss": c.l0(r["variant"], int(r["model.n_layers"]),
                                                       str(r.get("train.seed", "0")))} for r in half])
            measured[PRIMARY_QUANTITY + HALF] = self.measure_checks(h, depths, names, common, unigram)[
                PRIMARY_QUANTITY]
        best = best_by_rule(rows, names, depths)
        measured["best_lr_inside_grid"] = best_lr.inside_grid({a: b for a, b in best.items()
                                                               if a.split(",")[0] in PRIMARY})
        ranking, mid = self.ranking(c, names, depths, unigram)
        gaps = measured["pre_minus_pre_qk_sensitivity"]  # the primary check's quantity
        ours = "Pre-LN − Pre-LN + QK-norm LR sensitivity: " + (
            "; ".join(f"{stats.median_and_interval(v.values())} nats at {d}" for d, v in gaps.items()) or "–")
        at_mid = f"LR sensitivity at L={mid}: " + ", ".join(f"{v} {stats.spread(c.sens(v, mid).values())}"
                                                             for v in ranking)
        key = (f"{ours}. Ranking by LR sensitivity at L={mid} (least sensitive first; a variant that learned nothing "
               f"at any learning rate in most seeds last): {', '.join(ranking)}. {at_mid}. Max stable lr at L={mid}: "
               + ", ".join(f"{v} {self.stable_cell(c.max_stable(v, mid))}" for v in ranking) + ".")
        notes = [*self.notes(c, names, depths, unigram), f"Best lr rule (declared before the runs; the precondition "
                 f"best_lr_inside_grid reads it): {best_lr.HELD_OUT_RULE}.",
                 *(n for b in best.values() if (n := b.edge_note()))]
        table = "\n\n".join([self.tables(rows, c, names, depths, common), "The selection loss (the held-out windows' "
                               "loss at the run's end) per variant, depth and peak lr, median [range] over seeds; "
                               "**bold**: the best lr by the rule (the precondition reads it):\n\n"
                               + best_lr.curve_table(rows, "arm", best, select_or_inf)])
        return Findings(table=table, measured=measured, key=key, ours=ours,
                        notes=notes, figures={
                            "loss_vs_lr.png": lambda path: self.draw_curves(c, names, depths, unigram, path),
                            "attention_logits.png": lambda path: self.draw_logits(rows, names, depths, c.lrs, path)})

    @staticmethod
    def measure_checks(c: Curves, depths, names, common, unigram) -> dict[str, dict]:
        minus = lambda a, b: a - b  # noqa: E731

        def logit_ratio(d, lr):
            out = {}
            for s in c.seeds:
                a, b = (c.by.get((v, d, lr, s), {}).get("final_attn_logit_max") for v in ("pre", "pre+qk"))
                out[s] = a / b if a is not None and b else None
            return out

        qk_depths = [d for d in depths if "pre+qk" in names]
        post_depths = [d for d in depths if any(k[0] == "post" and k[1] == d for k in c.by)]
        return {
            "pre_minus_pre_qk_sensitivity": {f"L={d}": stats.paired(c.sens("pre", d), c.sens("pre+qk", d), minus)
                                             for d in qk_depths},
            "pre_over_pre_qk_logit": {f"L={d}, lr {lr:g}": logit_ratio(d, lr) for d in qk_depths
                                      for lr in c.lrs_at(d)[-HIGH:]},
            "pre_deep_minus_shallow_sensitivity": {f"L={depths[-1]} − L={depths[0]}, lr {common[0]:g}…{common[-1]:g}":
                                                   stats.paired(c.sens("pre", depths[-1], common),
                                                                c.sens("pre", depths[0], common), minus)},
            "post_minus_pre_sensitivity": {f"L={d}": stats.paired(c.sens("post", d), c.sens("pre", d), minus)
                                           for d in post_depths},
            "reference_margin": {f"Pre-LN at its best lr, L={d}": stats.margin_below(unigram, c.best("pre", d))
                                 for d in depths},
        }

    @staticmethod
    def learned_nothing(c: Curves, v: str, d: int, unigram) -> list[str]:
        """Seeds whose best ℓ(η) over the whole grid sits on the unigram line."""
        return [s for s in c.seeds if (curve := c.curve(v, d, s)) and on_unigram_line(min(curve.values()), unigram)]

    def ranking(self, c: Curves, names, depths, unigram) -> tuple[list[str], int]:
        """The variants at the depth where all of them ran, least sensitive first; a variant that learned nothing at
        any learning rate in most seeds ranks last (declared in the registration's reported numbers)."""
        mid = max((d for d in depths if all(c.curve(v, d, s) for v in names for s in c.seeds[:1])),
                  default=depths[0])
        ranking = sorted([v for v in names if c.sens(v, mid)],
                         key=lambda v: (len(self.learned_nothing(c, v, mid, unigram)) * 2 > len(c.seeds),
                                        stats.median(c.sens(v, mid).values()) or math.inf))
        return ranking, mid

    def notes(self, c: Curves, names, depths, unigram) -> list[str]:
        notes = []
        for v in names:
            for d in depths:
                best = [min(curve, key=curve.get) for s in c.seeds if (curve := c.curve(v, d, s))]
                edge = [b for b in best if b in (c.lrs_at(d)[0], c.lrs_at(d)[-1])]
                if edge:
                    notes.append(f"{v} at L={d}: the best learning rate is at the grid's edge ({edge[0]:g}) in "
                                 f"{len(edge)} of {len(best)} seeds; the sensitivity is a lower bound there.")
                if bad := self.learned_nothing(c, v, d, unigram):
                    notes.append(f"{v} at L={d} learned nothing at any learning rate in {len(bad)} of "
                                 f"{len(c.seeds)} seeds (its best final loss is within {COLLAPSE_MARGIN} nats of the "
                                 "unigram line): its LR sensitivity is low because there is no good learning rate to "
                                 "fall from, not because it is robust.")
        return notes

    def tables(self, rows, c: Curves, names, depths, common) -> str:
        def loss_cell(v, d, lr):
            mine = stats.select(rows, variant=v, model__n_layers=d, optim__lr=lr)
            return stats.cell([stats.final_or_inf(r) for r in mine], mine) if mine else "–"

        sens_depths = [(v, d) for d in depths for v in names if c.sens(v, d)]
        summary = markdown_table(["variant", "depth", "learning rates", "LR sensitivity", "max stable lr"],
                                 [[v, d, f"{c.lrs_at(d)[0]:g}…{c.lrs_at(d)[-1]:g}", stats.spread(c.sens(v, d).values()),
                                   self.stable_cell(c.max_stable(v, d))] for v, d in sens_depths])
        parts = [f"LR sensitivity (nats), mean ± sd over seeds (n), and max stable learning rate, median [min, max] "
                 f"over the seeds that had one (the depth check uses lr {common[0]:g}…{common[-1]:g} at every "
                 f"depth):\n\n{summary}"]
        for d in depths:
            here = [v for v in names if c.sens(v, d)]
            parts.append(f"Final validation loss at L={d} (∞ = diverged); {stats.CELL_NOTE}:\n\n"
                         + markdown_table(["variant", *[f"lr {lr:g}" for lr in c.lrs_at(d)]],
                                          [[v, *[loss_cell(v, d, lr) for lr in c.lrs_at(d)]] for v in here]))
        parts.append("Max attention logit at the end (max over layers):\n\n" + markdown_table(
            ["variant", "depth", *[f"lr {lr:g}" for lr in c.lrs]],
            [[v, d, *[stats.spread(r.get("final_attn_logit_max") for r in stats.select(
                rows, variant=v, model__n_layers=d, optim__lr=lr)) for lr in c.lrs]] for v, d in sens_depths]))
        return "\n\n".join(parts)

    @staticmethod
    def stable_cell(per_seed: dict[str, float | None]) -> str:
        """Median and range of the max stable lr over seeds, and how many seeds had no stable lr at all."""
        found = sorted(v for v in per_seed.values() if v is not None)
        none = len(per_seed) - len(found)
        if not found:
            return f"none in {none} seeds"
        text = f"{stats.median(found):g} [{found[0]:g}, {found[-1]:g}] (n={len(found)})"
        return text + (f", none in {none}" if none else "")

    @staticmethod
    def draw_curves(c: Curves, names, depths, unigram, path) -> None:
        fig, axes = plots.figure(ncols=len(depths), width=4.8, height=3.8)
        for ax, d in zip(axes, depths, strict=True):
            top = max((c.l0(v, d, s) or 0 for v in names for s in c.seeds), default=None)
            for v in [v for v in names if c.sens(v, d)]:
                per_seed = [[min(c.curve(v, d, s).get(lr, math.nan), top or math.inf) for lr in c.lrs_at(d)]
                            for s in c.seeds]
                plots.seeds_and_mean(ax, c.lrs_at(d), per_seed, color(v), v, style=STYLES.get(v, "-"))
            plots.unigram_line(ax, unigram)
            if top:
                ax.axhline(top, color="0.5", lw=0.8, ls="--", label="loss at init (diverged runs drawn here)")
            plots.log_axis(ax, c.lrs_at(d))
            plots.finish(ax, f"L = {d}, LayerNorm (thin: seeds)", "peak learning rate", "final val loss (nats/byte)")
        plots.save(fig, path)

    @staticmethod
    def draw_logits(rows, names, depths, lrs, path) -> None:
        from normtrain.reproduce.runner import curve_points

        high = lrs[-HIGH:]
        fig, axes = plots.figure(ncols=len(high), nrows=len(depths), width=4.4, height=3.2)
        for i, d in enumerate(depths):
            for j, lr in enumerate(high):
                ax = axes[i * len(high) + j]
                for v in names:
                    mine = [r for r in stats.select(rows, variant=v, model__n_layers=d, optim__lr=lr)
                            if r.get("attn_logit_curve")]
                    plots.curves(ax, [curve_points(r["attn_logit_curve"]) for r in mine], color(v), v,
                                 style=STYLES.get(v, "-"))
                ax.set_yscale("log")
                plots.finish(ax, f"L = {d}, lr {lr:g}", "step", "max attention logit", legend=(i, j) == (0, 0))
        plots.save(fig, path)
