"""Pre-registered checks: what an experiment claims, how it is measured and what passes, fixed before the runs.

Each experiment declares a :class:`Registration` in ``normtrain/reproduce/preregistered/NAME.py``: the paper's
claim and number, the metric, and its :class:`Rule` s (quantity, comparison, threshold and how the seeds decide).
The analysis only *measures*: it returns every quantity per condition (a depth, a learning rate) and per seed,
and :func:`judge` applies the declared rule to those values. A verdict is therefore never computed on the best
seed, and no threshold lives in analysis code where it could drift with the data.

:func:`provenance` records which commit the declaration (and the experiment's YAML, which holds its settings)
comes from, and whether that commit predates the runs: ``result.json`` carries it, and the README says plainly
when the checks were not committed before the data.
"""

from __future__ import annotations

import hashlib
import math
import statistics
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OPS = {">=": lambda v, t: v >= t, "<=": lambda v, t: v <= t, ">": lambda v, t: v > t, "<": lambda v, t: v < t,
       "between": lambda v, t: t[0] <= v <= t[1]}
Values = Mapping[str, Mapping[str, float | None]]  # condition -> seed -> value (None: not measurable)


@dataclass(frozen=True)
class Rule:
    """One pass/fail check, declared before the runs.

    ``quantity`` names a value the analysis measures per condition and seed; the check holds for a condition
    when the ``decide`` rule over its seeds holds: ``"median"`` (the median satisfies ``op threshold``) or a
    fraction (at least that share of the seeds satisfies it, e.g. 0.8 = 4 of 5), and holds when it holds for
    every condition.
    """

    id: str
    expectation: str
    quantity: str
    op: str
    threshold: float | tuple[float, float]
    decide: str | float = "median"

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"rule {self.id}: op {self.op!r}; allowed: {', '.join(OPS)}")
        if self.decide != "median" and not (isinstance(self.decide, float) and 0 < self.decide <= 1):
            raise ValueError(f"rule {self.id}: decide must be 'median' or a fraction in (0, 1]")

    def condition_text(self) -> str:
        t = self.threshold
        bound = f"in [{t[0]:g}, {t[1]:g}]" if self.op == "between" else f"{self.op} {t:g}"
        how = ("the median over seeds" if self.decide == "median" else "every seed" if self.decide == 1.0
               else f"at least {self.decide:.0%} of the seeds")
        return f"{self.quantity} {bound}: {how}, at every condition measured"


@dataclass(frozen=True)
class Registration:
    """What an experiment commits to before it runs."""

    claim: str  # the claim in one line (the top table)
    detail: str  # what the paper says and shows, in Markdown (the README)
    paper_number: str  # the paper's own figure for the top table, e.g. "BLEU 8.45 without warm-up, ≈34 with"
    metric: str  # what we measure and how, in Markdown
    norm: str  # the norm of the runs, e.g. "LayerNorm (as the paper); RMSNorm as a labelled variant"
    rules: tuple[Rule, ...]

    def digest(self) -> str:
        """A digest of everything declared (not of comments or formatting)."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]


@dataclass
class CheckResult:
    rule: Rule
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)  # condition -> per-seed values and outcome
    ok: bool | None = None

    def measured(self) -> str:
        """One line: the median, the range and how many seeds pass, per condition."""
        parts = []
        for cond, c in self.conditions.items():
            where = f" at {cond}" if cond else ""
            if not c["n"]:
                parts.append(f"not measured{where}")
                continue
            spread = f" [{fmt_num(c['min'])}, {fmt_num(c['max'])}]" if c["n"] > 1 else ""
            parts.append(f"median {fmt_num(c['median'])}{spread}, {c['passing']}/{c['n']} seeds pass{where}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.rule.id, "expectation": self.rule.expectation, "rule": self.rule.condition_text(),
                "quantity": self.rule.quantity, "op": self.rule.op, "threshold": self.rule.threshold,
                "decide": self.rule.decide, "ok": self.ok, "measured": self.measured(),
                "conditions": self.conditions}


def fmt_num(v: float | None) -> str:
    if v is None:
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.3g}" if abs(v) < 1e-2 or abs(v) >= 1e3 else f"{v:.3f}"


def _finite_or_inf(v: float | None) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def judge(rule: Rule, values: Values | None) -> CheckResult:
    """Apply ``rule`` to the per-seed ``values`` of its quantity (a missing value does not count either way)."""
    result = CheckResult(rule)
    test = OPS[rule.op]
    outcomes = []
    for cond, seeds in (values or {}).items():
        vals = [float(v) for v in seeds.values() if _finite_or_inf(v)]
        passing = sum(bool(test(v, rule.threshold)) for v in vals)
        median = statistics.median(vals) if vals else None
        if not vals:
            ok = None
        elif rule.decide == "median":
            ok = bool(test(median, rule.threshold))
        else:
            ok = passing >= math.ceil(rule.decide * len(vals) - 1e-9)
        result.conditions[cond] = {"per_seed": {s: v for s, v in seeds.items()}, "n": len(vals), "passing": passing,
                                   "median": median, "min": min(vals) if vals else None,
                                   "max": max(vals) if vals else None, "ok": ok}
        outcomes.append(ok)
    judged = [o for o in outcomes if o is not None]
    result.ok = None if not judged or len(judged) < len(outcomes) else all(judged)
    return result


def verdict(results: list[CheckResult]) -> str:
    judged = [r.ok for r in results if r.ok is not None]
    if not judged:
        return "not judged"
    if all(judged):
        return "reproduced"
    return "partly reproduced" if any(judged) else "not reproduced"


def declaration_files(name: str) -> list[Path]:
    """The files that hold an experiment's declaration: its rules and its settings."""
    package = Path(__file__).resolve().parent
    return [package / "preregistered" / f"{name}.py", _config_dir() / "experiment" / f"{name}.yaml"]


def _config_dir() -> Path:
    from normtrain.config import config_dir

    return Path(config_dir())


def provenance(files: list[Path]) -> dict[str, Any]:
    """The commit that last changed ``files`` and whether they have changed since (``dirty``).

    A result whose declaration is dirty, or whose commit is younger than its first run, was not pre-registered:
    the write-up says so. Outside a git checkout (an installed wheel) the commit is unknown.
    """
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files if f.is_file())).hexdigest()[:16]
    info: dict[str, Any] = {"files": [_relative(f) for f in files], "digest": digest, "commit": None,
                            "committed_at": None, "dirty": None}
    root = _git(["rev-parse", "--show-toplevel"], files[0].parent)
    if root is None:
        info["why_unknown"] = "not a git checkout"
        return info
    paths = [str(f) for f in files]
    log = _git(["log", "-1", "--format=%H %cI", "--", *paths], Path(root))
    status = _git(["status", "--porcelain", "--", *paths], Path(root))
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


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def preregistered(record: dict[str, Any], first_run_at: str | None) -> bool:
    """Whether the declaration was committed, unchanged, before the first run of the result started."""
    if record.get("dirty") is not False or not record.get("committed_at") or not first_run_at:
        return False
    from datetime import datetime

    return datetime.fromisoformat(record["committed_at"]) <= datetime.fromisoformat(first_run_at)
