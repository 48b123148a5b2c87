"""Pre-registered checks: what an experiment claims, how it is measured and what passes, fixed before the runs.

Each experiment declares a :class:`Registration` in ``normtrain/reproduce/preregistered/NAME.py``: the paper's
claim and number, the metric, its :class:`Rule` s (quantity, comparison, threshold, how the seeds decide, and
for every band the basis of its width), the trainability :class:`Guard`, and its label: ``before_runs`` (nothing
of this experiment was seen before) or ``after_pilot`` (written after earlier runs whose numbers were seen: the
:class:`Pilot` names them, gives their numbers and says what changed). The analysis only *measures*: it returns
every quantity per condition (a depth, a learning rate) and per seed, and normtrain/study/verdicts.py applies
the declared rules to those values. A verdict is therefore never computed on the best seed, and no threshold lives
in analysis code where it could drift with the data.

Two protocols, both readable (registrations are records: a past one is never rewritten):

- **v4** (issue 37): one ``primary`` rule states the paper's claim and alone decides *reproduced* / *not
  reproduced*; ``secondary`` rules are reported beside the verdict; ``preconditions`` must hold for the comparison
  to mean anything (the guard, the leak exists, the control is causal: a check that holds by construction is a
  precondition, never evidence), and a failed one makes the verdict *inconclusive*. A rule that states our own
  hypothesis, not the paper's, says ``source="ours"``. Where the claim cannot be tested at a scale, ``infeasible``
  says why and the verdict there is *inconclusive at this scale*. A re-registration after a pilot names the pilot's
  seeds and runs new ones.
- **v3** (the registrations before it): ``rules``, every check weighed alike ("partly reproduced" when some held).

:func:`declaration` records which commit the declaration (and the experiment's YAML, which holds its settings)
comes from, every commit that changed it, and whether the last one predates the runs: ``result.json`` carries it,
and the README says plainly when the checks were not committed before the data, or were registered before the runs
and changed after they began (:func:`registered_then_changed`: a grid extended by a registered rule).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normtrain.util.provenance import git

OPS = {">=": lambda v, t: v >= t, "<=": lambda v, t: v <= t, ">": lambda v, t: v > t, "<": lambda v, t: v < t,
       "between": lambda v, t: t[0] <= v <= t[1]}
LABELS = ("before_runs", "after_pilot")
TESTS = ("sign_test", "t_test")  # one-sided tests on the per-seed values, decided at normtrain.study.significance
INTERVAL = "interval"  # v5: the 90% t interval's three-way call (normtrain/study/claim.py)
DECIDE = ("median", "median_ci", *TESTS, INTERVAL)  # or a share of the seeds in (0, 1]
SOURCES = ("paper", "secondary", "ours")  # the paper's own number; another source's report; our hypothesis


class _Unnamed(str):
    """``Rule.source``'s v4 default, "paper", told apart from a "paper" the registration wrote: under protocol v5
    every check names its source (a claim with no paper number behind it is ``secondary`` or ``ours``)."""


PAPER_BY_DEFAULT = _Unnamed("paper")
ROLES = ("primary", "secondary", "precondition")


@dataclass(frozen=True)
class Rule:
    """One pass/fail check, declared before the runs.

    ``quantity`` names a value the analysis measures per condition and seed; the check holds for a condition
    when the ``decide`` rule over its seeds holds, and holds when it holds for every condition:

    - ``"median"``: the median satisfies ``op threshold``;
    - ``"median_ci"``: the whole 95% bootstrap interval of the median does (robust to outlier seeds). With 5 seeds
      or fewer that interval is the range of the seeds, so every seed must satisfy it, and it is called "the range
      of n seeds", never a CI; fewer than 3 values are not judged;
    - ``"sign_test"`` / ``"t_test"`` (one-sided ops only): the exact sign test / the t-test of the values against
      the threshold, in the op's direction, has p ≤ 0.05 (with 5 seeds the sign test needs all 5);
    - a fraction: at least that share of the seeds satisfies it (e.g. 0.8 = 4 of 5);
    - ``"interval"`` (protocol v5): the 90% t interval of the mean holds when it clears the threshold, fails
      only when it excludes every effect of at least ``sesoi`` (the smallest effect of interest, in the quantity's
      units, past the threshold in the claim's direction; its ``basis`` says why that size), and is otherwise not
      judged (underpowered): normtrain/study/claim.py.

    A two-sided band (``between``: "flat", "comparable", "bounded") must say in ``basis`` why it is that wide; a
    band on a paired difference takes its width from the spread of the paired differences (stats.paired_sd), not
    from one arm's seed sd. ``source`` is ``"ours"`` for a hypothesis of ours, never presented as the paper's.
    """

    id: str
    expectation: str
    quantity: str
    op: str
    threshold: float | tuple[float, float]
    decide: str | float = "median"
    basis: str = ""  # why this threshold (required for a band)
    source: str = PAPER_BY_DEFAULT
    sesoi: float | None = None  # v5 "interval": the smallest effect of interest (for a band: None)

    def __post_init__(self) -> None:
        if self.decide == INTERVAL and self.op != "between" and not (
                isinstance(self.sesoi, (int, float)) and self.sesoi >= 0 and self.basis):
            raise ValueError(f"rule {self.id}: an interval rule names its smallest effect of interest (sesoi ≥ 0, "
                             "in the quantity's units) and its basis: only an interval that excludes it refutes")
        if self.op not in OPS:
            raise ValueError(f"rule {self.id}: op {self.op!r}; allowed: {', '.join(OPS)}")
        if self.decide not in DECIDE and not (isinstance(self.decide, float) and 0 < self.decide <= 1):
            raise ValueError(f"rule {self.id}: decide must be one of {', '.join(DECIDE)} or a fraction in (0, 1]")
        if self.op == "between" and not self.basis:
            raise ValueError(f"rule {self.id}: a band (between) needs a basis: why it is that wide")
        if self.decide in TESTS and self.op == "between":
            raise ValueError(f"rule {self.id}: {self.decide} tests one direction; a band (between) cannot use it")
        if self.source not in SOURCES:
            raise ValueError(f"rule {self.id}: source {self.source!r}; allowed: {', '.join(SOURCES)}")

    def condition_text(self, unit: str = "seeds") -> str:
        """The rule in words; ``unit``: what the values of a condition are (seeds, or repeats of one timing)."""
        t = self.threshold
        bound = f"in [{t[0]:g}, {t[1]:g}]" if self.op == "between" else f"{self.op} {t:g}"
        one = unit.removesuffix("s")
        named = {"median": f"the median over {unit}", 1.0: f"every {one}",
                 "median_ci": f"the median's 95% bootstrap interval over {unit}, all of it (with 5 {unit} or fewer "
                              f"that interval is the range of the {unit}: every {one})",
                 "sign_test": f"a one-sided sign test over {unit} at p ≤ 0.05",
                 "t_test": f"a one-sided t-test over {unit} at p ≤ 0.05",
                 INTERVAL: f"the 90% t interval of the mean over {unit}, all of it (refuted only where it excludes "
                           f"an effect of {self.sesoi if self.sesoi is not None else 0:g} past the threshold)"}
        how = named.get(self.decide) or f"at least {self.decide:.0%} of the {unit}"
        return f"{self.quantity} {bound}: {how}, at every condition measured"


@dataclass(frozen=True)
class Pilot:
    """Earlier runs of an experiment that its registration was written after: which, what they showed, what changed;
    ``seeds``: the pilot's seeds (a v4 re-registration runs others: a deterministic rerun is no new evidence)."""

    runs: str  # which runs and where they are kept (a commit, a folder)
    numbers: str  # what they measured, as the registration's authors saw it
    changed: str  # what the registration changed after seeing them, and why
    seeds: tuple[int, ...] = ()


@dataclass(frozen=True)
class Guard:
    """Trainability before any loss comparison: the reference arm must beat the unigram line by ``margin`` nats.

    The analysis measures ``quantity`` (unigram − final val loss of the reference arm, per condition and seed);
    where the guard fails the verdict is "inconclusive (undertrained)", whatever the checks say. Under v4 it is
    the first precondition.
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
    """What an experiment commits to before it runs (v4: ``primary``; v3: ``rules``; the module docstring)."""

    claim: str  # the claim in one line (the top table)
    detail: str  # what the paper says and shows, in Markdown (the README)
    paper_number: str  # the paper's own figure for the top table, e.g. "BLEU 8.45 without warm-up, ≈34 with"
    metric: str  # what we measure and how, in Markdown
    norm: str  # the norm of the runs, e.g. "LayerNorm (as the paper); RMSNorm as a labelled variant"
    rules: tuple[Rule, ...] = ()  # v3: every check alike
    label: str = "before_runs"  # or "after_pilot" (then ``pilot`` says which runs came first)
    pilot: Pilot | None = None
    guard: Guard | None = None  # every experiment that compares losses has one
    reported: tuple[str, ...] = ()  # numbers reported but not judged, declared here with how they are computed
    primary: Rule | None = None  # v4: the paper's claim; it alone decides
    secondary: tuple[Rule, ...] = ()  # v4: reported beside the verdict
    preconditions: tuple[Rule, ...] = ()  # v4: must hold for the comparison to mean anything
    infeasible: tuple[tuple[str, str], ...] = ()  # v4: (scale, why the claim cannot be tested there)
    version: int | None = None  # 5: protocol v5's registration rules apply (normtrain/study/claim.py)
    no_budget: str = ""  # v5: why the primary does not depend on the training budget (none: it is measured at T/2)

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"label {self.label!r}; allowed: {', '.join(LABELS)}")
        if (self.label == "after_pilot") != (self.pilot is not None):
            raise ValueError("an after_pilot registration names its pilot, and only such a registration does")
        if self.primary is None and (self.secondary or self.preconditions or self.infeasible):
            raise ValueError("secondary checks, preconditions and infeasible scales belong to a v4 registration, "
                             "which names its primary check")
        if self.primary is not None:
            self._check_v4()

    def _check_v4(self) -> None:
        if self.rules:
            raise ValueError("a v4 registration declares primary, secondary and preconditions, not rules (v3)")
        ids = [r.id for _, r in self.checks()] + (["trainability_guard"] if self.guard else [])
        if len(set(ids)) != len(ids):
            raise ValueError(f"check ids must be distinct: {ids}")
        if self.pilot is not None and not self.pilot.seeds:
            raise ValueError("a v4 re-registration names its pilot's seeds (Pilot.seeds): it runs new ones")
        if bad := [scale for scale, _ in self.infeasible if scale not in ("cpu", "gpu")]:
            raise ValueError(f"infeasible scales {bad}; allowed: cpu, gpu")
        if self.version is not None and self.version >= 5:
            self._check_v5()

    def _check_v5(self) -> None:
        unnamed = [r.id for _, r in self.checks() if r.source is PAPER_BY_DEFAULT]
        if unnamed:
            raise ValueError(f"protocol v5: checks {', '.join(unnamed)} do not name their source; give "
                             f"source= one of {', '.join(SOURCES)} (a claim with no paper number behind it is "
                             "'secondary' or 'ours')")
        if self.primary.decide != INTERVAL:
            raise ValueError(f"protocol v5: the primary check {self.primary.id} is decided by decide='interval' "
                             "(a stated error rate, and refutation only by an interval that excludes the smallest "
                             f"effect of interest), not {self.primary.decide!r}")

    @property
    def protocol(self) -> int:
        if self.primary is None:
            return 3
        return 5 if (self.version or 0) >= 5 else 4

    def checks(self) -> list[tuple[str, Rule]]:
        """``(role, rule)`` in the order they are reported: v4's primary, secondary, preconditions; v3's rules
        (role ``check``)."""
        if self.primary is None:
            return [("check", r) for r in self.rules]
        return [("primary", self.primary), *(("secondary", r) for r in self.secondary),
                *(("precondition", r) for r in self.preconditions)]

    def infeasible_at(self, scale: str) -> str | None:
        """Why the claim cannot be tested at ``scale`` (None: it can)."""
        return dict(self.infeasible).get(scale)

    def reused_seeds(self, seeds: list[int]) -> list[int]:
        """The pilot's seeds among ``seeds`` (v4 only: a v3 registration predates the rule)."""
        if self.protocol < 4 or self.pilot is None:
            return []
        return sorted(set(seeds) & set(self.pilot.seeds))

    def digest(self) -> str:
        """A digest of everything declared (not of comments or formatting)."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]


def declaration_files(name: str) -> list[Path]:
    """The files that hold an experiment's declaration: its rules and its settings."""
    from normtrain.config import config_dir

    experiments = Path(__file__).resolve().parents[1] / "reproduce"  # the experiments' package, beside the engine
    return [experiments / "preregistered" / f"{name}.py", Path(config_dir()) / "experiment" / f"{name}.yaml"]


def analysis_files(name: str) -> list[Path]:
    """The code a reproduction's verdict rests on beside its declaration: the experiment's module, the engine
    (this package) and the run labels' thresholds (training/outcome.py). Recorded apart from the declaration (whose
    digest tells a rerun of one design from a new one), so a result says whether the analysis changed after its
    runs began."""
    package = Path(__file__).resolve().parents[1]
    return [package / "reproduce" / f"{name}.py", *sorted((package / "study").glob("*.py")),
            package / "training" / "outcome.py"]


def declaration(files: list[Path]) -> dict[str, Any]:
    """The commit that last changed ``files`` and whether they have changed since (``dirty``).

    A result whose declaration is dirty, or whose commit is younger than its first run, was not pre-registered:
    the write-up says so. Outside a git checkout (an installed wheel) the commit is unknown.
    """
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files if f.is_file())).hexdigest()[:16]
    info: dict[str, Any] = {"files": [_relative(f) for f in files], "digest": digest, "commit": None,
                            "committed_at": None, "dirty": None, "history": []}
    root = git(["rev-parse", "--show-toplevel"], files[0].parent)
    if root is None:
        info["why_unknown"] = "not a git checkout"
        return info
    paths = [str(f) for f in files]
    log = git(["log", "--format=%H %cI", "--", *paths], Path(root))
    status = git(["status", "--porcelain", "--", *paths], Path(root))
    for line in (log or "").splitlines():  # newest first
        commit, committed_at = line.split()
        info["history"].append({"commit": commit, "committed_at": committed_at})
    if info["history"]:
        info["commit"], info["committed_at"] = info["history"][0]["commit"], info["history"][0]["committed_at"]
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
    return _at_or_before(record["committed_at"], first_run_at)


def registered_then_changed(record: dict[str, Any], first_run_at: str | None) -> dict[str, Any]:
    """For a declaration changed after its first run: the commit it stood at when that run started
    (``registered``, None when it was not committed yet) and the commits that changed it since (``changed``,
    oldest first). A grid extended by a registered rule is such a change; CHECK_HISTORY.md says why."""
    history = record.get("history") or []
    if not first_run_at or not history:
        return {"registered": None, "changed": []}
    before = [h for h in history if _at_or_before(h["committed_at"], first_run_at)]
    return {"registered": before[0] if before else None,
            "changed": [h for h in reversed(history) if not _at_or_before(h["committed_at"], first_run_at)]}


def _at_or_before(when: str, then: str) -> bool:
    from datetime import datetime

    return datetime.fromisoformat(when) <= datetime.fromisoformat(then)
