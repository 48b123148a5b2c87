"""Best against best (issue 37): compare architectures each at its own best learning rate, chosen by a fixed rule.

An architecture's loss at one learning rate is one point of its loss-vs-lr curve, not its quality. An experiment
whose grid has an lr axis (``optim.lr``) and an arm axis (``norm``, ``placement``...) trains every arm at ≥ 3
learning rates, and this module

- picks each arm's best lr by **the selection rule**, fixed before the runs and declared in the registration: the lr
  whose runs have the lowest *median over seeds* of the **selection loss**, the mean training loss over the last
  ``SELECTION_FRACTION`` of the steps. The training batches are a different split from the validation windows the
  comparison is judged on, so the choice does not peek at the judged number (picking on the judged loss itself
  would bias every arm's judged loss downward by its seed noise). A diverged run's selection loss is +∞; a tie
  goes to the smaller lr;
- flags an arm whose best lr sits at an edge of its grid (the smallest or the largest lr run, or a grid of fewer
  than three): its true best may lie outside, and the write-up says "extend the grid". The registration makes an
  inside best a precondition (quantity ``best_lr_inside_grid``: 1 inside, 0 at an edge), so a comparison at an
  edge is inconclusive;
- reads any per-run quantity at each arm's best lr, per seed, and pairs two arms by seed (seed s of arm A at A's
  best lr against seed s of arm B at B's), so rules refer to them like any other quantity;
- shows the whole curve: a Markdown table (arm × lr: median and range over seeds, the best marked) and a figure
  (loss against lr on a log axis, every seed a point, the medians joined, the best ringed).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from normtrain.study import plots, stats
from normtrain.study.verdicts import ALL_SEEDS
from normtrain.util.markdown import value_table as markdown_table
from normtrain.util.numbers import number

LR_AXIS = "optim.lr"
SELECTION = "selection_loss"  # the runs.csv column the rule reads
SELECTION_FRACTION = 0.1  # the selection loss averages the training loss over this last share of the steps
RULE = ("each arm's best learning rate is the one whose runs have the lowest median over seeds of the selection "
        f"loss, the mean training loss over the last {SELECTION_FRACTION:.0%} of the steps (training batches, not "
        "the validation windows the comparison is judged on); a diverged run counts as +∞, a tie goes to the "
        "smaller lr; a best lr at the grid's smallest or largest value is at an edge: extend the grid")

HELD_OUT_RULE = ("each arm's best learning rate is the one whose runs have the lowest median over seeds of the "
                 "selection loss, the loss at the run's end on held-out validation windows that lie between the "
                 "judged ones and never overlap them (train.select_windows: best_against_best.select_or_inf); a "
                 "diverged run counts as +∞, a tie goes to the smaller lr; a best lr at the grid's smallest or "
                 "largest value is at an edge: extend the grid")  # protocol v5's score (normtrain/study/decision.py)

Value = Callable[[dict[str, Any]], float | None]


def selection_loss(steps: Sequence[float], losses: Sequence[float], max_steps: int,
                   fraction: float = SELECTION_FRACTION) -> float | None:
    """The mean of the logged training losses at steps ≥ (1 − ``fraction``) · ``max_steps`` (a run too short to log
    there, a smoke run: its last logged loss; None when nothing is logged; +∞ when one is not finite)."""
    pairs = list(zip(steps, losses, strict=True))
    tail = [float(v) for s, v in pairs if s >= (1 - fraction) * max_steps] or [float(v) for _, v in pairs[-1:]]
    if not tail:
        return None
    return math.inf if not all(math.isfinite(v) for v in tail) else sum(tail) / len(tail)


def selection_of(run) -> float | None:
    """A trained run's selection loss (``run``: a normtrain.compare.runs.Run), from its logged ``train/loss``."""
    steps, losses = run.series("train/loss")
    last = ((run.summary.get("config") or {}).get("train") or {}).get("max_steps") or 0
    return selection_loss(steps.tolist(), losses.tolist(), int(last))


def lr_of(row: dict[str, Any], key: str = LR_AXIS) -> float:
    """The row's value of the tuned key (the learning rate, unless a study tunes another)."""
    return float(row[key])


def selection_or_inf(row: dict[str, Any]) -> float | None:
    """A row's selection loss, +∞ for a diverged run."""
    return math.inf if row.get("status") == "diverged" else row.get(SELECTION)


@dataclass(frozen=True)
class BestLr:
    """One arm's grid, its selection score per lr (median over seeds) and the lr the rule picked (None: nothing
    scored)."""

    arm: str
    lrs: tuple[float, ...]
    score: dict[float, float | None]
    lr: float | None
    key: str = LR_AXIS  # the tuned key (a study may tune another than the learning rate)

    @property
    def at_edge(self) -> bool:
        """The best is the grid's smallest or largest lr (or the grid has fewer than 3): extend the grid."""
        return self.lr is not None and (len(self.lrs) < 3 or self.lr in (self.lrs[0], self.lrs[-1]))

    def edge_note(self) -> str | None:
        if not self.at_edge:
            return None
        if len(self.lrs) < 3:
            return f"{self.arm}: only {len(self.lrs)} learning rate(s) run; a best needs at least 3 around it"
        side, factor = ("smallest", self.lrs[0] / self.lrs[1]) if self.lr == self.lrs[0] else \
            ("largest", self.lrs[-1] / self.lrs[-2])
        return (f"{self.arm}: the best lr {self.lr:g} is the grid's {side}: extend the grid (next point "
                f"{self.lr * factor:.3g})")


def arm_rows(rows: list[dict[str, Any]], arm_key: str, arm: str) -> list[dict[str, Any]]:
    return [r for r in rows if str(r.get(arm_key)) == arm]


def choose(rows: list[dict[str, Any]], arm_key: str, arm: str, value: Value = selection_or_inf,
           key: str = LR_AXIS) -> BestLr:
    """The arm's best lr by the rule: the lowest median over seeds of ``value`` (default: the selection loss)."""
    mine = arm_rows(rows, arm_key, arm)
    lrs = tuple(sorted({lr_of(r, key) for r in mine}))
    score: dict[float, float | None] = {}
    for lr in lrs:
        vals = [v for r in mine if lr_of(r, key) == lr and (v := value(r)) is not None and not math.isnan(v)]
        score[lr] = statistics.median(vals) if vals else None
    scored = [(s, lr) for lr, s in score.items() if s is not None]
    return BestLr(arm, lrs, score, min(scored)[1] if scored else None, key)  # ties: the smaller lr (sorted second)


def runner_up(rows: list[dict[str, Any]], arm_key: str, best: BestLr, value: Value = selection_or_inf
              ) -> tuple[float | None, float | None, float | None]:
    """The arm's second-best value, the gap of its median score above the best's, and the sd over seeds of their
    paired score difference; the runner-up is returned only when near-tied (the gap no larger than that spread), so
    a study judges there too (None, gap, spread otherwise). One seed has no spread: no near-tie can be told."""
    ranked = sorted((s, v) for v, s in best.score.items() if s is not None and v != best.lr)
    if best.lr is None or not ranked or not math.isfinite(best.score[best.lr]):
        return None, None, None
    gap_score, second = ranked[0]
    mine = arm_rows(rows, arm_key, best.arm)
    at = {v: stats.per_seed([r for r in mine if lr_of(r, best.key) == v], value) for v in (best.lr, second)}
    spread = stats.paired_sd(at[second], at[best.lr])
    gap = gap_score - best.score[best.lr]
    return (second if spread is not None and math.isfinite(gap) and gap <= spread else None), gap, spread


def near_tied(rows: list[dict[str, Any]], arm_key: str, best: dict[str, BestLr], arms: Sequence[str] | None = None,
              value: Value = selection_or_inf) -> dict[str, dict[str, BestLr]]:
    """Protocol v5's selection robustness: for each arm (of ``arms``, default all) whose runner-up lr is near-tied
    with its best (``runner_up``), ``best`` with that arm moved to its runner-up, labelled for ``QUANTITY@alt:LABEL``
    (normtrain/study/claim.py). An analysis measures its primary once per entry, as at the bests."""
    from dataclasses import replace

    found = {}
    for arm in arms if arms is not None else list(best):
        second, _, _ = runner_up(rows, arm_key, best[arm], value)
        if second is not None:
            found[f"{arm} at its runner-up lr {second:g}"] = {**best, arm: replace(best[arm], lr=second)}
    return found


def best_lrs(rows: list[dict[str, Any]], arm_key: str, arms: Sequence[str],
             value: Value = selection_or_inf) -> dict[str, BestLr]:
    return {a: choose(rows, arm_key, a, value) for a in arms}


def runs_at_best(rows: list[dict[str, Any]], arm_key: str, best: BestLr) -> list[dict[str, Any]]:
    """The arm's runs (one per seed) at its best lr (none when it has no best)."""
    if best.lr is None:
        return []
    return [r for r in arm_rows(rows, arm_key, best.arm) if lr_of(r, best.key) == best.lr]


def val_curves_at_best(rows: list[dict[str, Any]], arm_key: str, best: BestLr) -> list[list[tuple[float, float]]]:
    """The validation curves (``step, loss`` points) of the arm's runs at its best lr, for a figure."""
    from normtrain.study.rows import curve_points

    return [curve_points(r["val_curve"]) for r in runs_at_best(rows, arm_key, best) if r.get("val_curve")]


def lr_text(best: BestLr) -> str:
    """The best lr for a table cell: ``1e-3``, ``1.25e-2 (edge)``, or ``–`` when there is none."""
    return "–" if best.lr is None else f"{best.lr:g}" + (" (edge)" if best.at_edge else "")


def at_best(rows: list[dict[str, Any]], arm_key: str, best: BestLr, value: str | Value) -> dict[str, float | None]:
    """``{seed: value}`` of the arm's runs at its best lr (empty when no best)."""
    return stats.per_seed(runs_at_best(rows, arm_key, best), value) if best.lr is not None else {}


def paired_at_best(rows: list[dict[str, Any]], arm_key: str, best: dict[str, BestLr], arm: str, reference: str,
                   value: str | Value = stats.final_or_inf,
                   op: Callable[[float, float], float | None] = stats.difference) -> dict[str, float | None]:
    """``op(arm's value, reference's value)`` seed by seed, each arm at its own best lr (``{}`` if one is missing)."""
    if arm not in best or reference not in best:
        return {}
    return stats.paired(at_best(rows, arm_key, best[arm], value), at_best(rows, arm_key, best[reference], value), op)


def inside_grid(best: dict[str, BestLr]) -> dict[str, dict[str, float | None]]:
    """The precondition's quantity: per arm, 1.0 when its best lr lies inside its grid, 0.0 at an edge (None: no
    best), as one value (the best is chosen over all seeds at once)."""
    return {arm: {ALL_SEEDS: None if b.lr is None else float(not b.at_edge)} for arm, b in best.items()}


def curve_table(rows: list[dict[str, Any]], arm_key: str, best: dict[str, BestLr],
                value: Value = stats.final_or_inf) -> str:
    """Arm × lr: median [min, max] (n) of ``value`` over seeds; the rule's best lr in bold with "best", an edge
    best also "edge"."""
    key = next(iter(best.values())).key if best else LR_AXIS
    lrs = sorted({lr_of(r, key) for r in rows})
    body = []
    for arm, b in best.items():
        cells = []
        for lr in lrs:
            vals = [value(r) for r in arm_rows(rows, arm_key, arm) if lr_of(r, key) == lr]
            text = range_text(vals)
            if lr == b.lr:
                text = f"**{text}** best" + (" (edge)" if b.at_edge else "")
            cells.append(text)
        body.append([arm, *cells])
    name = "lr" if key == LR_AXIS else key
    return markdown_table([arm_key, *(f"{name} {lr:g}" for lr in lrs)], body)


def range_text(values: Sequence[float | None]) -> str:
    """``1.234 [1.230, 1.240] (n=5)``: the median and the range over seeds (∞ for diverged runs); ``–`` for none."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return "–"
    return f"{number(statistics.median(vals))} [{number(min(vals))}, {number(max(vals))}] (n={len(vals)})"


def draw_val_at_best(ax, rows: list[dict[str, Any]], arm_key: str, best: dict[str, BestLr], colors: dict[str, str],
                     unigram: float | None, title: str, style: Callable[[str], str] = lambda arm: "-") -> None:
    """Each arm's validation curves at its best lr (thin: seeds, thick: their mean), the unigram line, and a loss
    axis that keeps every curve readable (``style``: each arm's line style)."""
    drawn = []
    for arm, b in best.items():
        mine = val_curves_at_best(rows, arm_key, b)
        plots.curves(ax, mine, colors.get(arm, "k"), f"{arm} at lr {b.lr:g}" if b.lr else arm, style=style(arm))
        drawn += mine
    plots.unigram_line(ax, unigram)
    plots.loss_range(ax, unigram, drawn)
    plots.finish(ax, title, "step", "val loss (nats/byte)")


def draw_curves(ax, rows: list[dict[str, Any]], arm_key: str, best: dict[str, BestLr], colors: dict[str, str],
                value: Value = stats.final_or_inf, unigram: float | None = None) -> None:
    """Loss against lr (log x): every seed a point, the medians joined, each arm's best lr ringed; diverged runs
    (+∞) are left out of the points and the medians they would break. A unigram line far above every point is
    named in the legend, not drawn: the axis keeps the differences between the arms readable."""
    key = next(iter(best.values())).key if best else LR_AXIS
    lrs = sorted({lr_of(r, key) for r in rows})
    for arm, b in best.items():
        color = colors.get(arm, "k")
        points = [(lr_of(r, key), v) for r in arm_rows(rows, arm_key, arm) if (v := value(r)) is not None
                  and math.isfinite(v)]
        ax.scatter([p[0] for p in points], [p[1] for p in points], color=color, s=10, alpha=plots.SEED_ALPHA + 0.2)
        medians = [(lr, statistics.median(vs)) for lr in lrs if (vs := [v for x, v in points if x == lr])]
        if medians:
            ax.plot(*zip(*medians, strict=True), "-", color=color, lw=plots.MEAN_LW, marker="o", ms=4,
                    label=f"{arm} (median of seeds)")
        if b.lr is not None and (at := dict(medians).get(b.lr)) is not None:
            ax.scatter([b.lr], [at], s=140, facecolors="none", edgecolors=color, linewidths=1.5)
    finite = [v for r in rows if (v := value(r)) is not None and math.isfinite(v)]
    if finite and unigram is not None and unigram > max(finite) + 0.3:  # the curve's differences, not the line
        low, high = min(finite), max(finite)
        ax.set_ylim(low - 0.1 * (high - low + 0.01), high + 0.1 * (high - low + 0.01))
        ax.plot([], [], "k:", lw=1.2, label=f"unigram baseline {number(unigram)} (above the axis)")
    else:
        plots.unigram_line(ax, unigram)
    if lrs:
        plots.log_axis(ax, lrs)
    xlabel = "peak learning rate" if key == LR_AXIS else key
    plots.finish(ax, f"final val loss against {'lr' if key == LR_AXIS else key} (ring: the rule's best)", xlabel,
                 "final val loss (nats/byte)")


def judged_pick_notes(rows: list[dict[str, Any]], arm_key: str, best: dict[str, BestLr]) -> list[str]:
    """Reported: the lr that the judged loss itself would have picked, where it differs from the rule's, and the
    medians of the judged loss at both (a near-tie the rule broke the other way shows here)."""
    picks = best_lrs(rows, arm_key, list(best), stats.final_or_inf)
    differ = [f"{a} {p.lr:g} (rule: {b.lr:g}; median final loss {number(p.score[p.lr])} against "
              f"{number(p.score.get(b.lr))})" for a, b in best.items()
              if (p := picks[a]).lr is not None and b.lr is not None and p.lr != b.lr]
    if not differ:
        return [f"The final validation loss itself picks the same best lr as the selection rule for every {arm_key}."]
    return [f"The final validation loss itself would pick another lr for: {', '.join(differ)}; the verdict uses "
            "the rule's."]


def rule_notes(rows: list[dict[str, Any]], arm_key: str, best: dict[str, BestLr], where: str = "") -> list[str]:
    """The notes every best-against-best analysis reports for one group of arms (``where`` names the group, e.g.
    ``"24 layers: "``): each best at a grid's edge, and where the judged loss itself would pick another lr."""
    edges = [n for b in best.values() if (n := b.edge_note())]
    return [f"{where}{note}" for note in [*edges, *judged_pick_notes(rows, arm_key, best)]]
