"""Protocol v5's decision for one question, "is arm A better than the baseline B?", from paired seeds.

The rules, stated once (README "Is X better than Y?" and experiments/README.md link here):

1. **Best against best.** Each arm is judged at its own best value of the tuned key (the learning rate), chosen by
   the median over seeds of a *selection loss* measured on held-out windows kept apart from the judged ones, at the
   end of the run (``normtrain.study.table``): the choice never reads the judged number, and it does not lag
   behind a decaying schedule as a mean of the last training losses does.
2. **Paired seeds.** Seed s of the arm (at its best) is compared with seed s of the baseline (at its best): the
   same data order and the same initial draw, so what the seeds share cancels. D_s = loss(A, s) − loss(B, s),
   lower is better.
3. **An interval with a stated error rate.** The 1 − 2α two-sided Student t interval of the mean of D (α = 0.05: the
   90% interval). *better*: it lies below 0 (a one-sided t-test at level α); *worse*: above 0 (the same);
   *equivalent within ±δ*: inside (−δ, δ) (two one-sided tests, each at level α); equivalence is read first, so a
   difference too small to matter is called so even when it is significant. Otherwise the interval holds 0 and
   reaches past ±δ: *inconclusive (underpowered)*: absence of evidence is not evidence of absence. δ (``--margin``,
   default 0.02 nats) is also the smallest effect of interest: "no better" needs the interval to exclude −δ.
   Fewer than 2 seeds give no interval: *inconclusive (underpowered)*.
4. **Selection robustness.** Where an arm's runner-up value is within the paired seed spread of its best (the
   median selection loss of the two differs by no more than the sd over seeds of their paired difference), the
   decision is made again at the runner-up; it must be the same at every such pairing, else *inconclusive
   (selection-sensitive)*.
5. **Budget stability.** The same decision, each arm at its own best, at half the steps (T/2: with
   ``optim.schedule=wsd`` a decay branch off the shared stable phase), and the one-doubling extrapolation
   D(2T) ≈ D(T) + (D(T) − D(T/2)) on the same side of the decision's boundary; else *inconclusive
   (budget-sensitive)* with the budget at which the extrapolated line crosses it. The arms' own falls are reported,
   never a gate.
6. **Guards before any comparison.** A best value at an edge of its grid after the last extension makes the
   decision *inconclusive (best at an edge)* (its true best may lie outside: the grid is what to fix); the baseline
   must end below the unigram line by ``guard`` nats at its best, else *inconclusive (undertrained)*; a run at a
   best value that diverged, *inconclusive (diverged at the best)*.

Every check is reported whatever decides; the decision names the first that failed, in the order above (guards,
then underpowered, selection, budget).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from normtrain.study.significance import sign_test, t_half_width

BETTER, WORSE, EQUIVALENT = "better", "worse", "equivalent"
UNDERPOWERED = "inconclusive (underpowered)"
SELECTION_SENSITIVE = "inconclusive (selection-sensitive)"
BUDGET_SENSITIVE = "inconclusive (budget-sensitive)"
UNDERTRAINED = "inconclusive (undertrained)"
AT_EDGE = "inconclusive (best at an edge)"
DIVERGED = "inconclusive (diverged at the best)"
DECISIONS = (BETTER, WORSE, EQUIVALENT, UNDERPOWERED, SELECTION_SENSITIVE, BUDGET_SENSITIVE, UNDERTRAINED,
             AT_EDGE, DIVERGED)
MARGIN = 0.02  # nats: the equivalence band ±δ and the smallest effect of interest
ALPHA = 0.05  # one-sided level of each directional test (and of each of the two equivalence tests)
MAX_DOUBLINGS = 40  # a crossing further out than 2^40 × T is no crossing
GUARD = 0.05  # nats: the baseline must end this far below the unigram line (normtrain/training/outcome.py's band)


@dataclass(frozen=True)
class Protocol:
    """The numbers a decision is made with, fixed before the runs (``ablation.json`` records them)."""

    margin: float = MARGIN
    alpha: float = ALPHA
    guard: float = GUARD

    def __post_init__(self):
        problems = []
        if not (self.margin > 0 and math.isfinite(self.margin)):
            problems.append(f"margin must be a positive number of nats, not {self.margin!r}")
        if not 0 < self.alpha < 0.5:
            problems.append(f"alpha must lie in (0, 0.5), not {self.alpha!r}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def level(self) -> float:
        """The two-sided coverage of the decision's interval (0.90 at α = 0.05)."""
        return 1 - 2 * self.alpha

    def error_rates(self) -> str:
        return (f"better and worse are each a one-sided t-test at level {self.alpha:g} (an arm no different from the "
                f"baseline is called either in at most {2 * self.alpha:.0%} of ablations); equivalent is two "
                f"one-sided tests at {self.alpha:g} against ±{self.margin:g} nats (a true difference of "
                f"{self.margin:g} or more is called equivalent in at most {self.alpha:.0%}); both assume the paired "
                "differences roughly normal")


@dataclass
class Paired:
    """D_s = arm − baseline, seed by seed, at one pair of values of the tuned key, and what it decides."""

    arm_value: float
    baseline_value: float
    diffs: dict[str, float]
    n: int
    mean: float | None
    sd: float | None
    low: float | None  # the 1 − 2α t interval of the mean
    high: float | None
    sign_p: float | None  # one-sided sign test in the direction of the mean (reported, not deciding)
    decision: str


def paired(arm: dict[str, float | None], baseline: dict[str, float | None], protocol: Protocol,
           arm_value: float, baseline_value: float) -> Paired:
    """Pair the two arms' per-seed losses and decide by rule 3."""
    diffs = {s: a - baseline[s] for s, a in arm.items() if a is not None and baseline.get(s) is not None}
    vals = list(diffs.values())
    n = len(vals)
    if n == 0 or not all(math.isfinite(v) for v in vals):
        return Paired(arm_value, baseline_value, diffs, n, None, None, None, None, None,
                      DIVERGED if n else UNDERPOWERED)
    mean = statistics.fmean(vals)
    if n < 2:
        return Paired(arm_value, baseline_value, diffs, n, mean, None, None, None, None, UNDERPOWERED)
    sd, half = statistics.stdev(vals), t_half_width(vals, protocol.alpha)
    low, high = mean - half, mean + half
    sign = sign_test(vals, 0.0, greater=mean > 0) if any(vals) else None
    return Paired(arm_value, baseline_value, diffs, n, mean, sd, low, high, sign, classify(low, high, protocol))


def classify(low: float, high: float, protocol: Protocol) -> str:
    """Rule 3 on an interval: equivalence first, then a direction, else underpowered."""
    if -protocol.margin < low and high < protocol.margin:
        return EQUIVALENT
    if high < 0:
        return BETTER
    if low > 0:
        return WORSE
    return UNDERPOWERED


def boundary(decision: str, protocol: Protocol, toward: float) -> float | None:
    """The value of D at which ``decision`` would change, on the side D moves ``toward`` (its sign)."""
    if decision in (BETTER, WORSE):
        return 0.0
    if decision == EQUIVALENT:
        return protocol.margin if toward > 0 else -protocol.margin
    return None


def same_side(decision: str, value: float, protocol: Protocol) -> bool:
    """Whether a point estimate ``value`` of D lies in ``decision``'s region."""
    if decision == BETTER:
        return value < 0
    if decision == WORSE:
        return value > 0
    if decision == EQUIVALENT:
        return abs(value) < protocol.margin
    return True


@dataclass
class BudgetCheck:
    """Rule 5: the decision at T/2 and T, and where the one-doubling extrapolation lands."""

    steps: int
    half_steps: int
    mean_half: float | None
    mean_full: float | None
    decision_half: str | None
    extrapolated: float | None  # D(2T) ≈ 2·D(T) − D(T/2)
    crossing_steps: float | None  # where the line through log2 budget crosses the decision's boundary
    ok: bool | None  # None: not measured (no T/2 runs)
    why: str


def one_doubling(mean_half: float, mean_full: float, line: float | None) -> tuple[float, float | None]:
    """The line through D(T/2) and D(T) in log2 of the budget: D one doubling past T, and how many doublings past T
    it reaches ``line`` (None: never, or further than MAX_DOUBLINGS, where the line never comes near it)."""
    slope = mean_full - mean_half  # per doubling of the steps
    doublings = (line - mean_full) / slope if line is not None and slope != 0 else None
    return mean_full + slope, doublings if doublings is not None and 0 < doublings < MAX_DOUBLINGS else None


def budget_check(full: Paired, half: Paired | None, steps: int, half_steps: int, protocol: Protocol) -> BudgetCheck:
    if half is None or half.mean is None or full.mean is None:
        return BudgetCheck(steps, half_steps, None, full.mean, None, None, None, None,
                           "not measured: no runs at half the steps")
    extrapolated, doublings = one_doubling(half.mean, full.mean,
                                           boundary(full.decision, protocol, full.mean - half.mean))
    crossing = steps * 2 ** doublings if doublings is not None else None
    same = half.decision == full.decision
    holds = same_side(full.decision, extrapolated, protocol)
    ok = same and holds
    if ok:
        why = (f"the same decision at {half_steps} and {steps} steps, and one more doubling, extrapolated "
               f"(D {extrapolated:+.4f}), stays on its side")
    elif not same:
        why = f"the decision is {half.decision} at {half_steps} steps and {full.decision} at {steps}"
    else:
        why = (f"one more doubling, extrapolated, crosses the decision's boundary (D {half.mean:+.4f} at "
               f"{half_steps} steps, {full.mean:+.4f} at {steps}, about {extrapolated:+.4f} at {2 * steps})")
    if crossing is not None and not ok:
        why += f"; the line crosses it at about {crossing:.0f} steps"
    return BudgetCheck(steps, half_steps, half.mean, full.mean, half.decision, extrapolated, crossing, ok, why)


@dataclass
class ArmChoice:
    """One arm's pick at one budget: its best value, a near-tied runner-up (or None), and whether the best is at
    an edge of its grid."""

    arm: str
    values: tuple[float, ...]
    scores: dict[float, float | None]  # median selection loss per value
    best: float | None
    runner_up: float | None  # only when near-tied with the best (rule 4)
    tie_gap: float | None  # runner-up's median − best's
    tie_spread: float | None  # sd over seeds of their paired selection difference
    at_edge: bool


@dataclass
class Decision:
    """Everything a decision rests on, for ``ablation.json``."""

    arm: str
    baseline: str
    decision: str
    why: str
    at_best: Paired | None
    alternatives: list[Paired] = field(default_factory=list)  # rule 4's other pairings
    budget: BudgetCheck | None = None
    checks: dict[str, Any] = field(default_factory=dict)  # every check's outcome, whatever decided

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(arm: str, baseline: str, full: dict[tuple[float, float], Paired], half: Paired | None,
           choices: dict[str, ArmChoice], steps: int, half_steps: int, protocol: Protocol,
           baseline_margin: float | None, extensions_left: bool) -> Decision:
    """Rules 3–6 on one arm against the baseline. ``full`` holds the paired comparison at T for each pairing of
    (arm value, baseline value) that rule 4 asks for, the bests' first; ``half`` the bests' at T/2 (each at its
    own T/2 best); ``baseline_margin`` how far the baseline's median ends below the unigram line."""
    a, b = choices[arm], choices[baseline]
    first = full.get((a.best, b.best)) if a.best is not None and b.best is not None else None
    others = [p for key, p in full.items() if key != (a.best, b.best)]
    checks: dict[str, Any] = {}
    failed: list[tuple[str, str]] = []

    edges = [c.arm for c in (a, b) if c.at_edge]
    checks["best_inside_grid"] = {"at_edge": edges, "extensions_left": extensions_left, "ok": not edges}
    if edges:
        failed.append((AT_EDGE, f"the best value of {', '.join(edges)} is at an edge of its grid"
                                + (" (the grid will be extended)" if extensions_left else
                                   " after the last extension")))
    checks["trained"] = {"margin_below_unigram": baseline_margin, "needed": protocol.guard,
                         "ok": None if baseline_margin is None else baseline_margin >= protocol.guard}
    if checks["trained"]["ok"] is False:
        failed.append((UNDERTRAINED, f"the baseline {baseline} ends {baseline_margin:.3f} nats below the unigram "
                                     f"line at its best, less than the {protocol.guard:g} needed to compare"))
    if first is None:
        return Decision(arm, baseline, UNDERPOWERED, "no runs to compare at the bests", None, others, None, checks)
    if first.decision == DIVERGED:
        failed.append((DIVERGED, "a run at a best value diverged: no interval of finite differences"))
    checks["interval"] = {"n": first.n, "mean": first.mean, "low": first.low, "high": first.high,
                          "level": protocol.level, "decision": first.decision}
    if first.decision == UNDERPOWERED:
        failed.append((UNDERPOWERED, underpowered_why(first, protocol)))
    flips = [p for p in others if p.decision != first.decision]
    checks["selection"] = {"pairings": [[p.arm_value, p.baseline_value, p.decision] for p in [first, *others]],
                           "ok": not flips}
    if flips:
        f = flips[0]
        failed.append((SELECTION_SENSITIVE, f"near-tied values decide otherwise: {arm} at {f.arm_value:g} against "
                                            f"{baseline} at {f.baseline_value:g} is {f.decision} (the bests: "
                                            f"{first.decision})"))
    budget = budget_check(first, half, steps, half_steps, protocol)
    checks["budget"] = asdict(budget)
    if budget.ok is False:
        failed.append((BUDGET_SENSITIVE, budget.why))
    if failed:
        return Decision(arm, baseline, failed[0][0], "; ".join(w for _, w in failed), first, others, budget, checks)
    return Decision(arm, baseline, first.decision, decided_why(first, protocol, budget), first, others, budget,
                    checks)


def underpowered_why(p: Paired, protocol: Protocol) -> str:
    if p.low is None:
        return f"{p.n} paired seed(s): no interval (at least 2 are needed)"
    return (f"the {protocol.level:.0%} interval of the difference, {p.low:+.4f} to {p.high:+.4f} nats (n={p.n}), "
            f"holds 0 and reaches past ±{protocol.margin:g}: more seeds would tell")


def decided_why(p: Paired, protocol: Protocol, budget: BudgetCheck) -> str:
    where = {BETTER: "lies below 0", WORSE: "lies above 0", EQUIVALENT: f"lies inside ±{protocol.margin:g}"}
    text = (f"the {protocol.level:.0%} interval of the paired difference, {p.low:+.4f} to {p.high:+.4f} nats "
            f"(n={p.n}), {where[p.decision]}")
    if budget.ok is None:
        text += "; budget stability not measured (no runs at half the steps)"
    return text
