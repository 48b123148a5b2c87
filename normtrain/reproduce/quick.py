"""``normtrain-reproduce NAME --quick``: one seed of the registered design, between the smoke and the full run.

The smoke checks the pipeline in four steps a run; the full run judges the claim over every registered seed and
learning rate in hours. A quick run keeps the registered model, steps and arms and cuts the two axes a verdict
needs many of: **one seed** (the registration's first) and, where the experiment tunes the learning rate (each arm
judged at its own best), **one lr per arm**: the best one by the registered selection rule
(normtrain/study/best_lr.py) applied to the committed full result's runs (``experiments/NAME/runs.csv``), or,
for an arm with no committed run, the middle of the lrs its grid runs. Where the lrs are the design itself
(``Experiment.lr_tuned`` False: a sensitivity over the grid, multiples of a best lr) every one is kept.

What it can show: whether the primary difference at that seed lies on the claim's side of its declared threshold,
as the committed full result's median does (the direction of the claim: for ``x >= 0.3``, at or above 0.3; for a
band, inside it; for a rule against 0, the sign), whether each arm trains at its lr (the labels: diverged,
collapsed, still falling), and what the full run's runs cost. What it cannot: an interval or a test (one seed has no
spread), a verdict (the rules decide over seeds: ``no verdict (quick: one seed)``), or a best lr of its own. Its
folder is its own (``multirun/reproduce/NAME-quick/``), never a committed result's.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from normtrain.reproduce.cpu_estimate import normal, point
from normtrain.study import best_lr
from normtrain.study.plan import SEED_AXIS, Plan
from normtrain.study.preregistration import OPS
from normtrain.study.verdicts import Judgement
from normtrain.util.markdown import value_table
from normtrain.util.numbers import number

VERDICT = "no verdict (quick: one seed)"
WHY = ("a quick run trains one seed, and the declared rules decide over seeds: it reports the direction of the "
       "primary difference beside the committed full result's, not a verdict")
CAN = ("the pipeline at the registered model, steps and arms; whether each arm trains at its lr (the labels: "
       "diverged, collapsed, still falling); the primary difference at one seed, and whether it lies on the claim's "
       "side of the declared threshold as the committed full result's median does; what the full run's runs cost")
CANNOT = ("an interval or a test (one seed has no spread); a verdict (the rules decide over seeds); a best lr of "
          "its own (it runs the committed result's, or the grid's middle); the seed-to-seed spread that decides "
          "whether a difference is real; a check that failed or held at one seed is no evidence either way")
COMMITTED = "committed"  # an lr's source: the committed full result's runs, by the registered selection rule
MIDDLE = "middle"  # no committed run of the arm: the middle of the lrs its grid runs


def committed_folder(name: str) -> Path:
    """The committed full result of ``name`` in this checkout (``experiments/NAME/``)."""
    return Path(__file__).resolve().parents[2] / "experiments" / name


@dataclass(frozen=True)
class LrChoice:
    """The one lr a quick run trains an arm at (``point``: the arm's values on every axis but the lr and seed)."""

    point: dict[str, str]
    lr: str
    source: str  # COMMITTED or MIDDLE


@dataclass
class QuickPlan:
    """What --quick chose: the seed, and per arm the lr and where it comes from (empty: every lr is run)."""

    seed: str
    choices: list[LrChoice] = field(default_factory=list)
    committed: str = ""  # the runs.csv the lrs were read from
    every_lr: bool = False  # the experiment's lrs are its design: all kept

    def text(self) -> str:
        """One line: which seed and which lrs, and where they come from."""
        if self.every_lr or not self.choices:
            lrs = "every lr of the grid (the lrs are the design)" if self.every_lr else "no lr axis"
            return f"one seed ({self.seed}), {lrs}"
        sources = {c.source for c in self.choices}
        said = []
        if COMMITTED in sources:
            said.append(f"the best lr of the committed runs ({self.committed}) by the registered selection rule")
        if MIDDLE in sources:
            said.append("the middle of the grid's lrs where no committed run exists")
        return f"one seed ({self.seed}), each arm at one lr: " + "; ".join(said)

    def table(self) -> str:
        rows = [[", ".join(f"{k}={v}" for k, v in c.point.items()) or "every run", c.lr,
                 "committed best" if c.source == COMMITTED else "grid's middle"] for c in self.choices]
        return value_table(["arm", "lr", "from"], rows)


@dataclass(frozen=True)
class AtChosenLr:
    """The plan's filter at --quick: the experiment's own, and at each arm only its chosen lr."""

    keep: Callable[[dict[str, str]], bool] | None
    axes: tuple[str, ...]  # the arm's axes (every axis but the lr and the seed)
    chosen: tuple[tuple[tuple[str, ...], str], ...]  # (arm's point, the lr's normal spelling)

    def __call__(self, combo: dict[str, str]) -> bool:
        if self.keep is not None and not self.keep(combo):
            return False
        return dict(self.chosen).get(point(combo, list(self.axes))) == normal(combo[best_lr.LR_AXIS])


def plan(exp, grid: dict[str, list[str]], keep, committed: Path) -> tuple[dict[str, list[str]], Any, QuickPlan]:
    """The quick grid (the first seed), the filter that keeps each arm's chosen lr, and what was chosen."""
    grid = {**grid, SEED_AXIS: grid[SEED_AXIS][:1]}
    seed = grid[SEED_AXIS][0]
    if best_lr.LR_AXIS not in grid or not exp.lr_tuned:
        return grid, keep, QuickPlan(seed, every_lr=best_lr.LR_AXIS in grid)
    axes = [a for a in grid if a not in (best_lr.LR_AXIS, SEED_AXIS)]
    arms: dict[tuple[str, ...], tuple[dict[str, str], list[str]]] = {}
    for combo in Plan("quick", "cpu", False, [], grid, Path("."), Path("."), keep=keep).combos():
        found = arms.setdefault(point(combo, axes), ({a: combo[a] for a in axes}, []))
        found[1].append(combo[best_lr.LR_AXIS])
    best = committed_best(committed, axes)
    choices = [choose(values, lrs, best.get(key)) for key, (values, lrs) in arms.items()]
    chosen = tuple((key, normal(c.lr)) for key, c in zip(arms, choices, strict=True))
    return grid, AtChosenLr(keep, tuple(axes), chosen), QuickPlan(seed, choices, _shown(committed))


def _shown(path: Path) -> str:
    """A path as a reader finds it: from the working directory where it lies under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def choose(values: dict[str, str], lrs: list[str], best: float | None) -> LrChoice:
    """The committed best where the arm's grid runs it, else the middle of the arm's lrs (the smaller of two)."""
    ordered = sorted(set(lrs), key=float)
    if best is not None and (same := [v for v in ordered if math.isclose(float(v), best)]):
        return LrChoice(values, same[0], COMMITTED)
    return LrChoice(values, ordered[(len(ordered) - 1) // 2], MIDDLE)


def committed_best(path: Path, axes: list[str]) -> dict[tuple[str, ...], float]:
    """Each arm's best lr by the registered selection rule over the committed runs ({} without a runs.csv)."""
    if not path.is_file():
        return {}
    with path.open(newline="") as f:
        rows = [{"arm": point(r, axes), "status": r.get("status"), best_lr.LR_AXIS: r[best_lr.LR_AXIS],
                 best_lr.SELECTION: _float(r.get(best_lr.SELECTION))}
                for r in csv.DictReader(f) if all(a in r for a in [*axes, best_lr.LR_AXIS])]
    found = {}
    for arm in {r["arm"] for r in rows}:
        mine = [{**r, "arm": "arm"} for r in rows if r["arm"] == arm]  # choose() names an arm by text
        if (lr := best_lr.choose(mine, "arm", "arm").lr) is not None:
            found[arm] = lr
    return found


def _float(text: str | None) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def unjudged(judged: Judgement) -> Judgement:
    """The judgement with no verdict: the checks keep their one-seed values, the verdict says why there is none."""
    return replace(judged, verdict=VERDICT, why=WHY)


def record(result: dict[str, Any], quick: QuickPlan, full_path: Path) -> dict[str, Any]:
    """What result.json's ``quick`` holds: the choices, what the run can and cannot show, and the direction of
    the primary check at this seed against the committed full result's."""
    committed = full(full_path)
    return {"seed": int(quick.seed), "lrs": quick.text(),
            "choices": [{"arm": c.point, "lr": c.lr, "from": c.source} for c in quick.choices],
            "can_show": CAN, "cannot_show": CANNOT, "direction": direction(result.get("primary"), committed),
            "same_settings": None if committed is None else committed.get("base") == result.get("base")}


def full(path: Path) -> dict[str, Any] | None:
    import json

    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return None if found.get("smoke") or found.get("quick") else {**found, "path": str(path)}


def direction(primary: dict[str, Any] | None, full_result: dict[str, Any] | None) -> dict[str, Any]:
    """Per condition of the primary check: this seed's value, the full result's median, and whether each lies on
    the claim's side of the declared threshold; ``agrees``: at every condition both were measured (None: none was,
    or there is no committed full result with the same primary check)."""
    if primary is None:
        return {"agrees": None, "why": "the registration has no primary check (protocol v3)"}
    theirs = (full_result or {}).get("primary") or {}
    if theirs.get("id") != primary["id"]:
        why = ("no committed full result" if full_result is None else
               f"the committed full result's primary check is {theirs.get('id')!r}, not {primary['id']!r}")
        return {"check": primary["id"], "agrees": None, "why": why}
    holds = OPS[primary["op"]]
    conditions = {}
    for cond, mine in primary["conditions"].items():
        value = next((v for v in mine["per_seed"].values() if v is not None), None)
        median = (theirs["conditions"].get(cond) or {}).get("median")
        side = [None if v is None else bool(holds(v, primary["threshold"])) for v in (value, median)]
        conditions[cond] = {"quick": value, "full_median": median, "quick_holds": side[0], "full_holds": side[1],
                            "agrees": None if None in side else side[0] == side[1]}
    judged = [c["agrees"] for c in conditions.values() if c["agrees"] is not None]
    return {"check": primary["id"], "rule": primary["rule"], "full_verdict": full_result.get("verdict"),
            "full_seeds": full_result.get("seeds"), "full_result": full_result["path"], "conditions": conditions,
            "agrees": all(judged) if judged else None}


def summary(found: dict[str, Any]) -> str:
    """The direction in one sentence (the closing line and the README)."""
    d = found["direction"]
    if d.get("conditions") is None:
        return f"Direction: not compared ({d['why']})."
    values = "; ".join(f"{number(c['quick'])}{f' at {cond}' if cond else ''}" for cond, c in d["conditions"].items())
    judged = [c["agrees"] for c in d["conditions"].values() if c["agrees"] is not None]
    same = (f"on the same side of its threshold as the committed full result's median at {sum(judged)} of "
            f"{len(judged)} conditions" if judged else "not comparable with the committed full result")
    other = ("; this run's settings are not the full result's (overrides), so the comparison is only indicative"
             if found.get("same_settings") is False else "")
    return (f"Primary `{d['check']}` at seed {found['seed']}: {values}; {same} (full result: "
            f"{d['full_verdict']}, seeds {', '.join(map(str, d['full_seeds'] or []))}){other}.")


def readme_section(found: dict[str, Any], quick: QuickPlan) -> str:
    """The README's account of what this run can and cannot show, and the direction against the full result."""
    parts = ["## What this quick run can and cannot show",
             f"**QUICK run: {quick.text()}, at the registered steps.** It is not a result: {WHY}.",
             f"It can show {CAN}.", f"It cannot show {CANNOT}.", summary(found)]
    d = found["direction"]
    if d.get("conditions"):
        parts.append(f"The primary check's rule: {d['rule']}.\n\n" + value_table(
            ["condition", "this seed", "full result's median", "same side"],
            [[cond or "–", c["quick"], c["full_median"], {True: "yes", False: "**no**", None: "n/a"}[c["agrees"]]]
             for cond, c in d["conditions"].items()]))
    if quick.choices:
        parts.append("The learning rate each arm ran at:\n\n" + quick.table())
    return "\n\n".join(parts)
