"""What marks a smoke or a quick run as not a result, in every output: the closing terminal line, the README's title
and banner, every figure (normtrain.study.plots.marked) and ``result.json`` (``smoke: true``, or ``quick: {...}``
with ``verdict: no verdict (quick: one seed)``).

A smoke run's numbers come from four steps a run and say nothing about the science; a quick run's from one seed
(normtrain/reproduce/quick.py). Each output can be read alone (a figure pasted into a slide, the last terminal line
of a log), so each carries the mark itself.
"""

from __future__ import annotations

from typing import Any

from normtrain.reproduce import quick
from normtrain.study.plan import Plan

SMOKE = "SMOKE"
QUICK = "QUICK"
FIGURE = {SMOKE: "SMOKE: pipeline check, not a result", QUICK: "QUICK: one seed, no verdict"}


def mark_of(plan: Plan) -> str | None:
    return SMOKE if plan.smoke else QUICK if plan.quick is not None else None


def figure_mark(plan: Plan) -> str | None:
    """The text drawn across every figure of the run (None: a result's figures carry none)."""
    mark = mark_of(plan)
    return FIGURE[mark] if mark else None


def title(plan: Plan, text: str) -> str:
    mark = mark_of(plan)
    return f"{mark}: {text}" if mark else text


def banner(plan: Plan) -> str:
    """The README's first paragraph under its title: what kind of run this is, when it is not a result."""
    if plan.smoke:
        return ("**SMOKE. Smoke run (a handful of steps, the first seed, two values of each axis): it checks the "
                "pipeline; the numbers below say nothing about the science.**")
    if plan.quick is not None:
        return (f"**QUICK run ({plan.quick.text()}): no verdict; see *What this quick run can and cannot show* "
                "below. The full result is `experiments/" + plan.name + "/`.**")
    return ""


def closing_line(name: str, result: dict[str, Any]) -> str:
    """The terminal's last word on an invocation: a result's verdict and headline; a smoke run's mark and no
    number; a quick run's mark, no verdict, and the direction of its primary difference."""
    minutes = f"{result['wall_time_s'] / 60:.1f} min"
    written = f"\n  written: {result['readme']}"
    if result.get("smoke"):
        runs = f"{result['runs']} runs" if "runs" in result else "the runs"
        return (f"{name}: SMOKE run, not a result ({runs} of a few steps, {minutes}): the pipeline ran end to end; "
                f"its numbers say nothing about the science{written}")
    if result.get("quick"):
        return f"{name}: QUICK run, {quick.VERDICT} ({minutes}). {quick.summary(result['quick'])}{written}"
    return f"{name}: {result['verdict']} ({minutes}). {result['key']}{written}"
