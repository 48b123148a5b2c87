"""Protocol v5 for a registered claim: a three-way call from an interval, held at half the budget and at a near-tied
learning rate (the reproductions' side of the rules normtrain/study/decision.py states for ablations).

A v5 primary check (``decide="interval"``) is read from the 1 − 2α Student t interval of the mean over seeds
(α = 0.05: the 90% interval), at each condition the analysis measured:

- *holds* (the claim is reproduced there) when the whole interval lies on the claim's side of the threshold: a
  one-sided t-test at level α;
- *refuted* when the interval excludes every effect the registration calls large enough to matter: for a claim
  ``q > t`` its top lies below ``t + sesoi`` (``Rule.sesoi``, the smallest effect of interest); for ``q < t`` its
  bottom above ``t − sesoi``; for a band, the interval lies wholly outside it. A failed test alone refutes nothing;
- otherwise *open* (underpowered): more seeds would tell.

The claim is reproduced when it holds at every condition, not reproduced when it is refuted at any, and otherwise
*inconclusive (underpowered)*. Then, in this order:

- **selection robustness**: the analysis also measures the primary with an arm's near-tied runner-up lr in place of
  its best (``measured[quantity + ALT + label]``, best_lr.runner_up decides which are near-tied); each must reach
  the same call, else *inconclusive (selection-sensitive)*;
- **budget stability**: the primary measured at half the steps (``measured[quantity + HALF]``) must reach the same
  call, and the one-doubling extrapolation 2·m(T) − m(T/2) of the mean must lie on the same side of the call's
  boundary, else *inconclusive (budget-sensitive)*, with how many doublings past T the line crosses it. A
  registration whose primary does not depend on the training budget (a model measured at initialization) says
  why in ``Registration.no_budget``; any other v5 primary without its half-budget values is *inconclusive (budget
  not measured)*.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from normtrain.study.decision import one_doubling
from normtrain.study.significance import ALPHA, sign_test, t_half_width

HALF = "@half"  # the primary's quantity at half the steps
ALT = "@alt:"  # the primary's quantity with a near-tied runner-up lr in place of a best (then a label)
HOLDS, REFUTED, OPEN = "holds", "refuted", "open"
UNDERPOWERED = "inconclusive (underpowered)"
SELECTION_SENSITIVE = "inconclusive (selection-sensitive)"
BUDGET_SENSITIVE = "inconclusive (budget-sensitive)"
BUDGET_UNMEASURED = "inconclusive (budget not measured)"
V5_VERDICTS = (UNDERPOWERED, SELECTION_SENSITIVE, BUDGET_SENSITIVE, BUDGET_UNMEASURED)


@dataclass
class Call:
    """One condition's interval and what it says about the claim."""

    n: int
    mean: float | None
    sd: float | None
    low: float | None
    high: float | None
    level: float
    call: str  # holds / refuted / open
    small: bool = False  # holds, yet the interval also excludes every effect of at least the smallest of interest
    method: str = "t interval"


def direction(op: str) -> int:
    """+1 for a claim that the quantity is large, −1 small, 0 a band."""
    return {">": 1, ">=": 1, "<": -1, "<=": -1}.get(op, 0)


def interval_call(op: str, threshold: float | tuple[float, float], sesoi: float | None, values: list[float],
                  alpha: float = ALPHA) -> Call:
    """The module docstring's three-way call on one condition's per-seed values."""
    level = 1 - 2 * alpha
    vals = [v for v in values if v is not None and not math.isnan(v)]
    n = len(vals)
    if not all(math.isfinite(v) for v in vals):
        return ranked_call(op, threshold, sesoi, vals, alpha)
    if n < 2:
        return Call(n, statistics.fmean(vals) if vals else None, None, None, None, level, OPEN)
    mean, sd, half = statistics.fmean(vals), statistics.stdev(vals), t_half_width(vals, alpha)
    low, high = mean - half, mean + half
    sign = direction(op)
    if sign == 0:
        lo, hi = threshold
        call = HOLDS if lo <= low and high <= hi else REFUTED if high < lo or low > hi else OPEN
        return Call(n, mean, sd, low, high, level, call)
    holds = low > threshold if sign > 0 else high < threshold
    refuted = high < threshold + (sesoi or 0.0) if sign > 0 else low > threshold - (sesoi or 0.0)
    call = HOLDS if holds else REFUTED if refuted else OPEN
    return Call(n, mean, sd, low, high, level, call, small=holds and refuted and bool(sesoi))


def ranked_call(op: str, threshold: float | tuple[float, float], sesoi: float | None, vals: list[float],
                alpha: float) -> Call:
    """A value is infinite (a diverged run: infinitely worse), so no mean exists: the exact sign test decides,
    at the same level, against the threshold (holds) and against the smallest effect of interest (refuted)."""
    sign = direction(op)
    level = 1 - 2 * alpha
    if sign == 0:
        return Call(len(vals), None, None, None, None, level, OPEN)
    holds = (sign_test(vals, threshold, greater=sign > 0) or 1.0) <= alpha
    refuted = (sign_test(vals, threshold + sign * (sesoi or 0.0), greater=sign < 0) or 1.0) <= alpha
    return Call(len(vals), None, None, None, None, level, HOLDS if holds else REFUTED if refuted else OPEN,
                method="sign test (a value is infinite)")


def overall(calls: dict[str, Call]) -> str:
    """Every condition holds: holds; any refuted: refuted; else open (also with nothing measured)."""
    found = [c.call for c in calls.values()]
    if found and all(c == HOLDS for c in found):
        return HOLDS
    return REFUTED if REFUTED in found else OPEN


def boundary(op: str, threshold: float | tuple[float, float], sesoi: float | None, call: str, mean: float
             ) -> float | None:
    """The value of the mean at which ``call`` would change, on the near side."""
    sign = direction(op)
    if sign == 0:
        lo, hi = threshold
        if call == HOLDS:
            return lo if abs(mean - lo) < abs(mean - hi) else hi
        return lo if mean < lo else hi if call == REFUTED else None
    if call == HOLDS:
        return threshold
    return threshold + sign * (sesoi or 0.0) if call == REFUTED else None


def same_side(op: str, threshold: float | tuple[float, float], sesoi: float | None, call: str, value: float) -> bool:
    """Whether a point estimate lies in ``call``'s region."""
    sign = direction(op)
    if sign == 0:
        lo, hi = threshold
        inside = lo <= value <= hi
        return inside if call == HOLDS else not inside if call == REFUTED else True
    if call == HOLDS:
        return sign * (value - threshold) > 0
    if call == REFUTED:
        return sign * (value - threshold - sign * (sesoi or 0.0)) < 0
    return True


@dataclass
class BudgetAt:
    """Budget stability at one condition."""

    call_half: str
    mean_half: float | None
    mean_full: float | None
    extrapolated: float | None
    crossing_doublings: float | None
    ok: bool
    why: str


def budget_at(rule, full: Call, half: Call) -> BudgetAt:
    """Rule of budget stability at one condition (``rule``: the primary Rule)."""
    if full.mean is None or half.mean is None:  # a diverged seed: no mean to extrapolate, the calls alone compare
        same = half.call == full.call
        return BudgetAt(half.call, half.mean, full.mean, None, None, same,
                        f"{half.call} at T/2 and {full.call} at T (a value is infinite: no mean to extrapolate)")
    extrapolated, crossing = one_doubling(half.mean, full.mean,
                                          boundary(rule.op, rule.threshold, rule.sesoi, full.call, full.mean))
    same = half.call == full.call
    holds = same_side(rule.op, rule.threshold, rule.sesoi, full.call, extrapolated)
    ok = same and holds
    if ok:
        why = f"{full.call} at T/2 and T; one doubling more, extrapolated ({extrapolated:+.4g}), stays on its side"
    elif not same:
        why = f"{half.call} at T/2 (mean {half.mean:+.4g}) but {full.call} at T (mean {full.mean:+.4g})"
    else:
        why = (f"{full.call} at T/2 and T, but one doubling more, extrapolated (mean {half.mean:+.4g} → "
               f"{full.mean:+.4g} → about {extrapolated:+.4g}), crosses the boundary")
    if crossing is not None and not ok:
        why += f"; the line crosses it about {crossing:.1f} doublings past T"
    return BudgetAt(half.call, half.mean, full.mean, extrapolated, crossing, ok, why)


def calls_of(rule, values: dict[str, dict[str, float | None]] | None, alpha: float = ALPHA) -> dict[str, Call]:
    return {cond: interval_call(rule.op, rule.threshold, rule.sesoi, [v for v in seeds.values() if v is not None],
                                alpha) for cond, seeds in (values or {}).items()}


def judge_primary(rule, measured: dict[str, Any], no_budget: str = "", alpha: float = ALPHA
                  ) -> tuple[str | None, str, dict[str, Any]]:
    """The v5 primary: ``(verdict or None when the claim is decided by the call, why, details for result.json)``.
    None means: reproduced (call holds) or not reproduced (refuted), as ``details["call"]`` says."""
    full = calls_of(rule, measured.get(rule.quantity), alpha)
    call = overall(full)
    details: dict[str, Any] = {"call": call, "level": 1 - 2 * alpha, "alpha": alpha, "sesoi": rule.sesoi,
                               "conditions": {c: asdict(v) for c, v in full.items()}, "selection": {}, "budget": {}}
    failed: list[tuple[str, str]] = []
    if call == OPEN:
        failed.append((UNDERPOWERED, open_why(full)))
    for key in sorted(k for k in measured if k.startswith(rule.quantity + ALT)):
        alt = overall(calls_of(rule, measured[key], alpha))
        label = key.removeprefix(rule.quantity + ALT)
        details["selection"][label] = alt
        if alt != call and call != OPEN:
            failed.append((SELECTION_SENSITIVE, f"with {label} the primary is {alt}, at the bests {call}"))
    if no_budget:
        details["budget"] = {"not_applicable": no_budget}
    elif rule.quantity + HALF not in measured:
        failed.append((BUDGET_UNMEASURED, "the primary was not measured at half the steps"))
    else:
        half = calls_of(rule, measured[rule.quantity + HALF], alpha)
        for cond, c in full.items():
            if c.call != call:
                continue  # a condition that does not carry the call (open, where another refutes it)
            if cond not in half or not half[cond].n:  # absent, or every value missing (its runs were not made)
                failed.append((BUDGET_UNMEASURED, f"no half-budget values at {cond or 'the condition'}"))
                continue
            at = budget_at(rule, c, half[cond])
            details["budget"][cond] = asdict(at)
            if not at.ok:
                failed.append((BUDGET_SENSITIVE, (f"at {cond}: " if cond else "") + at.why))
    if failed:
        return failed[0][0], "; ".join(w for _, w in failed), details
    return None, decided_why(rule, full), details


def open_why(calls: dict[str, Call]) -> str:
    parts = []
    for cond, c in calls.items():
        where = f" at {cond}" if cond else ""
        if c.low is None:
            parts.append(f"{c.n} seed(s){where}: no interval (at least 2 finite values are needed)")
        elif c.call == OPEN:
            parts.append(f"the {c.level:.0%} interval {c.low:+.4g} to {c.high:+.4g} (n={c.n}){where} neither "
                         "clears the threshold nor excludes the smallest effect of interest: more seeds would tell")
    return "; ".join(parts) or "nothing measured"


def span(c: Call) -> str:
    """A condition's evidence in words: its interval, or the sign test's call where a value is infinite."""
    if c.low is None:
        return f"{c.method}, n={c.n}"
    return f"{c.low:+.4g} to {c.high:+.4g} (n={c.n})"


def decided_why(rule, calls: dict[str, Call]) -> str:
    call = overall(calls)
    shown = ", ".join(span(c) + (f" at {cond}" if cond else "") for cond, c in calls.items() if c.call == call)
    head = f"the {next(iter(calls.values())).level:.0%} t interval of {rule.quantity}, {shown},"
    if call == HOLDS:
        text = f"{head} clears {rule.op} {rule.threshold}"
        if any(c.small for c in calls.values()):
            text += f", though it also excludes effects of {rule.sesoi:g} or more (real but small)"
        return text
    if direction(rule.op):
        return f"{head} excludes the smallest effect of interest ({rule.sesoi:g} past {rule.threshold})"
    return f"{head} lies outside {list(rule.threshold)}"


def chance_all_pass(n: int, share: float) -> float:
    """The chance that at least ``share`` of ``n`` seeds pass by a coin's toss: a seed-share rule's error rate under
    no effect (2^-n for every seed: 12.5% at 3)."""
    need = math.ceil(share * n - 1e-9)
    return sum(math.comb(n, k) for k in range(need, n + 1)) / 2 ** n


def details_text(details: dict[str, Any]) -> str:
    """The v5 checks behind a verdict, in Markdown: the call per condition, selection robustness, budget stability."""
    lines = [f"**Protocol v5 checks of the primary** ({details['level']:.0%} t intervals; smallest effect of "
             f"interest {details['sesoi'] if details['sesoi'] is not None else '–'}):", ""]
    for cond, c in details["conditions"].items():
        where = cond or "the condition"
        found = f"{c['low']:+.4g} to {c['high']:+.4g}" if c["low"] is not None else "no interval"
        lines.append(f"- {where}: {c['call']} ({c['method']}: {found}, n={c['n']})")
    for label, alt in details["selection"].items():
        lines.append(f"- selection robustness, {label}: {alt}")
    if not details["selection"]:
        lines.append("- selection robustness: no near-tied runner-up lr")
    budget = details["budget"]
    if "not_applicable" in budget:
        lines.append(f"- budget stability: not applicable ({budget['not_applicable']})")
    for cond, b in budget.items():
        if cond != "not_applicable":
            lines.append(f"- budget stability{' at ' + cond if cond else ''}: {'holds' if b['ok'] else 'fails'} "
                         f"({b['why']})")
    if not budget:
        lines.append("- budget stability: not measured")
    return "\n".join(lines)


CLAIMED_BY = {"ours": ("supported (our hypothesis)", "not supported (our hypothesis)"),
              "secondary": ("reproduced (a secondary source's claim)", "not reproduced (a secondary source's claim)")}


def verdict_words(result: dict[str, Any]) -> str:
    """The verdict as the claim's source allows (protocol v5 names every source): a hypothesis of ours is
    *supported* or not, never a paper's claim *not reproduced*; a secondary source's claim says whose it is."""
    verdict = result["verdict"]
    source = (result.get("primary") or {}).get("source")
    if result.get("protocol", 3) < 5 or source not in CLAIMED_BY:
        return verdict
    held, failed = CLAIMED_BY[source]
    return {"reproduced": held, "not reproduced": failed}.get(verdict, verdict)
