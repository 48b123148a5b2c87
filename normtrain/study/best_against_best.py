"""Arms compared each at its own best value of a tuned key, at two budgets: the analysis behind ``normtrain-ablate``
and ``normtrain-compare --tune`` (the rules: normtrain/study/decision.py).

Input: one row per run, with the arm's value under the arm key, the tuned value under the tuned key, the seed
(``train.seed``), the run's length (``steps``: T, or T/2 for the half-budget runs), its held-out selection loss
(``select_loss``: the loss on windows kept apart from the judged ones, at the run's end) and its judged loss
(``final_val_loss``), its ``status`` and the unigram baseline. Output: per budget each arm's pick (best, near-tied
runner-up, edge), and per arm against the baseline the decision with everything it rests on.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from normtrain.compare.runs import Run
from normtrain.study import best_lr, stats
from normtrain.study.decision import ArmChoice, Decision, Paired, Protocol, decide, paired
from normtrain.study.rows import curve_points, run_row

SELECT = "select_loss"
JUDGED = "final_val_loss"
STEPS = "steps"
HELD_OUT = "held-out windows"  # a row's select_source when its run scored the selection windows
TRAIN_TAIL = "training loss, last 10%"  # a row's select_source when its run had no selection windows


def study_row(run: Run, tail_fallback: bool) -> dict[str, Any]:
    """``run_row`` plus what a study of arms reads: the selection loss (the held-out windows' at the run's end; with
    ``tail_fallback``, a run trained without them is picked by its last 10% of training losses, and says so), the
    training-code digest and the run folder."""
    held_out = run.summary.get("final_select_loss")
    tail = held_out is None and tail_fallback
    return {**run_row(run), SELECT: best_lr.selection_of(run) if tail else held_out,
            "select_source": HELD_OUT if held_out is not None else (TRAIN_TAIL if tail else None),
            "training_code_digest": (run.summary.get("code") or {}).get("training_code_digest"),
            "run_dir": str(run.path)}


def select_or_inf(row: dict[str, Any]) -> float | None:
    """The held-out selection loss, +∞ for a diverged run."""
    return math.inf if row.get("status") == "diverged" else row.get(SELECT)


def judged_or_inf(row: dict[str, Any]) -> float | None:
    return stats.final_or_inf(row)


@dataclass
class Budget:
    """One budget's rows and each arm's pick there."""

    steps: int
    rows: list[dict[str, Any]]
    best: dict[str, best_lr.BestLr]
    choices: dict[str, ArmChoice]


@dataclass
class Analysis:
    arm_key: str
    tune: str
    arms: list[str]
    baseline: str
    protocol: Protocol
    full: Budget
    half: Budget | None
    decisions: dict[str, Decision]  # every arm but the baseline
    unigram: float | None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"arm_key": self.arm_key, "tune": self.tune, "arms": self.arms, "baseline": self.baseline,
                "protocol": {"margin": self.protocol.margin, "alpha": self.protocol.alpha,
                             "guard": self.protocol.guard, "interval_level": self.protocol.level,
                             "error_rates": self.protocol.error_rates()},
                "unigram_val_loss": self.unigram,
                "budgets": {str(b.steps): budget_dict(b, self.arm_key) for b in (self.full, self.half)
                            if b is not None},
                "decisions": {a: d.as_dict() for a, d in self.decisions.items()}, "notes": self.notes}


def budget_dict(b: Budget, arm_key: str) -> dict[str, Any]:
    return {"steps": b.steps, "arms": {a: {"values": list(c.values), "median_select_loss": {
        f"{v:g}": s for v, s in c.scores.items()}, "best": c.best, "runner_up": c.runner_up, "tie_gap": c.tie_gap,
        "tie_spread": c.tie_spread, "at_edge": c.at_edge,
        "judged_at_best": judged_at(b.rows, c.arm, c.best, b.best[c.arm].key, arm_key) if c.best is not None else {}}
        for a, c in b.choices.items()}}


def arm_choice(rows: list[dict[str, Any]], arm_key: str, arm: str, tune: str) -> tuple[best_lr.BestLr, ArmChoice]:
    best = best_lr.choose(rows, arm_key, arm, select_or_inf, key=tune)
    second, gap, spread = best_lr.runner_up(rows, arm_key, best, select_or_inf)
    return best, ArmChoice(arm, best.lrs, best.score, best.lr, second, gap, spread, best.at_edge)


def judged_at(rows: list[dict[str, Any]], arm: str, value: float | None, tune: str,
              arm_key: str | None = None) -> dict[str, float | None]:
    """``{seed: judged loss}`` of the arm's runs at ``value``."""
    mine = [r for r in rows if (arm_key is None or str(r.get(arm_key)) == arm) and value is not None
            and best_lr.lr_of(r, tune) == value]
    return stats.per_seed(mine, judged_or_inf)


def budget(rows: list[dict[str, Any]], steps: int, arm_key: str, arms: Sequence[str], tune: str) -> Budget:
    mine = [r for r in rows if int(r[STEPS]) == steps]
    picks = {a: arm_choice(mine, arm_key, a, tune) for a in arms}
    return Budget(steps, mine, {a: p[0] for a, p in picks.items()}, {a: p[1] for a, p in picks.items()})


def compare_at(b: Budget, arm_key: str, arm: str, baseline: str, tune: str, protocol: Protocol,
               everywhere: bool) -> dict[tuple[float, float], Paired]:
    """The paired comparison at the two bests and, ``everywhere``, at every near-tied pairing (rule 4)."""
    a, base = b.choices[arm], b.choices[baseline]
    if a.best is None or base.best is None:
        return {}
    arm_values = [a.best, *([a.runner_up] if everywhere and a.runner_up is not None else [])]
    base_values = [base.best, *([base.runner_up] if everywhere and base.runner_up is not None else [])]
    arm_rows = [r for r in b.rows if str(r.get(arm_key)) == arm]
    base_rows = [r for r in b.rows if str(r.get(arm_key)) == baseline]
    return {(va, vb): paired(judged_at(arm_rows, arm, va, tune), judged_at(base_rows, baseline, vb, tune), protocol,
                             va, vb) for va in arm_values for vb in base_values}


def analyse(rows: list[dict[str, Any]], arm_key: str, arms: Sequence[str], baseline: str, tune: str,
            steps: int, half_steps: int | None, protocol: Protocol, extensions_left: bool = False) -> Analysis:
    """Every arm against the baseline, each at its own best, at T and (where run) T/2."""
    full = budget(rows, steps, arm_key, arms, tune)
    half = budget(rows, half_steps, arm_key, arms, tune) if half_steps and any(
        int(r[STEPS]) == half_steps for r in rows) else None
    unigram = stats.unigram_of(full.rows)
    base = full.choices[baseline]
    base_median = stats.median(judged_at(full.rows, baseline, base.best, tune, arm_key).values())
    margin = unigram - base_median if unigram is not None and base_median is not None else None
    decisions = {}
    for arm in arms:
        if arm == baseline:
            continue
        at_full = compare_at(full, arm_key, arm, baseline, tune, protocol, everywhere=True)
        at_half = compare_at(half, arm_key, arm, baseline, tune, protocol, everywhere=False) if half else {}
        decisions[arm] = decide(arm, baseline, at_full, next(iter(at_half.values()), None), full.choices, steps,
                                half_steps or steps // 2, protocol, margin, extensions_left)
    notes = [] if all(r.get("select_source") != TRAIN_TAIL for r in rows) else [
        "some runs have no held-out selection loss (trained without train.select_windows): their pick reads the "
        "mean training loss over the last 10% instead, which lags behind a decaying schedule"]
    return Analysis(arm_key, tune, list(arms), baseline, protocol, full, half, decisions, unigram, notes)


def falls(rows: list[dict[str, Any]], arm: str, arm_key: str, value: float | None, tune: str) -> float | None:
    """The arm's median fall of the validation loss over the last quarter of its runs at ``value`` (reported, never
    a gate: rule 5)."""
    drops = []
    for r in rows:
        if str(r.get(arm_key)) != arm or value is None or best_lr.lr_of(r, tune) != value or not r.get("val_curve"):
            continue
        pts = curve_points(r["val_curve"])
        if len(pts) >= 2:
            last = pts[-1][0]
            before = [v for s, v in pts if s <= 0.75 * last]
            if before:
                drops.append(before[-1] - pts[-1][1])
    return statistics.median(drops) if drops else None
