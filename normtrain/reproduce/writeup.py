"""The results folder of a reproduction: README.md, figures, ``runs.csv`` and ``result.json``.

The checks are the experiment's declared rules (normtrain/reproduce/preregistered/NAME.py) applied to what the
analysis measured, seed by seed, behind the trainability guard. ``result.json`` records the registration's label
(``before_runs`` or ``after_pilot``, with the pilot), which commit declared the checks and whether that was before
the runs, the code that ran the runs (``provenance.code_commit``, ``code_dirty``), the guard's outcome, every check's
per-seed values and, per cell of the grid, how many runs diverged, collapsed or ended undertrained. Three hand-written
files of the experiment's folder are woven into the README: ``CHECK_HISTORY.md`` (every change to a check made after
results were seen, with its reason), ``DISCUSSION.md`` (why each failed check failed: ``## <check id>`` sections; a
failed check without one says so) and nothing else. ``experiments/README.md`` gets one table row per experiment,
rebuilt from every ``result.json`` between two markers, so the hand-written rest of that page stays as it is.
"""

from __future__ import annotations

import json
import platform
import re
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from normtrain.reproduce import stats
from normtrain.reproduce.preregistration import CheckResult, Registration, judge, preregistered, verdict
from normtrain.reproduce.runner import SEED_AXIS, Experiment, Findings, Plan
from normtrain.util import atomic, markdown
from normtrain.util.atomic import write_json
from normtrain.util.numbers import number

BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"
MARK = {True: "yes", False: "**no**", None: "n/a"}
HISTORY, DISCUSSION = "CHECK_HISTORY.md", "DISCUSSION.md"
REPORT = "report.html"
COMMITTED_MAX = 2 << 20  # bytes: the report is thinned to fit; one still larger is kept out of git (a .gitignore)
LABEL_TEXT = {"before_runs": "registered before any run of this experiment",
              "after_pilot": "registered **after a pilot** (earlier runs whose numbers were seen; see below)"}


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    return markdown.table(header, [[number(v) if v is None or isinstance(v, float) else str(v) for v in row]
                                   for row in rows])


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """One column per key any row has, in first-seen order; a key a row lacks is an empty cell."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    atomic.write_csv(path, keys, [[row.get(k) for k in keys] for row in rows])


def environment(device: str) -> str:
    import torch

    return f"{device}; torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}"


def first_run_at(rows: list[dict[str, Any]], fallback: str) -> str:
    """When the earliest run of the result started (a forward-only experiment: when the measurement began)."""
    starts = [r["started_at"] for r in rows if r.get("started_at")]
    return min(starts) if starts else fallback


def unigram_of(rows: list[dict[str, Any]]) -> float | None:
    """The experiment's unigram baseline (the same eval windows in every run); None for forward-only ones."""
    values = {round(r["unigram_val_loss"], 9) for r in rows if r.get("unigram_val_loss") is not None}
    return min(values) if values else None


def code_provenance(rows: list[dict[str, Any]], analysis: dict[str, Any]) -> dict[str, Any]:
    """The code that ran the runs (each row carries its run's commit; forward-only rows the measuring process's),
    and the code that analysed them now."""
    commits = Counter(r["code_commit"] for r in rows if r.get("code_commit"))
    known = [r.get("code_dirty") for r in rows if r.get("code_dirty") is not None]
    record = {"code_commit": commits.most_common(1)[0][0] if commits else analysis.get("code_commit"),
              "code_dirty": any(known) if known else analysis.get("code_dirty"),
              "run_commits": dict(commits), "analysis_commit": analysis.get("code_commit"),
              "analysis_dirty": analysis.get("code_dirty")}
    if analysis.get("why_unknown") and not commits:
        record["why_unknown"] = analysis["why_unknown"]
    return record


def write(exp: Experiment, plan: Plan, rows: list[dict[str, Any]], findings: Findings, *, timing: dict[str, Any],
          device: str, declared: dict[str, Any], code: dict[str, Any], started_at: str) -> Path:
    """Write the folder ``plan.out`` and return its README."""
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    reg = exp.registration
    checks = [judge(rule, findings.measured.get(rule.quantity), findings.unit(rule.quantity)) for rule in reg.rules]
    guard = judge(reg.guard.rule(), findings.measured.get(reg.guard.quantity)) if reg.guard else None
    figures = []
    for filename, draw in findings.figures.items():
        draw(out / filename)
        figures.append(filename)
    write_csv(rows, out / "runs.csv")
    for filename, table in findings.csv.items():
        write_csv(table, out / filename)
    report = interactive_report(exp, plan, out / REPORT)
    result = result_record(exp, plan, rows, findings, checks, guard, timing=timing, device=device,
                           declared=declared, code=code, started_at=started_at)
    write_json(out / "result.json", result)
    text = readme(exp, plan, findings, checks, guard, result, figures, report)
    path = out / "README.md"
    path.write_text(re.sub(r"\n{3,}", "\n\n", text))
    return path


def result_record(exp: Experiment, plan: Plan, rows: list[dict[str, Any]], findings: Findings,
                  checks: list[CheckResult], guard: CheckResult | None, *, timing: dict[str, Any], device: str,
                  declared: dict[str, Any], code: dict[str, Any], started_at: str) -> dict[str, Any]:
    """What ``result.json`` holds."""
    reg = exp.registration
    first = first_run_at(rows, started_at)
    declaration = {**declared, "first_run_at": first, "before_runs": preregistered(declared, first)}
    axes = [a for a in plan.grid if a != SEED_AXIS]
    trained = any("status" in r for r in rows)
    return {"name": exp.name, "title": exp.title, "paper": exp.paper, "reference": exp.reference,
            "claim": reg.claim, "paper_number": reg.paper_number, "norm": reg.norm, "ours": findings.ours,
            "verdict": verdict(checks, guard), "key": findings.key, "scale": plan.scale, "smoke": plan.smoke,
            "runs": len(plan.combos()), "seeds": sorted(int(s) for s in plan.grid.get(SEED_AXIS, ["0"])),
            "unigram_val_loss": unigram_of(rows), **{k: round(v, 1) if isinstance(v, float) else v
                                                      for k, v in timing.items()},
            "device": device, "command": plan.command, "registration": reg.label,
            "pilot": asdict(reg.pilot) if reg.pilot else None, "reported": list(reg.reported),
            "provenance": {**code_provenance(rows, code), "declaration": declaration},
            "guard": guard.as_dict() if guard else None, "checks": [c.as_dict() for c in checks],
            "cells": stats.cell_counts(rows, axes) if trained else None}


def interactive_report(exp: Experiment, plan: Plan, path: Path) -> str:
    """normtrain-compare's interactive page of the experiment's training runs (seeds grouped, hover, zoom), its
    series thinned to fit the size of a committed file if need be; a line for the README saying where it is, how
    far it was thinned, or why there is none."""
    from normtrain.compare import report_page
    from normtrain.compare.cli import CompareError

    folders = [plan.run_dir(c) for c in plan.combos() if (plan.run_dir(c) / "metrics.jsonl").is_file()]
    if not folders:
        path.unlink(missing_ok=True)
        return "No interactive report: this experiment measures fresh models and trains no runs."
    try:
        # grouped by the grid's axes: runs that a later commit logged with more config keys stay one group
        page = report_page(folders, by=[axis for axis in plan.grid if axis != SEED_AXIS],
                           title=f"{exp.title}: every run", max_bytes=COMMITTED_MAX)
    except CompareError as err:
        return f"No interactive report: {err}."
    atomic.write_text(path, page.html)
    line = (f"Every run, interactive (loss curves with seeds grouped, per-layer diagnostics, hover and zoom; "
            f"open it from disk): [`{REPORT}`]({REPORT})")
    limit = f"the repository's {COMMITTED_MAX >> 20} MiB limit for a committed file"
    thinned = f"its series thinned to at most {page.points} of each run's logged steps" if page.points else ""
    ignore = path.parent / ".gitignore"
    if (size := path.stat().st_size) <= COMMITTED_MAX:
        ignore.unlink(missing_ok=True)
        return line + (f", {thinned} to fit {limit} (the run folders hold every step)." if thinned else ".")
    atomic.write_text(ignore, f"# over {limit}\n{REPORT}\n")
    return (f"{line}: {size / 2**20:.1f} MiB{', even with ' + thinned if thinned else ''}, over {limit}, so it is "
            f"not in git; `normtrain-reproduce {exp.name}` rebuilds it from the run folders.")


def readme(exp: Experiment, plan: Plan, findings: Findings, checks: list[CheckResult], guard: CheckResult | None,
           result: dict[str, Any], figures: list[str], report: str) -> str:
    reg = exp.registration
    return "\n\n".join([
        f"# {exp.title}",
        f"*Generated by `{plan.command}`: do not edit by hand; rerun the command.*",
        "**Smoke run (a handful of steps): the numbers below say nothing about the science.**" if plan.smoke else "",
        f"## The claim\n\n{exp.reference}\n\n{reg.claim}\n\n{reg.detail}\n\nThe paper's number: {reg.paper_number}",
        registration_section(reg, checks, guard, result),
        method_section(exp, plan, result),
        results_section(findings, result, figures, report),
        verdict_section(checks, guard, result, findings, folder_text(plan, exp, DISCUSSION)),
        "## Check history\n\n" + (folder_text(plan, exp, HISTORY)
                                  or "No check has been changed after results were seen."),
    ]) + "\n"


def registration_section(reg: Registration, checks: list[CheckResult], guard: CheckResult | None,
                         result: dict[str, Any]) -> str:
    parts = ["## Registration", f"**Label: `{reg.label}`**: {LABEL_TEXT[reg.label]}.",
             declaration_text(result["provenance"]["declaration"]), code_text(result["provenance"])]
    if reg.pilot:
        p = reg.pilot
        parts.append(f"**The pilot.** Runs: {p.runs}\n\nWhat it measured: {p.numbers}\n\nWhat changed after it: "
                     f"{p.changed}")
    rules = [*checks, *([guard] if guard else [])]
    parts.append("Declared checks (the rule, and the basis of each threshold or band):\n\n" + markdown_table(
        ["check", "expectation (paper)", "rule", "basis"],
        [[c.rule.id, c.rule.expectation, c.rule.condition_text(c.unit), c.rule.basis or "–"] for c in rules]))
    if reg.guard:
        parts.append(f"**Trainability guard.** Before any loss comparison, {reg.guard.arm} must beat the unigram line "
                     f"by {reg.guard.margin:g} nats; where it does not, the verdict is *inconclusive "
                     "(undertrained)*, whatever the checks say.")
    if reg.reported:
        parts.append("Reported, not judged (declared with the checks):\n\n" + "".join(f"- {r}\n" for r in reg.reported))
    return "\n\n".join(parts)


def method_section(exp: Experiment, plan: Plan, result: dict[str, Any]) -> str:
    reg = exp.registration
    grid = "\n".join(f"- `{k}`: {', '.join(v)}" for k, v in plan.grid.items())
    extra = f" with `{' '.join(plan.base[1:])}`" if plan.base[1:] else ""
    minutes = result["wall_time_s"] / 60
    reused = result.get("reused_run_time_s") or 0
    reuse = (f"; runs reused from an earlier invocation took {reused / 60:.1f} min of their own" if reused else "")
    return (f"## What we ran\n\n{exp.method}\n\nNorm: {reg.norm}. Metric: {reg.metric}\n\n"
            f"Every run uses `configs/experiment/{exp.name}.yaml`{extra}; the grid ({result['runs']} runs, seeds "
            f"{', '.join(map(str, result['seeds']))}):\n\n{grid}\n\nDevice: {environment(result['device'])}. Wall "
            f"time: {minutes:.1f} min for this invocation with {result.get('jobs', 1)} job(s) at a time{reuse}; the "
            f"runs' own times sum to {(result.get('run_time_s') or 0) / 60:.1f} min.")


def results_section(findings: Findings, result: dict[str, Any], figures: list[str], report: str) -> str:
    unigram = result["unigram_val_loss"]
    baseline = (f"Unigram baseline: **{number(unigram)} nats**: the cross-entropy of the train split's byte "
                "frequencies on the same validation windows. A run that ends on it (within 0.05 nats, or above) "
                "and has stopped falling is *collapsed*; one that ends there still falling is *undertrained* "
                "(normtrain/training/outcome.py)."
                if unigram is not None else "")
    cells = result.get("cells")
    totals = ""
    if cells:
        t = {k: sum(c[k] for c in cells) for k in ("n", "diverged", "collapsed", "undertrained")}
        totals = (f"Of {t['n']} runs, {t['diverged']} diverged, {t['collapsed']} collapsed and {t['undertrained']} "
                  "ended undertrained (per cell: the tables, and `cells` in result.json).")
    data_files = ", ".join(f"[`{f}`]({f})" for f in ["runs.csv", *findings.csv])
    pictures = "\n\n".join(f"![{f}]({f})" for f in figures)
    return "\n\n".join(["## Results", findings.table, baseline, totals, pictures, f"Per-run numbers: {data_files}.",
                        report])


def verdict_section(checks: list[CheckResult], guard: CheckResult | None, result: dict[str, Any],
                    findings: Findings, discussion: str) -> str:
    parts = [f"## Verdict: {result['verdict']}"]
    if guard is not None:
        parts.append(f"Trainability guard: {MARK[guard.ok]} ({guard.measured()}).")
    parts.append(markdown_table(["check", "measured here (median [min, max] over seeds, or repeats of a timing; how "
                                          "many pass)", "holds"],
                                [[c.rule.id, c.measured(), MARK[c.ok]] for c in checks]))
    parts.append(findings.key)
    if findings.notes:
        parts.append("Notes:\n\n" + "".join(f"- {n}\n" for n in findings.notes))
    judged = [*checks, *([guard] if guard else [])]
    failed = [c.rule.id for c in judged if c.ok is False]
    sections = explanations(discussion)
    if failed:
        parts.append("### Why checks failed\n\n" + "\n\n".join(
            f"**{cid}.** " + sections.get(cid, "*Not yet explained: no section in DISCUSSION.md.*") for cid in failed))
    if others := [(title, text) for title, text in sections.items() if title not in {c.rule.id for c in judged}]:
        parts.append("### What the checks do not show\n\n" + "\n\n".join(f"**{t}.** {text}" for t, text in others))
    return "\n\n".join(parts)


def explanations(text: str) -> dict[str, str]:
    """``## <title>`` sections of DISCUSSION.md, by title: a check's id explains its failure; any other title is
    an observation the checks do not cover."""
    found = {}
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        found[head.strip().strip("`")] = body.strip()
    return found


def declaration_text(record: dict[str, Any]) -> str:
    files = ", ".join(f"`{f}`" for f in record["files"])
    if record.get("commit") is None:
        return (f"**Checks not committed**: the declaration ({files}) is not in a git commit "
                f"({record.get('why_unknown', 'uncommitted')}).")
    when = f"commit `{record['commit'][:10]}` of {record['committed_at']}"
    if record.get("dirty"):
        return f"**Checks changed after their commit**: {files} differ from {when}, the last commit that touched them."
    if not record.get("before_runs"):
        return (f"**Checks committed after the runs**: declared in {files} at {when}, *after* the first run started "
                f"({record['first_run_at']}).")
    return (f"Declared in {files} at {when}, before the first run of this result started ({record['first_run_at']}); "
            f"digest `{record['digest']}`.")


def code_text(record: dict[str, Any]) -> str:
    if record.get("code_commit") is None:
        return f"Code that ran the runs: unknown ({record.get('why_unknown', 'no commit recorded')})."
    several = len(record.get("run_commits") or {}) > 1
    text = (f"Code that ran the runs: commit `{record['code_commit']}`"
            + (" (the most runs; they came from several commits, all in `provenance.run_commits`)" if several else "")
            + (", **with uncommitted changes**" if record.get("code_dirty") else ", a clean tree") + ".")
    if record.get("analysis_commit") and record["analysis_commit"] != record["code_commit"]:
        text += f" Analysed at commit `{record['analysis_commit'][:10]}`."
    return text


def folder_text(plan: Plan, exp: Experiment, filename: str) -> str:
    """A hand-written file of the experiment's folder (beside the CPU result's), without its title line."""
    for folder in (plan.out, plan.out.parent / exp.name):
        path = folder / filename
        if path.is_file():
            body = path.read_text().strip()
            return body.split("\n", 1)[1].strip() if body.startswith("# ") else body
    return ""


def wall_time(result: dict[str, Any]) -> str:
    """The invocation's wall time and, where it reused earlier runs, what those runs cost: a re-analysis takes
    a minute, and that minute alone would hide hours of runs."""
    text = f"{result['wall_time_s'] / 60:.1f} min"
    reused = result.get("reused_run_time_s") or 0
    return text + (f", reusing runs that took {reused / 60:.0f} min (their own times summed)" if reused else "")


def update_index(index: Path, order: list[str] = ()) -> None:
    """Rebuild the reproduction table of ``experiments/README.md`` from the folders beside it (``order``
    first: the experiments' own order; other folders after them by name)."""
    results = []
    for path in sorted(index.parent.glob("*/result.json")):
        r = json.loads(path.read_text())
        if not r.get("smoke"):
            results.append((path.parent.name, r))
    rank = {name: i for i, name in enumerate(order)}
    results.sort(key=lambda item: (rank.get(item[1].get("name"), len(rank)), item[0]))
    rows = [[f"[`{name}`]({name}/README.md)", r.get("claim", ""), r.get("paper_number", ""), r.get("ours", r["key"]),
             f"**{r['verdict']}**", registration_cell(r), r.get("norm", ""), r["scale"],
             f"{wall_time(r)} ({r['device']})"] for name, r in results]
    table = markdown_table(["experiment", "claim", "paper's number", "ours (mean ± sd, n)", "verdict",
                            "registration", "norm", "scale", "wall time"], rows)
    block = f"{BEGIN}\n{table}\n{END}"
    text = index.read_text() if index.is_file() else "# Experiments\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n## Reproductions\n\n" + block + "\n"
    index.write_text(text)


def registration_cell(result: dict[str, Any]) -> str:
    """The label, and a warning when the checks were not committed before the runs."""
    declaration = (result.get("provenance") or {}).get("declaration") or {}
    label = f"`{result.get('registration', 'unlabelled')}`"
    return label if declaration.get("before_runs") else f"{label} (checks not committed before the runs)"
