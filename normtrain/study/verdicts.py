"""Judging: a declared rule applied to per-seed values (:func:`judge`), and the verdict from the checks.

The rules are declared in normtrain/reproduce/preregistered/NAME.py (normtrain.study.preregistration). Each
check keeps, per condition, every seed's value, the median, the range, the interval named for what it is (the range
of n seeds with n ≤ 5, the 95% bootstrap CI of the median from 6 on: normtrain.study.stats.interval) and, for a
one-sided rule, the p-values of the sign test and the t-test against the threshold in the claim's direction.

The verdict (:func:`decide`):

- **v4**: the primary check alone decides *reproduced* / *not reproduced*; before it, a claim the registration
  calls untestable at this scale is *inconclusive at this scale*, a failed trainability guard *inconclusive
  (undertrained)*, a failed or unmeasured precondition *inconclusive (precondition)*, and an after-pilot
  re-registration that reran its pilot's seeds *inconclusive (pilot seeds reused)*: a deterministic rerun is no new
  evidence. Secondary checks are reported beside it and change nothing.
- **v5**: as v4 up to the primary, which is then read from its interval (normtrain/study/claim.py): reproduced,
  not reproduced only where the interval excludes the smallest effect of interest, else inconclusive
  (underpowered), and the call must hold at a near-tied lr and at half the steps. A seed-share rule says its
  chance of passing by luck alone (``chance``: 12.5% for every one of 3 seeds).
- **v3** (:func:`verdict`, for the registrations made before v4): every check alike, "partly reproduced" when some
  held.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from normtrain.study import claim
from normtrain.study.preregistration import INTERVAL, OPS, TESTS, Registration, Rule
from normtrain.study.significance import ALPHA, sign_test, t_test
from normtrain.study.stats import interval, median_ci
from normtrain.util.numbers import number

INCONCLUSIVE = "inconclusive (undertrained)"
PRECONDITION = "inconclusive (precondition)"
REUSED = "inconclusive (pilot seeds reused)"
AT_THIS_SCALE = "inconclusive at this scale"
V4_VERDICTS = ("reproduced", "not reproduced", INCONCLUSIVE, PRECONDITION, REUSED, AT_THIS_SCALE, "not judged")
Values = Mapping[str, Mapping[str, float | None]]  # condition -> seed -> value (None: not measurable)
ALL_SEEDS = "all seeds"  # the key of a value decided over every seed at once (a best lr is chosen so)


@dataclass
class CheckResult:
    rule: Rule
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)  # condition -> per-seed values and outcome
    ok: bool | None = None
    unit: str = "seeds"  # what a condition's values are: seeds, or repeats of one measurement (a timing)
    role: str = "check"  # primary, secondary, precondition (v4), check (v3)

    def measured(self) -> str:
        """One line: the median, its interval named for what it is, how many pass and a test's p, per condition."""
        parts = []
        for cond, c in self.conditions.items():
            where = f" at {cond}" if cond else ""
            if not c["n"]:
                parts.append(f"not measured{where}")
                continue
            if list(c.get("per_seed", {})) == [ALL_SEEDS]:  # one value decided over all seeds: no spread, no test
                passed = "holds" if c["passing"] else "fails"
                parts.append(f"{number(c['median'])} (one value over all seeds: {passed}){where}")
                continue
            if self.rule.decide == INTERVAL:
                parts.append(interval_text(c) + where)
                continue
            found = c.get("interval")
            spread = f" ({found['label']} {number(found['low'])} to {number(found['high'])})" if found else ""
            test = self.test_text(c)
            chance = f" (by luck alone: {c['chance']:.1%})" if c.get("chance") is not None else ""
            parts.append(f"median {number(c['median'])}{spread}, {c['passing']}/{c['n']} {self.unit} pass{chance}"
                         f"{test}{where}")
        return "; ".join(parts)

    def test_text(self, c: dict[str, Any]) -> str:
        """The p of the test that decides the rule (a t-test's where it is registered, with the sign test's
        beside it), else the sign test's: the p a reader sees is the one the verdict used."""
        sign = f"sign test p = {number(c['sign_p'])}" if c.get("sign_p") is not None else ""
        if self.rule.decide == "t_test":
            none = "no t-test (fewer than 2 values, or no spread)"
            t = f"t-test p = {number(c['t_p'])}" if c.get("t_p") is not None else none
            return f", {t} (decides)" + (f", {sign}" if sign else "")
        return f", {sign}" if sign else ""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.rule.id, "role": self.role, "source": self.rule.source,
                "expectation": self.rule.expectation, "rule": self.rule.condition_text(self.unit),
                "quantity": self.rule.quantity, "op": self.rule.op, "threshold": self.rule.threshold,
                "decide": self.rule.decide, "basis": self.rule.basis, "ok": self.ok, "measured": self.measured(),
                "unit": self.unit, "conditions": self.conditions}


def interval_text(c: dict[str, Any]) -> str:
    t = c.get("t_interval") or {}
    if t.get("low") is None:
        return f"{c['n']} value(s): no interval"
    return (f"mean {number(t['mean'])} ({t['level']:.0%} t interval {number(t['low'])} to {number(t['high'])}, "
            f"n={c['n']}): {t['call']}")


def _finite_or_inf(v: float | None) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def judge(rule: Rule, values: Values | None, unit: str = "seeds", role: str = "check",
          chance: bool = False) -> CheckResult:
    """Apply ``rule`` to the per-seed ``values`` of its quantity (a missing value does not count either way);
    ``unit`` names what the values are when they are not seeds (``"repeats"`` of a timing); ``chance`` (v5): a
    seed-share rule records its chance of passing by luck."""
    result = CheckResult(rule, unit=unit, role=role)
    outcomes = []
    for cond, seeds in (values or {}).items():
        vals = [float(v) for v in seeds.values() if _finite_or_inf(v)]
        result.conditions[cond] = {"per_seed": dict(seeds), **condition(rule, vals, unit)}
        if chance and isinstance(rule.decide, float) and vals:
            result.conditions[cond]["chance"] = claim.chance_all_pass(len(vals), rule.decide)
        outcomes.append(result.conditions[cond]["ok"])
    judged = [o for o in outcomes if o is not None]
    result.ok = None if not judged or len(judged) < len(outcomes) else all(judged)
    return result


def condition(rule: Rule, vals: list[float], unit: str) -> dict[str, Any]:
    """One condition's summary and outcome under ``rule``."""
    test = OPS[rule.op]
    passing = sum(bool(test(v, rule.threshold)) for v in vals)
    median = statistics.median(vals) if vals else None
    ci = median_ci(vals)
    tests = p_values(rule, vals)
    if not vals:
        ok = None
    elif rule.decide == "median":
        ok = bool(test(median, rule.threshold))
    elif rule.decide == "median_ci":  # fewer than 3 values have no interval: not judged
        ok = None if ci is None else bool(test(ci[0], rule.threshold) and test(ci[1], rule.threshold))
    elif rule.decide == INTERVAL:
        found = claim.interval_call(rule.op, rule.threshold, rule.sesoi, vals)
        ok = {claim.HOLDS: True, claim.REFUTED: False}.get(found.call)
        tests["t_interval"] = asdict(found)
    elif rule.decide in TESTS:
        p = tests["sign_p" if rule.decide == "sign_test" else "t_p"]
        ok = None if p is None else p <= ALPHA
    else:
        ok = passing >= math.ceil(rule.decide * len(vals) - 1e-9)
    return {"n": len(vals), "passing": passing, "median": median, "median_ci95": list(ci) if ci else None,
            "interval": interval(vals, unit), "min": min(vals) if vals else None,
            "max": max(vals) if vals else None, **tests, "ok": ok}


def p_values(rule: Rule, vals: list[float]) -> dict[str, float | None]:
    """The one-sided sign test's and t-test's p against the threshold, in the rule's direction (a band: none)."""
    if rule.op == "between" or not vals:
        return {"sign_p": None, "t_p": None}
    greater = rule.op in (">", ">=")
    t = t_test(vals, rule.threshold, greater)
    return {"sign_p": sign_test(vals, rule.threshold, greater), "t_p": t[2] if t else None}


def verdict(results: list[CheckResult], guard: CheckResult | None = None) -> str:
    """v3: reproduced / partly / not reproduced / not judged; "inconclusive (undertrained)" when the guard failed."""
    if guard is not None and guard.ok is False:
        return INCONCLUSIVE
    judged = [r.ok for r in results if r.ok is not None]
    if not judged:
        return "not judged"
    if all(judged):
        return "reproduced"
    return "partly reproduced" if any(judged) else "not reproduced"


@dataclass
class Judgement:
    """Every check of a registration judged, and the verdict with the reason in one sentence."""

    protocol: int
    checks: list[CheckResult]  # in the registration's order (v4: primary, secondary, preconditions)
    guard: CheckResult | None
    verdict: str
    why: str
    v5: dict[str, Any] | None = None  # the primary's interval calls, selection and budget checks (claim.py)

    def role(self, role: str) -> list[CheckResult]:
        return [c for c in self.checks if c.role == role]


def decide(reg: Registration, measured: Mapping[str, Values], unit_of, scale: str = "cpu",
           seeds: list[int] = ()) -> Judgement:
    """Judge every declared check on ``measured`` (quantity → condition → seed → value; ``unit_of(quantity)``
    names its unit) and reach the verdict of the registration's protocol."""
    v5 = reg.protocol >= 5
    checks = [judge(rule, measured.get(rule.quantity), unit_of(rule.quantity), role, chance=v5)
              for role, rule in reg.checks()]
    guard = (judge(reg.guard.rule(), measured.get(reg.guard.quantity), role="precondition", chance=v5)
             if reg.guard else None)
    if reg.protocol < 4:
        return Judgement(3, checks, guard, verdict(checks, guard), why_v3(checks, guard))
    text, why = verdict_v4(checks, guard, reg.infeasible_at(scale), reg.reused_seeds(list(seeds)))
    if not v5 or text not in ("reproduced", "not reproduced", "not judged"):
        return Judgement(reg.protocol, checks, guard, text, why)
    held, why, details = claim.judge_primary(reg.primary, dict(measured), reg.no_budget)
    text = held or {claim.HOLDS: "reproduced", claim.REFUTED: "not reproduced"}[details["call"]]
    return Judgement(5, checks, guard, text, why, details)


def why_v3(checks: list[CheckResult], guard: CheckResult | None) -> str:
    if guard is not None and guard.ok is False:
        return "the trainability guard failed (protocol v3)"
    held = sum(c.ok is True for c in checks)
    return f"{held} of {len(checks)} checks held, every check weighed alike (protocol v3: no primary check)"


def verdict_v4(checks: list[CheckResult], guard: CheckResult | None, infeasible: str | None,
               reused: list[int]) -> tuple[str, str]:
    """The v4 verdict and why (the module docstring)."""
    if infeasible:
        return AT_THIS_SCALE, infeasible
    if guard is not None and guard.ok is False:
        return INCONCLUSIVE, "the trainability guard failed: the reference arm did not learn enough to compare"
    open_ = [c.rule.id for c in checks if c.role == "precondition" and c.ok is not True]
    open_ += ["trainability_guard"] if guard is not None and guard.ok is None else []
    if open_:
        return PRECONDITION, f"precondition {', '.join(open_)} failed or was not measured"
    if reused:
        return REUSED, f"seeds {', '.join(map(str, reused))} are the pilot's: their outcome was known"
    primary = next(c for c in checks if c.role == "primary")
    if primary.ok is None:
        return "not judged", f"the primary check {primary.rule.id} was not measured"
    held = "held" if primary.ok else "failed"
    return ("reproduced" if primary.ok else "not reproduced"), f"the primary check {primary.rule.id} {held}"


def protocol_text(protocol: int) -> str:
    """A registration's protocol in words, for its README."""
    if protocol >= 5:
        return ("**Protocol v5** (rules: normtrain/study/claim.py). The primary check alone decides, from the 90% t "
                "interval over seeds: *reproduced* when it clears the threshold, *not reproduced* only when it "
                "excludes the smallest effect of interest, otherwise *inconclusive (underpowered)*; the call must "
                "hold with a near-tied runner-up lr and at half the steps. Every check names its source (the "
                "paper, a secondary source, or ours).")
    if protocol >= 4:
        return ("**Protocol v4.** The primary check states the paper's claim and alone decides *reproduced* or *not "
                "reproduced*; secondary checks are reported beside the verdict and change nothing; a failed (or "
                "unmeasured) precondition makes the verdict *inconclusive*. Checks marked *ours* test our own "
                "hypotheses, not the paper's.")
    return ("**Protocol v3** (registered before v4): every check weighs alike, and the verdict is *partly "
            "reproduced* when some hold. Under v4 one primary check would decide; this registration has none.")
