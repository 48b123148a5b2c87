"""The results folder of a reproduction: README.md, figures, ``runs.csv`` and ``result.json``.

The checks are the experiment's declared rules (normtrain/reproduce/preregistered/NAME.py) applied to what the
analysis measured, seed by seed; the README says which commit declared them and whether that was before the runs,
and includes the hand-written ``CHECK_HISTORY.md`` of the experiment's folder (every change to a check made after
results were seen, with its reason). ``experiments/README.md`` gets one table row per experiment, rebuilt from
every ``result.json`` between two markers, so the hand-written rest of that page stays as it is.
"""

from __future__ import annotations

import csv
import json
import platform
from pathlib import Path
from typing import Any

from normtrain.atomic import write_json
from normtrain.reproduce.preregistration import CheckResult, judge, preregistered, verdict
from normtrain.reproduce.runner import Experiment, Findings, Plan

BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"
MARK = {True: "yes", False: "**no**", None: "n/a"}
HISTORY = "CHECK_HISTORY.md"
REPORT = "report.html"


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "∞" if value > 0 else "−∞"
        if value == 0 or abs(value) >= 1e3:
            return f"{value:.0f}"
        return f"{value:.{digits}g}" if abs(value) < 1e-2 else f"{value:.{digits}f}"
    return str(value)


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v).replace("|", "\\|") for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


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


def write(exp: Experiment, plan: Plan, rows: list[dict[str, Any]], findings: Findings, *, wall_time_s: float,
          device: str, provenance: dict[str, Any], started_at: str) -> Path:
    """Write the folder ``plan.out`` and return its README."""
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    reg = exp.registration
    checks = [judge(rule, findings.measured.get(rule.quantity)) for rule in reg.rules]
    figures = []
    for filename, draw in findings.figures.items():
        draw(out / filename)
        figures.append(filename)
    write_csv(rows, out / "runs.csv")
    for filename, table in findings.csv.items():
        write_csv(table, out / filename)
    report = interactive_report(exp, plan, out / REPORT)
    record = {**provenance, "first_run_at": first_run_at(rows, started_at)}
    record["before_runs"] = preregistered(provenance, record["first_run_at"])
    seeds = sorted(int(s) for s in plan.grid.get("train.seed", ["0"]))
    unigram = unigram_of(rows)
    result = {"name": exp.name, "title": exp.title, "paper": exp.paper, "reference": exp.reference,
              "claim": reg.claim, "paper_number": reg.paper_number, "norm": reg.norm, "ours": findings.ours,
              "verdict": verdict(checks), "key": findings.key, "scale": plan.scale, "smoke": plan.smoke,
              "runs": len(plan.combos()), "seeds": seeds, "unigram_val_loss": unigram,
              "wall_time_s": round(wall_time_s, 1), "device": device, "command": plan.command,
              "preregistration": record, "checks": [c.as_dict() for c in checks]}
    write_json(out / "result.json", result)
    text = readme(exp, plan, rows, findings, checks, result, figures, device, report)
    path = out / "README.md"
    path.write_text(text.replace("\n\n\n", "\n\n"))
    return path


def interactive_report(exp: Experiment, plan: Plan, path: Path) -> str:
    """normtrain-compare's interactive page of the experiment's training runs (seeds grouped, hover, zoom); a line
    for the README saying where it is, or why there is none."""
    from normtrain.compare import write_report
    from normtrain.compare.cli import CompareError

    folders = [plan.run_dir(c) for c in plan.combos() if (plan.run_dir(c) / "metrics.jsonl").is_file()]
    if not folders:
        path.unlink(missing_ok=True)
        return "No interactive report: this experiment measures fresh models and trains no runs."
    try:
        write_report(folders, path, title=f"{exp.title}: every run")
    except CompareError as err:
        return f"No interactive report: {err}."
    return (f"Every run, interactive (loss curves with seeds grouped, per-layer diagnostics, hover and zoom; "
            f"open it from disk): [`{REPORT}`]({REPORT}).")


def readme(exp: Experiment, plan: Plan, rows: list[dict[str, Any]], findings: Findings, checks: list[CheckResult],
           result: dict[str, Any], figures: list[str], device: str, report: str) -> str:
    reg = exp.registration
    grid = "\n".join(f"- `{k}`: {', '.join(v)}" for k, v in plan.grid.items())
    notes = ("\nNotes:\n\n" + "".join(f"- {n}\n" for n in findings.notes)) if findings.notes else ""
    declared = markdown_table(["check", "expectation (paper)", "rule"],
                              [[c.rule.id, c.rule.expectation, c.rule.condition_text()] for c in checks])
    judged = markdown_table(["check", "measured here (per-seed median [min, max], seeds passing)", "holds"],
                            [[c.rule.id, c.measured(), MARK[c.ok]] for c in checks])
    unigram = result["unigram_val_loss"]
    data_files = ", ".join(f"[`{f}`]({f})" for f in ["runs.csv", *findings.csv])
    baseline = (f"Unigram baseline: **{fmt(unigram)} nats**: the cross-entropy of the train split's byte frequencies "
                "on the same validation windows; a run that ends within 0.05 nats of it (or above) learned nothing "
                "but byte frequencies and is flagged *collapsed*.\n\n" if unigram is not None else "")
    return f"""# {exp.title}

*Generated by `{plan.command}`: do not edit by hand; rerun the command.*
{"**Smoke run (a handful of steps): the numbers below say nothing about the science.**" if plan.smoke else ""}

## The claim

{exp.reference}

{reg.claim}

The paper's number: {reg.paper_number}

## Pre-registered checks

{provenance_text(result["preregistration"])}

{declared}

## What we ran

{exp.method}

Norm: {reg.norm}. Metric: {reg.metric}

Every run uses `configs/experiment/{exp.name}.yaml`{' with `' + ' '.join(plan.base[1:]) + '`' if plan.base[1:] else ''};
the grid ({result['runs']} runs, seeds {', '.join(map(str, result['seeds']))}):

{grid}

Device: {environment(device)}. Wall time: {result['wall_time_s'] / 60:.1f} min for the whole experiment (runs reused
from an earlier invocation counted with their own wall time).

## Results

{findings.table}

{baseline}{"".join(f"![{f}]({f})" + chr(10) + chr(10) for f in figures)}Per-run numbers: {data_files}.

{report}

## Verdict: {result['verdict']}

{judged}

{findings.key}
{notes}
## Check history

{history(plan, exp)}
"""


def provenance_text(record: dict[str, Any]) -> str:
    files = ", ".join(f"`{f}`" for f in record["files"])
    if record.get("commit") is None:
        return (f"**Not pre-registered**: the declaration ({files}) is not in a git commit "
                f"({record.get('why_unknown', 'uncommitted')}).")
    when = f"commit `{record['commit'][:10]}` of {record['committed_at']}"
    if record.get("dirty"):
        return f"**Not pre-registered**: {files} changed after {when}, the last commit that touched them."
    if not record.get("before_runs"):
        return (f"**Not pre-registered**: declared in {files} at {when}, *after* the first run started "
                f"({record['first_run_at']}).")
    return (f"Declared in {files} at {when}, before the first run of this result started ({record['first_run_at']}); "
            f"digest `{record['digest']}`.")


def history(plan: Plan, exp: Experiment) -> str:
    """The experiment's hand-written ``CHECK_HISTORY.md`` (beside the CPU result's folder), if any."""
    for folder in (plan.out, plan.out.parent / exp.name):
        path = folder / HISTORY
        if path.is_file():
            body = path.read_text().strip()
            return body.split("\n", 1)[1].strip() if body.startswith("# ") else body
    return "No check has been changed after results were seen."


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
             f"**{r['verdict']}**" + ("" if (r.get("preregistration") or {}).get("before_runs") else " (checks not "
                                                                                                  "pre-registered)"),
             r.get("norm", ""), r["scale"], f"{r['wall_time_s'] / 60:.1f} min ({r['device']})"] for name, r in results]
    table = markdown_table(["experiment", "claim", "paper's number", "ours (mean ± std, n)", "verdict", "norm",
                            "scale", "wall time"], rows)
    block = f"{BEGIN}\n{table}\n{END}"
    text = index.read_text() if index.is_file() else "# Experiments\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n## Reproductions\n\n" + block + "\n"
    index.write_text(text)
