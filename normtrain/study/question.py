"""The question a study asks, whole: its arms, what they share, the tuned key and its grid, the seeds, the two
budgets and the decision's numbers. ``ablation.json`` records it, and a rerun must ask the same to resume
(normtrain-ablate reads it from the command line: normtrain/ablate/spec.py; normtrain-compare --tune from a
sweep's runs)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from normtrain.study.decision import ALPHA, MARGIN, Protocol

MAX_EXTENSIONS = 2
SPEC_VERSION = 1


@dataclass(frozen=True)
class Question:
    """One study's question, whole: what ``ablation.json`` records and a rerun must match to resume."""

    arm_key: str
    arms: tuple[str, ...]
    baseline: str
    shared: tuple[str, ...]  # overrides every run gets
    tune: str
    grid: tuple[float, ...]  # the first grid, the same for every arm (extensions are per arm)
    seeds: tuple[int, ...]
    steps: int  # T: train.max_steps of the runs
    half_steps: int  # T/2
    branch: bool  # T/2 as a decay branch off the T run's stable phase (optim.schedule=wsd), else complete runs
    branch_step: int | None  # the step the branch leaves the T run at
    margin: float = MARGIN
    alpha: float = ALPHA
    max_extensions: int = MAX_EXTENSIONS
    version: int = SPEC_VERSION
    select_windows: int = 0  # held-out selection windows per run (train.select_windows)

    @property
    def protocol(self) -> Protocol:
        return Protocol(margin=self.margin, alpha=self.alpha)

    @property
    def name(self) -> str:
        return f"{self.arm_key.split('.')[-1]}-{'-'.join(_slug(a) for a in self.arms)}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def arm_overrides(self, arm: str) -> list[str]:
        return [*self.shared, f"{self.arm_key}={arm}"]

    def same_question(self, other: dict[str, Any]) -> list[str]:
        """The fields in which a recorded spec differs from this one (empty: the same ablation)."""
        mine = self.as_dict()  # seeds may grow or shrink: the same question, more or fewer runs (finished reused)
        differ = [k for k in mine if k not in ("seeds", "shared") and _plain(other.get(k)) != _plain(mine[k])]
        return differ + (["shared"] if what_runs(other.get("shared") or ()) != what_runs(self.shared) else [])


def what_runs(overrides) -> list[str]:
    """The overrides that change what a run computes: where it is logged (``logger``...) does not
    (normtrain/training/resume.py's BOOKKEEPING)."""
    from normtrain.training.resume import BOOKKEEPING

    return sorted(o for o in overrides if not any(o.lstrip("+~").split("=")[0] == b or
                                                  o.lstrip("+~").startswith(b + ".") for b in BOOKKEEPING))



def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def _slug(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "", str(value)) or "x"
