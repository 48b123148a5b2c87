"""The table of reproductions in ``experiments/README.md``, rebuilt from every folder's ``result.json``.

One row per result folder (``NAME`` at --scale cpu, ``NAME-gpu`` beside it), between two markers, so the
hand-written rest of the page stays as it is. The primary check (the paper's claim, which alone decides a v4
verdict) and the secondary checks (reported beside it) have their own columns; a result registered under v3 has no
primary check, and its cells say so. A GPU result whose verdict differs from the CPU one's says that in its
verdict cell. Beside the verdict: why (the record's ``verdict_why``), the budget it holds at (protocol v5: T and
T/2, or why no budget applies) and whose claim the primary tests (the paper's, a secondary source's, or ours).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from normtrain.reproduce.writeup import markdown_table
from normtrain.study.claim import verdict_words
from normtrain.util.atomic import write_text

BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"
HOLDS = {True: "holds", False: "**fails**", None: "not measured"}
HEADER = ["experiment", "claim", "paper's number", "ours (mean ± sd, n)", "primary (decides)",
          "secondary (reported)", "verdict", "why", "budget", "source of the claim", "registration", "norm", "scale",
          "wall time"]


def wall_time(result: dict[str, Any]) -> str:
    """The invocation's wall time and, where it reused earlier runs, what those runs cost: a re-analysis takes
    a minute, and that minute alone would hide hours of runs."""
    text = f"{result['wall_time_s'] / 60:.1f} min"
    reused = result.get("reused_run_time_s") or 0
    return text + (f", reusing runs that took {reused / 60:.0f} min (their own times summed)" if reused else "")


def check_cell(check: dict[str, Any]) -> str:
    """The check's id and its call; a check measured at some condition whose interval neither holds nor fails is
    *open*, not *not measured*."""
    ours = " (ours)" if check.get("source") == "ours" else ""
    ok = check.get("ok")
    measured = any((c or {}).get("n") for c in (check.get("conditions") or {}).values())
    call = "open" if ok is None and measured else HOLDS[ok]
    return f"`{check['id']}`{ours} {call}"


def primary_cell(result: dict[str, Any]) -> str:
    if result.get("protocol", 3) >= 4 and result.get("primary"):
        return check_cell(result["primary"])
    return "– (v3: no primary check)"


def secondary_cell(result: dict[str, Any]) -> str:
    if result.get("protocol", 3) >= 4:
        return "; ".join(check_cell(c) for c in result.get("secondary") or []) or "none"
    checks = result.get("checks") or []
    held = sum(c.get("ok") is True for c in checks)
    return f"v3, all weighed alike: {held} of {len(checks)} hold" if checks else "–"


def verdict_cell(result: dict[str, Any]) -> str:
    text = f"**{verdict_words(result)}**"
    if result.get("agrees_with_cpu") is False:
        text += f" (the CPU result: {result.get('cpu_verdict')})"
    return text


def budget_cell(result: dict[str, Any]) -> str:
    """The training budget the verdict holds at (protocol v5): T in steps and tokens, and how the primary fared at
    T/2 and one doubling past T; before v5 no budget was read, and the cell says so, as it does where a v5
    precondition withheld the verdict (no budget read)."""
    budget = (result.get("v5") or {}).get("budget")
    steps = result.get("budget") or {}
    at = "T"
    if steps.get("steps"):
        at = f"T = {steps['steps']} steps" + (f" ({steps['tokens'] / 1e6:.2f}M tokens)" if steps.get("tokens") else "")
    if budget is None:  # v5 reads no budget where a precondition withholds the verdict
        return f"{at}; not read (see why)" if result.get("protocol", 0) >= 5 else "– (before v5: one budget)"
    if "not_applicable" in budget:
        return f"none applies: {budget['not_applicable']}"
    if not budget:
        return f"{at}; T/2 not read (see why)"
    half = f" and T/2 = {steps['half_steps']}" if steps.get("half_steps") else " and T/2"
    failed = [(cond, b) for cond, b in budget.items() if not b.get("ok")]
    if not failed:
        return f"{at}: the same call at T{half}, and one doubling past T, extrapolated"
    cond, b = failed[0]
    where = f" at {cond}" if cond else ""
    crossing = b.get("crossing_doublings")
    past = f"; the line crosses about {crossing:.1f} doublings past T" if crossing is not None else ""
    return f"{at}: budget-sensitive{where} ({b['call_half']} at T/2{past})"


def source_cell(result: dict[str, Any]) -> str:
    """Whose claim the primary tests: the paper's, a secondary source's (named by the experiment's ``paper``), or
    a hypothesis of ours."""
    source = (result.get("primary") or {}).get("source")
    if source == "ours":
        return "ours (a hypothesis of this project)"
    if source == "secondary":
        return f"a secondary source: {result.get('paper', '')}"
    paper = result.get("paper") or "–"
    return f"the paper: {paper}" if source == "paper" else paper


def registration_cell(result: dict[str, Any]) -> str:
    """The label, and a warning when the checks were not committed before the runs or changed after they began."""
    declaration = (result.get("provenance") or {}).get("declaration") or {}
    label = f"`{result.get('registration', 'unlabelled')}`"
    if declaration.get("before_runs"):
        return label
    if declaration.get("registered") and not declaration.get("dirty"):
        return f"{label} (changed after the runs began: see its check history)"
    return f"{label} (checks not committed before the runs)"


def update_index(index: Path, order: list[str] = ()) -> None:
    """Rebuild the reproduction table of ``experiments/README.md`` from the folders beside it (``order``
    first: the experiments' own order, each CPU result before its GPU one; other folders after them by name)."""
    results = []
    for path in sorted(index.parent.glob("*/result.json")):
        r = json.loads(path.read_text())
        if not (r.get("smoke") or r.get("quick")):  # a pipeline check or a one-seed look is no result
            results.append((path.parent.name, r))
    rank = {name: i for i, name in enumerate(order)}
    results.sort(key=lambda item: (rank.get(item[1].get("name"), len(rank)), item[1].get("scale") == "gpu",
                                   item[0]))
    rows = [[f"[`{name}`]({name}/README.md)", r.get("claim", ""), r.get("paper_number", ""), r.get("ours", r["key"]),
             primary_cell(r), secondary_cell(r), verdict_cell(r), r.get("verdict_why") or "–", budget_cell(r),
             source_cell(r), registration_cell(r), r.get("norm", ""),
             r["scale"], f"{wall_time(r)} ({r['device']})"] for name, r in results]
    block = f"{BEGIN}\n{markdown_table(HEADER, rows)}\n{END}"
    text = index.read_text() if index.is_file() else "# Experiments\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n## Reproductions\n\n" + block + "\n"
    write_text(index, text)
