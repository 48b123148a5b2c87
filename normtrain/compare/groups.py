"""Runs that differ only in their seed, as one group: one fixed order and one colour per group in every figure.

The order is placement, then norm, then depth (then the group's label, naturally sorted), whatever order the
folders or the table's sort put the runs in, so that a colour means the same configuration in every figure of a
report, PNG or interactive. Placements and norms follow the papers' order (Post-LN, the problem; Pre-LN, the
usual fix; DeepNorm), any other value comes after the known ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from normtrain.compare.runs import Run, natural_key
from normtrain.util.dotted import flatten

PLACEMENT_ORDER = ("post", "pre", "deepnorm")
NORM_ORDER = ("layernorm", "rmsnorm", "prmsnorm")
ORDER = (("placement.name", PLACEMENT_ORDER), ("norm.name", NORM_ORDER), ("model.n_layers", ()))
# Tableau 10: distinct, colour-blind-aware, and what most plotting libraries start from.
TAB10 = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
         "#bab0ac")
FAMILIES = ("Blues", "Oranges", "Greens", "Purples", "Reds", "Greys", "YlOrBr", "PuRd", "BuGn")
# what became of a run, the failures first (the order the report's summary names them in)
FAILED = ("diverged", "failed", "collapsed", "above the unigram line", "on the unigram line")
OUTCOMES = (*FAILED, "stopped early", "learned", "completed")


def outcome(run: Run) -> str:
    """What became of ``run``, in the words of the report's summary and legends: ``diverged`` or ``failed`` (its
    status), ``collapsed`` (summary.json's flag: flat on the unigram line), ``above the unigram line`` (its
    ``above_line``), ``stopped early`` (interrupted, or killed before its summary), ``on the unigram line`` (completed
    there without the flag: too few evaluations to tell it had stopped falling, or still falling), ``learned``
    (completed below the line) or ``completed`` (no unigram baseline or final loss recorded to judge it by)."""
    from normtrain.data.unigram import on_unigram_line  # the training's own rule; here, not at import: 0.1 s

    if run.status in ("diverged", "failed"):
        return run.status
    if run.summary.get("collapsed") is True:
        return "collapsed"
    if run.summary.get("above_line") is True:
        return "above the unigram line"
    if run.status != "completed":
        return "stopped early"
    final, line = run.summary.get("final_val_loss"), run.summary.get("unigram_val_loss")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (final, line)):
        return "completed"
    return "on the unigram line" if on_unigram_line(final, line) else "learned"


@dataclass
class Group:
    """Runs sharing a label of the grouping keys (``--by``, or every varied key but the seed)."""

    label: str
    runs: list[Run] = field(default_factory=list)
    color: str = "#4e79a7"

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def failure(self) -> str:
        """How its runs failed, for a legend ("collapsed", "2 of 3 diverged", "collapsed, diverged"); "" when none
        did."""
        counts = {o: sum(outcome(r) == o for r in self.runs) for o in FAILED}
        return ", ".join(o if k == self.n else f"{k} of {self.n} {o}" for o, k in counts.items() if k)


def _rank(value: Any, known: Sequence[str]) -> tuple:
    """Known values in their order, then numbers by value, then other text naturally; missing last."""
    if value is None:
        return (3,)
    if isinstance(value, str) and value in known:
        return (0, known.index(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, float(value))
    return (2, natural_key(str(value)))


def _sort_key(group: Group) -> tuple:
    flats = [flatten(r.config) for r in group.runs]
    key = []
    for name, known in ORDER:
        values = {repr(f.get(name)) for f in flats}
        key.append(_rank(flats[0].get(name), known) if len(values) == 1 else (3,))  # mixed in the group: no say
    return (*key, natural_key(group.label))


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """The groups of ``runs`` (by ``run.group``, set by ``label_runs``) in the fixed order, coloured."""
    by_label: dict[str, Group] = {}
    for run in runs:
        label = run.group or run.label
        by_label.setdefault(label, Group(label)).runs.append(run)
    groups = sorted(by_label.values(), key=_sort_key)
    for group, color in zip(groups, palette(groups), strict=True):
        group.color = color
        for run in group.runs:
            run.color = color
    return groups


def palette(groups: Sequence[Group]) -> list[str]:
    """Tableau 10 for up to ten groups. Beyond, a colour family per placement (the first thing that tells groups
    apart) and shades of it for the rest, so that 3 placements × 9 other settings still read by family."""
    if len(groups) <= len(TAB10):
        return list(TAB10[: len(groups)])
    families = [_family(g) for g in groups]
    order = list(dict.fromkeys(families))
    if len(order) > len(FAMILIES) or len(order) == len(groups):
        return _spread("turbo", len(groups))
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    colors, seen = [], {f: 0 for f in order}
    for family in families:
        members = families.count(family)
        i, seen[family] = seen[family], seen[family] + 1
        shade = 0.7 if members == 1 else 0.45 + 0.5 * i / (members - 1)
        colors.append(to_hex(colormaps[FAMILIES[order.index(family)]](shade)))
    return colors


def _family(group: Group) -> str:
    value = flatten(group.runs[0].config).get("placement.name")
    return str(value) if value is not None else group.label.split(" · ", 1)[0]


def _spread(cmap: str, n: int) -> list[str]:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    return [to_hex(colormaps[cmap](0.05 + 0.9 * i / max(n - 1, 1))) for i in range(n)]
