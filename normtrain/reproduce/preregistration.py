"""Pre-registered checks: what an experiment claims, how it is measured and what passes, fixed before the runs.

Each experiment declares a :class:`Registration` in ``normtrain/reproduce/preregistered/NAME.py``: the paper's
claim and number, the metric, its :class:`Rule` s (quantity, comparison, threshold, how the seeds decide, and
for every band the basis of its width), the trainability :class:`Guard`, and its label: ``before_runs`` (nothing
of this experiment was seen before) or ``after_pilot`` (written after earlier runs whose numbers were seen: the
:class:`Pilot` names them, gives their numbers and says what changed). The analysis only *measures*: it returns
every quantity per condition (a depth, a learning rate) and per seed, and :func:`judge` applies the declared rule
to those values. A verdict is therefore never computed on the best seed, and no threshold lives in analysis code
where it could drift with the data.

:func:`declaration` records which commit the declaration (and the experiment's YAML, which holds its settings)
comes from, and whether that commit predates the runs: ``result.json`` carries it, and the README says plainly
when the checks were not committed before the data.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normtrain.util.numbers import number
from normtrain.util.provenance import git

OPS = {">=": lambda v, t: v >= t, "<=": lambda v, t: v <= t, ">": lambda v, t: v > t, "<": lambda v, t: v < t,
       "between": lambda v, t: t[0] <= v <= t[1]}
LABELS = ("before_runs", "after_pilot")
DECIDE = ("median", "median_ci")  # or a share of the seeds in (0, 1]
INCONCLUSIVE = "inconclusive (undertrained)"
Values = Mapping[str, Mapping[str, float | None]]  # condition -> seed -> value (None: not measurable)


@dataclass(frozen=True)
class Rule:
    """One pass/fail check, declared before the runs.

    ``quantity`` names a value the analysis measures per condition and seed; the check holds for a condition
    when the ``decide`` rule over its seeds holds: ``"median"`` (the median satisfies ``op threshold``),
    ``"median_ci"`` (the whole 95% bootstrap interval of the median does: robust to outlier seeds; with 5 seeds or
    fewer the interval reaches the smallest and largest value, so every seed must satisfy it; fewer than 3 values
    are not judged) or a
    fraction (at least that share of the seeds satisfies it, e.g. 0.8 = 4 of 5), and holds when it holds for
    every condition. A two-sided band (``between``: "flat", "comparable", "bounded") must say in ``basis`` why
    it is that wide (a pilot's seed spread, the paper's own number).
    """

    id: str
    expectation: str
    quantity: str
    op: str
    threshold: float | tuple[float, float]
    decide: str | float = "median"
    basis: str = ""  # why this threshold (required for a band)

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"rule {self.id}: op {self.op!r}; allowed: {', '.join(OPS)}")
        if self.decide not in DECIDE and not (isinstance(self.decide, float) and 0 < self.decide <= 1):
            raise ValueError(f"rule {self.id}: decide must be one of {', '.join(DECIDE)} or a fraction in (0, 1]")
        if self.op == "between" and not self.basis:
            raise ValueError(f"rule {self.id}: a band (between) needs a basis: why it is that wide")

    def condition_text(self, unit: str = "seeds") -> str:
        """The rule in words; ``unit``: what the values of a condition are (seeds, or repeats of one timing)."""
        t = self.threshold
        bound = f"in [{t[0]:g}, {t[1]:g}]" if self.op == "between" else f"{self.op} {t:g}"
        one = unit.removesuffix("s")
        named = {"median": f"the median over {unit}", 1.0: f"every {one}",
                 "median_ci": f"the 95% bootstrap interval of the median over {unit}, all of it (with 5 {unit} or "
                              f"fewer the interval spans every {one})"}
        how = named.get(self.decide) or f"at least {self.decide:.0%} of the {unit}"
        return f"{self.quantity} {bound}: {how}, at every condition measured"


@dataclass(frozen=True)
class Pilot:
    """Earlier runs of an experiment that its registration was written after: which, what they showed, what changed."""

    runs: str  # which runs and where they are kept (a commit, a folder)
    numbers: str  # what they measured, as the registration's authors saw it
    changed: str  # what the registration changed after seeing them, and why


@dataclass(frozen=True)
class Guard:
    """Trainability before any loss comparison: the reference arm must beat the unigram line by ``margin`` nats.

    The analysis measures ``quantity`` (unigram − final val loss of the reference arm, per condition and seed);
    where the guard fails the verdict is "inconclusive (undertrained)", whatever the checks say.
    """

    arm: str  # the reference arm, in words
    margin: float = 0.3
    basis: str = ""
    quantity: str = "reference_margin"
    decide: str | float = "median"

    def rule(self) -> Rule:
        return Rule("trainability_guard", f"the reference arm ({self.arm}) learned more than byte frequencies",
                    self.quantity, ">=", self.margin, self.decide, self.basis)


@dataclass(frozen=True)
class Registration:
    """What an experiment commits to before it runs."""

    claim: str  # the claim in one line (the top table)
    detail: str  # what the paper says and shows, in Markdown (the README)
    paper_number: str  # the paper's own figure for the top table, e.g. "BLEU 8.45 without warm-up, ≈34 with"
    metric: str  # what we measure and how, in Markdown
    norm: str  # the norm of the runs, e.g. "LayerNorm (as the paper); RMSNorm as a labelled variant"
    rules: tuple[Rule, ...]
    label: str = "before_runs"  # or "after_pilot" (then ``pilot`` says which runs came first)
    pilot: Pilot | None = None
    guard: Guard | None = None  # every experiment that compares losses has one
    reported: tuple[str, ...] = ()  # numbers reported but not judged, declared here with how they are computed

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"label {self.label!r}; allowed: {', '.join(LABELS)}")
        if (self.label == "after_pilot") != (self.pilot is not None):
            raise ValueError("an after_pilot registration names its pilot, and only such a registration does")

    def digest(self) -> str:
        """A digest of everything declared (not of comments or formatting)."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]


@dataclass
class CheckResult:
    rule: Rule
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)  # condition -> per-seed values and outcome
    ok: bool | None = None
    unit: str = "seeds"  # what a condition's values are: seeds, or repeats of one measurement (a timing)

    def measured(self) -> str:
        """One line: the median, the range and how many seeds (or repeats) pass, per condition."""
        parts = []
        for cond, c in self.conditions.items():
            where = f" at {cond}" if cond else ""
            if not c["n"]:
                parts.append(f"not measured{where}")
                continue
            spread = f" [{number(c['min'])}, {number(c['max'])}]" if c["n"] > 1 else ""
            ci = c.get("median_ci95")
            interval = (f" (95% CI of the median [{number(ci[0])}, {number(ci[1])}])"
                        if ci and self.rule.decide == "median_ci" else "")
            passing = f"{c['passing']}/{c['n']} {self.unit} pass"
            parts.append(f"median {number(c['median'])}{spread}{interval}, {passing}{where}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.rule.id, "expectation": self.rule.expectation,
                "rule": self.rule.condition_text(self.unit), "quantity": self.rule.quantity, "op": self.rule.op,
                "threshold": self.rule.threshold, "decide": self.rule.decide, "basis": self.rule.basis,
                "ok": self.ok, "measured": self.measured(), "unit": self.unit, "conditions": self.conditions}


def _finite_or_inf(v: float | None) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def judge(rule: Rule, values: Values | None, unit: str = "seeds") -> CheckResult:
    """Apply ``rule`` to the per-seed ``values`` of its quantity (a missing value does not count either way);
    ``unit`` names what the values are when they are not seeds (``"repeats"`` of a timing)."""
    result = CheckResult(rule, unit=unit)
    test = OPS[rule.op]
    outcomes = []
    for cond, seeds in (values or {}).items():
        vals = [float(v) for v in seeds.values() if _finite_or_inf(v)]
        passing = sum(bool(test(v, rule.threshold)) for v in vals)
        median = statistics.median(vals) if vals else None
        ci = median_ci(vals)
        if not vals:
            ok = None
        elif rule.decide == "median":
            ok = bool(test(median, rule.threshold))
        elif rule.decide == "median_ci":  # fewer than 3 values have no interval: not judged
            ok = None if ci is None else bool(test(ci[0], rule.threshold) and test(ci[1], rule.threshold))
        else:
            ok = passing >= math.ceil(rule.decide * len(vals) - 1e-9)
        result.conditions[cond] = {"per_seed": {s: v for s, v in seeds.items()}, "n": len(vals), "passing": passing,
                                   "median": median, "median_ci95": list(ci) if ci else None,
                                   "min": min(vals) if vals else None, "max": max(vals) if vals else None, "ok": ok}
        outcomes.append(ok)
    judged = [o for o in outcomes if o is not None]
    result.ok = None if not judged or len(judged) < len(outcomes) else all(judged)
    return result


def median_ci(values: list[float], level: float = 0.95, draws: int = 4000) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the median (a fixed generator: the same values give the same interval);
    None with fewer than 3 finite values. Infinite values (diverged runs) take part as they are."""
    if len(values) < 3 or any(math.isnan(v) for v in values):
        return None
    import numpy as np

    rng = np.random.default_rng(0)
    arr = np.asarray(values, dtype=float)
    medians = np.median(rng.choice(arr, size=(draws, len(arr)), replace=True), axis=1)
    lo, hi = np.quantile(medians, (1 - level) / 2, method="lower"), np.quantile(medians, (1 + level) / 2,
                                                                                  method="higher")
    return float(lo), float(hi)


def verdict(results: list[CheckResult], guard: CheckResult | None = None) -> str:
    """reproduced / partly / not reproduced / not judged; "inconclusive (undertrained)" when the guard failed."""
    if guard is not None and guard.ok is False:
        return INCONCLUSIVE
    judged = [r.ok for r in results if r.ok is not None]
    if not judged:
        return "not judged"
    if all(judged):
        return "reproduced"
    return "partly reproduced" if any(judged) else "not reproduced"


def declaration_files(name: str) -> list[Path]:
    """The files that hold an experiment's declaration: its rules and its settings."""
    from normtrain.config import config_dir

    package = Path(__file__).resolve().parent
    return [package / "preregistered" / f"{name}.py", Path(config_dir()) / "experiment" / f"{name}.yaml"]


def declaration(files: list[Path]) -> dict[str, Any]:
    """The commit that last changed ``files`` and whether they have changed since (``dirty``).

    A result whose declaration is dirty, or whose commit is younger than its first run, was not pre-registered:
    the write-up says so. Outside a git checkout (an installed wheel) the commit is unknown.
    """
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files if f.is_file())).hexdigest()[:16]
    info: dict[str, Any] = {"files": [_relative(f) for f in files], "digest": digest, "commit": None,
                            "committed_at": None, "dirty": None}
    root = git(["rev-parse", "--show-toplevel"], files[0].parent)
    if root is None:
        info["why_unknown"] = "not a git checkout"
        return info
    paths = [str(f) for f in files]
    log = git(["log", "-1", "--format=%H %cI", "--", *paths], Path(root))
    status = git(["status", "--porcelain", "--", *paths], Path(root))
    if log:
        info["commit"], info["committed_at"] = log.split()
    info["dirty"] = bool(status) or not log
    return info


def _relative(path: Path) -> str:
    parts = path.parts
    for anchor in ("normtrain", "configs"):
        if anchor in parts:
            return str(Path(*parts[len(parts) - 1 - parts[::-1].index(anchor):]))
    return path.name


def preregistered(record: dict[str, Any], first_run_at: str | None) -> bool:
    """Whether the declaration was committed, unchanged, before the first run of the result started."""
    if record.get("dirty") is not False or not record.get("committed_at") or not first_run_at:
        return False
    from datetime import datetime

    return datetime.fromisoformat(record["committed_at"]) <= datetime.fromisoformat(first_run_at)
