"""Wortsman et al. 2023: final loss against peak learning rate per placement, LR sensitivity and attention logits."""

from __future__ import annotations

import math
from typing import Any

from normtrain.compare.runs import Run
from normtrain.data.unigram import COLLAPSE_MARGIN, collapsed
from normtrain.reproduce import plots, stats
from normtrain.reproduce.runner import Experiment, Findings, Plan, Scale, curve_text
from normtrain.reproduce.writeup import markdown_table

VARIANTS = ("pre", "pre+qk", "peri", "deepnorm", "post")  # the order of rows and lines
STYLES = {"pre+qk": "--"}  # Pre-LN + QK-norm: Pre-LN's colour, dashed
HIGH = 2  # the attention-logit check and figure read the grid's highest learning rates, this many


def color(name: str) -> str:
    return plots.PLACEMENT_COLORS[name.removesuffix("+qk")]


def variant(row: dict[str, Any]) -> str:
    return row["placement"] + ("+qk" if str(row.get("model.qk_norm")).lower() == "true" else "")


def sensitivity(losses: dict[float, float], l0: float) -> float | None:
    """E_η[min(ℓ(η), ℓ0) − ℓ*] over the grid (Wortsman et al. 2023, §2); a diverged run's ℓ is +∞."""
    if not losses or l0 is None:
        return None
    capped = [min(v, l0) for v in losses.values()]
    return sum(capped) / len(capped) - min(capped)


class LRSensitivity(Experiment):
    name = "lr_sensitivity"
    title = "Learning-rate sensitivity of the placements, with and without QK-norm (Wortsman et al. 2023)"
    paper = "Wortsman et al. 2023"
    reference = ("**Wortsman et al. 2023**, *Small-scale proxies for large-scale Transformer training "
                 "instabilities*, Fig. 1, 3 and §3.4")
    method = ("d 64, 4 heads (QK-norm per head), GELU FFN 256, RoPE, no biases, untied embeddings, LayerNorm; "
              "AdamW (0.9, 0.95), eps 1e-8, gradient clipping 1, a 10-step warm-up then cosine decay, independent "
              "weight decay 1e-4, z-loss 1e-4 (their recipe); 100 steps of 8 × 128 bytes at 2 and 8 layers, 3 seeds, "
              "for Pre-LN, Post-LN, DeepNorm, Peri-LN and Pre-LN + QK-norm. The attention logits are logged every 10 "
              "steps (max q·k/√d_head per layer on one sequence).")
    gpu = Scale(overrides=("model.d_model=512", "model.n_heads=8", "model.d_ff=2048", "model.seq_len=512",
                           "train.max_steps=5000", "optim.warmup_steps=500", "train.batch_size=32",
                           "train.eval_every=5000"),
                grid={"model.n_layers": "6,24", "optim.lr": "1e-4,3e-4,1e-3,3e-3,1e-2,3e-2,1e-1,3e-1,1"})

    def keeps(self, combo: dict[str, str]) -> bool:
        return str(combo.get("model.qk_norm", "false")).lower() == "false" or combo.get("placement") == "pre"

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        keys = run.layer_keys("attn_logit_max")
        peaks = [max((row[k] for k in keys if row.get(k) is not None), default=None) for row in run.rows
                 if any(k in row for k in keys)]
        steps = [row["step"] for row in run.rows if any(k in row for k in keys)]
        finite = [(s, v) for s, v in zip(steps, peaks, strict=True) if v is not None and math.isfinite(v)]
        return {**super().row(run, combo), "final_attn_logit_max": finite[-1][1] if finite else None,
                "attn_logit_curve": curve_text(*zip(*finite, strict=True)) if finite else ""}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["variant"] = variant(r)
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        lrs = sorted({float(r["optim.lr"]) for r in rows})
        names = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
        unigram = next((r["unigram_val_loss"] for r in rows if r.get("unigram_val_loss") is not None), None)
        by = {(r["variant"], int(r["model.n_layers"]), float(r["optim.lr"]), str(r.get("train.seed", "0"))): r
              for r in rows}
        seeds = sorted({k[3] for k in by})

        def final(r):  # ℓ(η); +∞ for a diverged run
            return math.inf if r["status"] == "diverged" else r.get("final_val_loss")

        def curve(v, d, s):  # η -> ℓ(η) of one seed
            return {lr: final(by[(v, d, lr, s)]) for lr in lrs if (v, d, lr, s) in by
                    and final(by[(v, d, lr, s)]) is not None}

        def l0(v, d, s):
            starts = [by[(v, d, lr, s)]["initial_val_loss"] for lr in lrs if (v, d, lr, s) in by]
            return next((x for x in starts if x is not None), None)

        def sens(v, d):
            return {s: sensitivity(curve(v, d, s), l0(v, d, s)) for s in seeds if curve(v, d, s)}

        def max_stable(v, d):
            return {s: max((lr for lr in lrs if (v, d, lr, s) in by and by[(v, d, lr, s)]["status"] == "completed"
                            and not by[(v, d, lr, s)].get("collapsed")), default=None) for s in seeds}

        def minus(a: dict, b: dict) -> dict:
            return {s: a[s] - b[s] for s in a if a[s] is not None and b.get(s) is not None}

        def logit_ratio(d, lr):
            out = {}
            for s in seeds:
                a, b = (by.get((v, d, lr, s), {}).get("final_attn_logit_max") for v in ("pre", "pre+qk"))
                out[s] = a / b if a is not None and b else None
            return out

        measured = {
            "pre_minus_pre_qk_sensitivity": {f"L={d}": minus(sens("pre", d), sens("pre+qk", d)) for d in depths},
            "pre_over_pre_qk_logit": {f"L={d}, lr {lr:g}": logit_ratio(d, lr) for d in depths for lr in lrs[-HIGH:]},
            "pre_deep_minus_shallow_sensitivity": {"": minus(sens("pre", depths[-1]), sens("pre", depths[0]))},
            "post_minus_pre_sensitivity": {f"L={d}": minus(sens("post", d), sens("pre", d)) for d in depths},
        }
        table = self.tables(rows, names, depths, lrs, sens, max_stable)

        def learned_nothing(v, d):  # seeds whose best ℓ(η) over the whole grid sits on the unigram line
            return [s for s in seeds if (c := curve(v, d, s)) and collapsed(min(c.values()), unigram)]

        # Reported, not judged (written after the first results): the sensitivity measures the fall from the best
        # learning rate, so a variant that learned nothing at any η scores low; such variants rank last.
        deep = depths[-1]
        ranking = sorted(names, key=lambda v: (len(learned_nothing(v, deep)) * 2 > len(seeds),
                                               stats.median(sens(v, deep).values()) or math.inf))
        ours = (f"LR sensitivity at L={deep}: "
                + ", ".join(f"{v} {stats.spread(sens(v, deep).values())}" for v in ranking))
        key = (f"Ranking by LR sensitivity at L={deep} (least sensitive first; a variant that learned nothing at any "
               f"learning rate in most seeds last): {', '.join(ranking)}. {ours}. Max stable lr at L={deep}: "
               + ", ".join(f"{v} {self.stable_cell(max_stable(v, deep))}" for v in ranking) + ".")
        notes = self.edge_notes(names, depths, lrs, curve, seeds)
        top = [f"{v} (L={d})" for d in depths for v in names if lrs[-1] in max_stable(v, d).values()]
        if top:
            notes.append(f"The max stable learning rate reaches the grid's top ({lrs[-1]:g}) for {', '.join(top)} in "
                         "at least one seed: there it is a lower bound (the grid brackets every optimum, not every "
                         "stability limit).")
        notes += [f"{v} at L={d} learned nothing at any learning rate in {len(bad)} of {len(seeds)} seeds (its best "
                  f"final loss is within {COLLAPSE_MARGIN} nats of the unigram line): its LR sensitivity is low "
                  "because there is no good learning rate to fall from, not because it is robust. Interpretation "
                  "added after the results; the checks are unchanged."
                  for v in names for d in depths if (bad := learned_nothing(v, d))]
        return Findings(table=table, measured=measured, key=key, ours=ours, notes=notes, figures={
            "loss_vs_lr.png": lambda path: self.draw_curves(names, depths, lrs, seeds, curve, l0, unigram, path),
            "attention_logits.png": lambda path: self.draw_logits(rows, names, depths, lrs, path)})

    @staticmethod
    def tables(rows, names, depths, lrs, sens, max_stable) -> str:
        def loss_cell(v, d, lr):
            mine = [r for r in rows
                    if r["variant"] == v and int(r["model.n_layers"]) == d and float(r["optim.lr"]) == lr]
            div = sum(r["status"] == "diverged" for r in mine)
            col = sum(bool(r.get("collapsed")) for r in mine)
            text = stats.spread([r["final_val_loss"] for r in mine if r["status"] != "diverged"])
            return text + "".join(f", {n} {w}" for n, w in ((div, "diverged"), (col, "collapsed")) if n)

        def logit_cell(v, d, lr):
            return stats.spread(r.get("final_attn_logit_max") for r in rows if r["variant"] == v
                                and int(r["model.n_layers"]) == d and float(r["optim.lr"]) == lr)

        summary = markdown_table(
            ["variant", *[f"LR sensitivity, L={d}" for d in depths], *[f"max stable lr, L={d}" for d in depths]],
            [[v, *[stats.spread(sens(v, d).values()) for d in depths],
              *[LRSensitivity.stable_cell(max_stable(v, d)) for d in depths]] for v in names])
        parts = [f"LR sensitivity (nats), mean ± std over seeds (n), and max stable learning rate, median [min, max] "
                 f"over the seeds that had one:\n\n{summary}"]
        for d in depths:
            parts.append(f"Final validation loss at L={d}, mean ± std over seeds (diverged runs left out):\n\n"
                         + markdown_table(["variant", *[f"lr {lr:g}" for lr in lrs]],
                                          [[v, *[loss_cell(v, d, lr) for lr in lrs]] for v in names]))
        parts.append("Max attention logit at the end (max over layers):\n\n" + markdown_table(
            ["variant", "depth", *[f"lr {lr:g}" for lr in lrs]],
            [[v, d, *[logit_cell(v, d, lr) for lr in lrs]] for d in depths for v in names]))
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
    def edge_notes(names, depths, lrs, curve, seeds) -> list[str]:
        """The grid should bracket each optimum; say where the best learning rate sits at an edge."""
        notes = []
        for v in names:
            for d in depths:
                best = [min(c, key=c.get) for s in seeds if (c := curve(v, d, s))]
                edge = [b for b in best if b in (lrs[0], lrs[-1])]
                if edge:
                    notes.append(f"{v} at L={d}: the best learning rate is at the grid's edge ({edge[0]:g}) in "
                                 f"{len(edge)} of {len(best)} seeds; the sensitivity is a lower bound there.")
        return notes

    @staticmethod
    def draw_curves(names, depths, lrs, seeds, curve, l0, unigram, path) -> None:
        fig, axes = plots.figure(ncols=len(depths), width=4.8, height=3.8)
        for ax, d in zip(axes, depths, strict=True):
            top = max((l0(v, d, s) or 0 for v in names for s in seeds), default=None)
            for v in names:
                per_seed = [[min(curve(v, d, s).get(lr, math.nan), top or math.inf) for lr in lrs] for s in seeds]
                plots.seeds_and_mean(ax, lrs, per_seed, color(v), v, style=STYLES.get(v, "-"))
            plots.unigram_line(ax, unigram)
            if top:
                ax.axhline(top, color="0.5", lw=0.8, ls="--", label="loss at init (diverged runs drawn here)")
            plots.log_axis(ax, lrs)
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
                    mine = [r for r in rows if r["variant"] == v and int(r["model.n_layers"]) == d
                            and float(r["optim.lr"]) == lr and r.get("attn_logit_curve")]
                    plots.curves(ax, [curve_points(r["attn_logit_curve"]) for r in mine], color(v), v,
                                 style=STYLES.get(v, "-"))
                ax.set_yscale("log")
                plots.finish(ax, f"L = {d}, lr {lr:g}", "step", "max attention logit", legend=(i, j) == (0, 0))
        plots.save(fig, path)

