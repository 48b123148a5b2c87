"""The report's opening summary in words: which groups of runs diverged, collapsed onto the unigram line or learned,
and, for each that failed, what its own per-block numbers say about why, beside the runs that learned.

Every figure is read from the runs' folders (summary.json's status, flags and losses; metrics.jsonl's
``grad_norm/layer_i`` and ``attn_entropy/layer_i`` at the last logged step where every block's value is finite), a
group's as the median over its runs. A sentence about why appears only when its numbers cross the thresholds below
and the runs that learned do not; when nothing failed the summary says so, and when the numbers say nothing it says
that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from normtrain.compare.groups import FAILED, OUTCOMES, Group, outcome
from normtrain.compare.runs import Run
from normtrain.util.numbers import number

# the last block's gradient norm over block 0's (or its inverse): two decades lost between the top and the bottom
# of the stack is a gradient that no longer reaches one end of it (Post-LN's, Xiong et al. 2020, Fig. 3)
GRADIENT_RATIO = 100.0
# nats below the entropy of attention spread evenly over every visible position: a block this close attends to no
# position more than the others (the uniform entropy of a 128-token context is 3.88 nats; a trained head's is lower)
NEAR_UNIFORM = 0.05
MANY_GROUPS = 6  # past this many groups the ones that learned are counted in one clause, the failed still named
VERBS = {"diverged": "diverged", "failed": "failed (stopped with an error)",
         "collapsed": "collapsed onto the unigram line", "above the unigram line": "ended above the unigram line",
         "on the unigram line": "ended on the unigram line",
         "stopped early": "stopped early", "learned": "learned", "completed": "completed"}


@dataclass
class Finding:
    """One sentence of the summary, and the figure that shows its numbers (an id in the page; "" for none)."""

    text: str
    figure: str = ""


@dataclass
class Profile:
    """Per-block values of a group's runs at their last logged step where every block's is finite (the median
    over the runs, element by element)."""

    steps: list[int]
    values: np.ndarray

    @property
    def at(self) -> str:
        return f"step {self.steps[0]}" if len(set(self.steps)) == 1 else "each run's last logged step"


def profile(runs: Sequence[Run], prefix: str) -> Profile | None:
    """The runs' ``prefix/layer_i`` profile (None where a run has none, or the runs differ in depth)."""
    steps, rows = [], []
    for run in runs:
        logged, values = run.layer_matrix(prefix)
        finite = np.flatnonzero(np.isfinite(values).all(axis=1)) if values.size else []
        if not len(finite):
            return None
        steps.append(int(logged[finite[-1]]))
        rows.append(values[finite[-1]])
    if not rows or len({len(r) for r in rows}) != 1:
        return None
    return Profile(steps, np.median(np.asarray(rows), axis=0))


def uniform_entropy(seq_len: int) -> float:
    """The attention entropy the monitor logs for attention spread evenly: the mean over query positions
    t = 1..T of ln t (position t sees t keys), ln(T!)/T."""
    return math.lgamma(seq_len + 1) / seq_len


def blocks(indices: Sequence[int]) -> str:
    """``[4, 5, 6, 9]`` -> ``blocks 4–6 and 9``."""
    spans: list[list[int]] = []
    for i in indices:
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    parts = [f"{a}" if a == b else f"{a}–{b}" for a, b in spans]
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"block{'s' if len(indices) > 1 else ''} {text}"


def span(values: Sequence[float], decimals: int = 3) -> str:
    """``0.91–1.3``, or one number."""
    lo, hi = min(values), max(values)
    return number(lo, decimals) if number(lo, decimals) == number(hi, decimals) else \
        f"{number(lo, decimals)}–{number(hi, decimals)}"


def named(group: Group, runs: Sequence[Run]) -> str:
    """The group's label, with how many of its runs the sentence is about when it has several."""
    if group.n == 1:
        return group.label
    return f"{group.label} ({len(runs)}{'' if len(runs) == group.n else f' of {group.n}'} runs)"


def _median(runs: Sequence[Run], key: str) -> float | None:
    values = [v for r in runs if isinstance(v := r.summary.get(key), (int, float)) and math.isfinite(v)]
    return float(np.median(values)) if values else None


def _figures(runs: Sequence[Run], what: str, line: bool) -> str:
    """What a headline's clause gives for runs of outcome ``what``: where they diverged, or their final loss (and,
    with ``line``, their unigram line: when the runs' lines differ)."""
    if what == "diverged":
        at = sorted({r.diverged_at for r in runs if isinstance(r.diverged_at, int)})
        return f" at step {', '.join(map(str, at))}" if at else ""
    final, level = _median(runs, "final_val_loss"), _median(runs, "unigram_val_loss")
    if final is None or what == "failed":
        return ""
    which = "final val loss" if len(runs) == 1 else "median final val loss"
    unsure = "; still falling" if what == "learned" and all(r.summary.get("undertrained") is True for r in runs) else ""
    if what == "on the unigram line":
        falling = {r.summary.get("undertrained") for r in runs}
        unsure = {frozenset({True}): "; still falling",
                  frozenset({None}): "; not labelled collapsed: too few evaluations to tell whether it had stopped "
                                     "falling"}.get(frozenset(falling), "; not labelled collapsed")
    return (f" ({which} {number(final)}" + (f", the unigram line at {number(level)}" if line and level else "")
            + unsure + ")")


def counted(pairs: list[tuple[Group, list[Run]]], what: str) -> str:
    """Many groups of one healthy outcome in one clause: how many, and the range of their final losses."""
    finals = [v for _, rs in pairs for r in rs if isinstance(v := r.summary.get("final_val_loss"), (int, float))]
    span = f" (final val loss {number(min(finals))}–{number(max(finals))})" if finals else ""
    return f"{len(pairs)} groups {VERBS[what]}{span}"


def by_outcome(groups: Sequence[Group]) -> dict[str, list[tuple[Group, list[Run]]]]:
    """Per outcome (in ``OUTCOMES``' order) the groups with runs of it, and those runs."""
    found: dict[str, list[tuple[Group, list[Run]]]] = {}
    for what in OUTCOMES:
        for group in groups:
            if runs := [r for r in group.runs if outcome(r) == what]:
                found.setdefault(what, []).append((group, runs))
    return found


def headline(found: dict[str, list[tuple[Group, list[Run]]]], total: int) -> Finding:
    """Of N runs: which groups ended how, with their losses, and the unigram line they are judged by."""
    runs = [r for pairs in found.values() for _, rs in pairs for r in rs]
    levels = {number(v) for r in runs if isinstance(v := r.summary.get("unigram_val_loss"), (int, float))}
    many = sum(len(pairs) for pairs in found.values()) > MANY_GROUPS
    parts = []
    for what, pairs in found.items():
        if many and what not in FAILED:
            parts.append(counted(pairs, what))
        else:
            parts += [f"{named(g, rs)} {VERBS[what]}{_figures(rs, what, len(levels) > 1)}" for g, rs in pairs]
    line = (f" The unigram line (the loss of predicting token frequencies alone) is at {levels.pop()}."
            if len(levels) == 1 else "" if levels else " No run recorded a unigram baseline.")
    return Finding(f"Of {total} run{'s' if total != 1 else ''}: " + "; ".join(parts) + "." + line, "fig-loss")


def summary(groups: Sequence[Group]) -> list[Finding]:
    """The summary's sentences: the headline, then for each group that failed the evidence of why (or that its
    numbers show none), or that no run failed."""
    found = by_outcome(groups)
    if not found:
        return []
    out = [headline(found, sum(g.n for g in groups))]
    learned = [r for g, rs in found.get("learned", []) for r in rs]
    failing = [(g, rs) for what in FAILED for g, rs in found.get(what, [])]
    if not failing:
        early = sum(len(rs) for _, rs in found.get("stopped early", []))
        caveats = [*([f"{early} stopped before the end, unjudged"] if early else []),
                   *(["runs without a unigram baseline are not judged against one"] if "completed" in found else [])]
        return [*out, Finding("No run diverged, failed, or ended on or above the unigram line"
                              + (f" ({'; '.join(caveats)})" if caveats else "") + ".")]
    for group, runs in failing:
        why = [f for f in (gradient(group, runs, learned), entropy(group, runs, learned)) if f]
        out += why or [silent(group, runs)]
    return out


def silent(group: Group, runs: Sequence[Run]) -> Finding:
    logged = [p for p in ("grad_norm", "attn_entropy") if profile(runs, p)]
    if not logged:
        return Finding(f"{named(group, runs)} logged no per-block gradient norms or attention entropy to say why.")
    return Finding(f"{named(group, runs)}: neither its per-block gradient norms nor its attention entropy stand "
                   f"apart from the runs that learned (a last-to-first block gradient ratio beyond {GRADIENT_RATIO:g} "
                   f"either way; attention within {NEAR_UNIFORM:g} nats of uniform).")


def _ratio(p: Profile) -> float | None:
    top, bottom = float(p.values[-1]), float(p.values[0])
    return top / bottom if top > 0 and bottom > 0 and len(p.values) > 1 else None


def gradient(group: Group, runs: Sequence[Run], learned: Sequence[Run]) -> Finding | None:
    """Its gradient norm from the last block to block 0, when it changes by more than ``GRADIENT_RATIO`` either way
    and no run that learned does the same."""
    p = profile(runs, "grad_norm")
    ratio = _ratio(p) if p else None
    if ratio is None or 1 / GRADIENT_RATIO < ratio < GRADIENT_RATIO:
        return None
    theirs = [r for run in learned if (q := profile([run], "grad_norm")) and (r := _ratio(q))]
    if any(r >= GRADIENT_RATIO if ratio > 1 else r <= 1 / GRADIENT_RATIO for r in theirs):
        return None
    way = "falls" if ratio > 1 else "grows"
    factor = ratio if ratio > 1 else 1 / ratio
    last = len(p.values) - 1
    text = (f"{named(group, runs)}: at {p.at} the gradient norm {way} from {number(p.values[-1])} at block {last} "
            f"to {number(p.values[0])} at block 0, a factor of {number(factor, 0)} on the way down the stack")
    if theirs:
        text += f"; in the runs that learned the last block's is {span(theirs, 2)} times block 0's"
    return Finding(text + ".", "fig-grad-norm-profile")


def _uniform_blocks(p: Profile, uniform: float) -> list[int]:
    return [i for i, v in enumerate(p.values) if v >= uniform - NEAR_UNIFORM]


def entropy(group: Group, runs: Sequence[Run], learned: Sequence[Run]) -> Finding | None:
    """The blocks whose attention entropy is within ``NEAR_UNIFORM`` of uniform, when they are more than in any run
    that learned."""
    seq_len = {((r.config or {}).get("model") or {}).get("seq_len") for r in runs}
    p = profile(runs, "attn_entropy")
    if p is None or len(seq_len) != 1 or not isinstance(t := seq_len.pop(), int) or t < 1:
        return None
    uniform = uniform_entropy(t)
    flat = _uniform_blocks(p, uniform)
    theirs = [q for run in learned if (q := profile([run], "attn_entropy"))]
    if not flat or any(len(_uniform_blocks(q, uniform)) >= len(flat) for q in theirs):
        return None
    text = (f"{named(group, runs)}: at {p.at} its attention is spread evenly over the context in {blocks(flat)} of "
            f"{len(p.values)} (entropy {span(p.values[flat].tolist(), 2)} nats; uniform over {t} positions is "
            f"{number(uniform, 2)})")
    alike = [q.values[flat] for q in theirs if len(q.values) == len(p.values)]
    if alike:
        text += f"; in the runs that learned those blocks are at {span(np.concatenate(alike).tolist(), 2)} nats"
    return Finding(text + ".", "fig-attn-entropy-profile")
