"""The results folder of a reproduction: README.md, figures, ``runs.csv`` and ``result.json``.

The checks are the experiment's declared rules (normtrain/reproduce/preregistered/NAME.py) applied to what the
analysis measured, seed by seed (normtrain/study/verdicts.py); ``result.json`` is built by
normtrain/reproduce/records.py. The README states, in the order of normtrain/reproduce/layout.py, the claim in
one line; the verdict with the check that decided it, our headline number and the first figure, then the secondary
results beside it, a rerun that moved a checked number, and at ``--scale gpu`` whether the CPU result agrees; the
results with every run's labels; the claim's detail; what ran (the learning rates, how often the runs were
evaluated, at ``--scale gpu`` the plan and what it assumed); and the registration (which checks are primary,
secondary or preconditions under v4, and which are our own hypotheses). Three hand-written files of the
experiment's folder are woven in: ``CHECK_HISTORY.md`` (every change to a check made after results were seen, with
its reason), ``DISCUSSION.md`` (why each failed check failed: ``## <check id>`` sections; a failed check without
one says so) and nothing else. ``experiments/README.md``'s table is rebuilt by normtrain/reproduce/index.py.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from normtrain.reproduce import layout, marks, quick, records
from normtrain.reproduce.runner import Experiment, Findings
from normtrain.study import plots, stats
from normtrain.study.claim import details_text, verdict_words
from normtrain.study.plan import SEED_AXIS, STEPS_AXIS, Plan
from normtrain.study.preregistration import Registration
from normtrain.study.verdicts import CheckResult, Judgement, decide, protocol_text
from normtrain.training.outcome import EVAL_FRACTION, LINE_BAND, PLATEAU_SPAN, STILL_FALLING
from normtrain.util import atomic, markdown
from normtrain.util.atomic import write_json
from normtrain.util.numbers import number

MARK = {True: "yes", False: "**no**", None: "n/a"}
HISTORY, DISCUSSION = "CHECK_HISTORY.md", "DISCUSSION.md"
REPORT = "report.html"
COMMITTED_MAX = 2 << 20  # bytes: the report is thinned to fit; one still larger is kept out of git (a .gitignore)
LABEL_TEXT = {"before_runs": "registered before any run of this experiment",
              "after_pilot": "registered **after a pilot** (earlier runs whose numbers were seen; see below)"}
NOT_TRAINED = ("No training: the models are measured at initialization, so no learning rate enters (best against "
               "best, each arm at its own best learning rate, is for trained models).")
ROLE_TEXT = {"primary": "primary (decides)", "secondary": "secondary (reported)", "precondition": "precondition",
             "check": "check (v3)"}


markdown_table = markdown.value_table  # the experiments' tables (its old name here)


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """One column per key any row has, in first-seen order; a key a row lacks is an empty cell."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    atomic.write_csv(path, keys, [[row.get(k) for k in keys] for row in rows])


def environment(device: str) -> str:
    import torch

    return f"{device}; torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}"


def write(exp: Experiment, plan: Plan, rows: list[dict[str, Any]], findings: Findings, *, timing: dict[str, Any],
          device: str, declared: dict[str, Any], code: dict[str, Any], started_at: str) -> Path:
    """Write the folder ``plan.out`` and return its README."""
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    judged = decide(exp.registration, findings.measured, findings.unit, plan.scale,
                    [int(s) for s in plan.grid.get(SEED_AXIS, ["0"])])
    judged = quick.unjudged(judged) if plan.quick is not None else judged
    with plots.marked(marks.figure_mark(plan)):
        figures = draw_figures(out, findings.figures)
    write_csv(rows, out / "runs.csv")
    for filename, table in findings.csv.items():
        write_csv(table, out / filename)
    report = interactive_report(exp, plan, out / REPORT)
    before = records.previous(out / "result.json")
    result = records.result_record(exp, plan, rows, findings, judged, timing=timing, device=device,
                                   declared=declared, code=code, started_at=started_at)
    result["rerun"] = records.rerun(before, result)
    if plan.quick is not None:
        result["quick"] = quick.record(result, plan.quick, quick.committed_folder(exp.name) / "result.json")
    write_json(out / "result.json", result)
    path = out / "README.md"
    atomic.write_text(path, readme(exp, plan, findings, judged, result, figures, report))
    return path


def draw_figures(out: Path, figures: dict[str, Callable[[Path], None]]) -> list[str]:
    """Draw this result's figures into ``out`` and delete any other ``.png`` there: the folder is the command's
    output, so a figure an earlier design drew and this one does not would sit beside the README unlinked and
    describe runs that are no longer the result."""
    for stale in sorted(set(p.name for p in out.glob("*.png")) - set(figures)):
        (out / stale).unlink()
    for filename, draw in figures.items():
        draw(out / filename)
    return list(figures)


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
                           title=marks.title(plan, f"{exp.title}: every run"), max_bytes=COMMITTED_MAX,
                           root=plan.runs_dir)  # a committed page names no machine's paths
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


def readme(exp: Experiment, plan: Plan, findings: Findings, judged: Judgement, result: dict[str, Any],
           figures: list[str], report: str) -> str:
    """The sections, in the order of normtrain/reproduce/layout.py: the verdict, our number and the first figure
    on the first screen; the registration after the results."""
    reg = exp.registration
    return layout.arrange([
        f"# {marks.title(plan, exp.title)}",
        f"*Generated by `{plan.command}`: do not edit by hand; rerun the command.*",
        marks.banner(plan),
        layout.claim_line(reg.claim),
    ], {
        "verdict": verdict_section(judged, result, findings, folder_text(plan, exp, DISCUSSION), figures[:1]),
        "quick": quick.readme_section(result["quick"], plan.quick) if plan.quick is not None else "",
        "results": results_section(findings, result, figures[1:], report),
        "claim": f"## The claim\n\n{exp.reference}\n\n{reg.detail}\n\nThe paper's number: {reg.paper_number}",
        "method": method_section(exp, plan, result),
        "registration": registration_section(reg, judged, result),
        "history": "## Check history\n\n" + (folder_text(plan, exp, HISTORY)
                                             or "No check has been changed after results were seen."),
    })


def registration_section(reg: Registration, judged: Judgement, result: dict[str, Any]) -> str:
    parts = ["## Registration", f"**Label: `{reg.label}`**: {LABEL_TEXT[reg.label]}.",
             declaration_text(result["provenance"]["declaration"]), code_text(result["provenance"])]
    if reg.pilot:
        p = reg.pilot
        seeds = f" (seeds {', '.join(map(str, p.seeds))})" if p.seeds else ""
        parts.append(f"**The pilot{seeds}.** Runs: {p.runs}\n\nWhat it measured: {p.numbers}\n\nWhat changed "
                     f"after it: {p.changed}")
        if result.get("pilot_seeds_rerun"):
            parts.append(f"**The pilot's seeds were run again** ({', '.join(map(str, result['pilot_seeds_rerun']))}):"
                         " their outcome was known, so they are no new evidence.")
    parts.append(protocol_text(judged.protocol))
    rules = [*judged.checks, *([judged.guard] if judged.guard else [])]
    parts.append("Declared checks (the rule, and the basis of each threshold or band):\n\n" + markdown_table(
        ["check", "role", "expectation", "rule", "basis"],
        [[c.rule.id, ROLE_TEXT[c.role] if c is not judged.guard else "precondition (trainability guard)",
          c.rule.expectation + (" *(ours, not the paper's)*" if c.rule.source == "ours" else ""),
          c.rule.condition_text(c.unit), c.rule.basis or "–"] for c in rules]))
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
    parts = [f"## What we ran\n\n{exp.method}\n\nNorm: {reg.norm}. Metric: {reg.metric}",
             f"Every run uses `configs/experiment/{exp.name}.yaml`{extra}; the grid ({result['runs']} runs"
             f"{': each point at T and at T/2' if exp.half_budget else ''}, seeds "
             f"{', '.join(map(str, result['seeds']))}):\n\n{grid}" + (
                 f"\n\n--quick ran {plan.quick.text()}: of the lr axis above, only these:\n\n{plan.quick.table()}"
                 if plan.quick is not None and plan.quick.choices else ""),
             schedule_text(exp.runs_plan(plan)) if result.get("unigram_val_loss") is not None else NOT_TRAINED,
             f"Device: {environment(result['device'])}. Wall time: {minutes:.1f} min for this invocation with "
             f"{result.get('jobs', 1)} job(s) at a time{reuse}; the runs' own times sum to "
             f"{(result.get('run_time_s') or 0) / 60:.1f} min. {execution_text(result.get('execution'))}"]
    if plan.budget is not None:
        parts.append(gpu_text(plan, result))
    return "\n\n".join(parts)


def schedule_text(plan: Plan) -> str:
    """The learning rates (an architecture comparison at one lr compares points of two lr curves, not the
    architectures) and how often the runs were evaluated (the labels need about every 5%), per run length where
    the run length is a grid axis."""
    combos = plan.combos()
    cfgs = [plan.compose(c) for c in {c.get(STEPS_AXIS): c for c in combos}.values()]  # one per run length
    lrs = plan.grid.get("optim.lr")
    lr = (f"Learning rates: {', '.join(lrs)} (a grid axis)." if lrs and len(lrs) > 1 else
          f"One learning rate, {cfgs[0].optim.lr:g}: each arm is compared at it, not at its own best.")
    trained = [cfg.train for cfg in cfgs if cfg.train.max_steps > 1]
    if not trained:
        return lr
    every = "; ".join("only at the end" if not t.eval_every else
                      f"every {t.eval_every} of {t.max_steps} steps ({t.eval_every / t.max_steps:.0%} of the run)"
                      for t in trained)
    coarse = ("" if all(t.eval_every and t.eval_every <= EVAL_FRACTION * t.max_steps + 1e-9 for t in trained) else
              f"; the labels need about every {EVAL_FRACTION:.0%}, so a run's *undertrained* may be unknown and a "
              "plateau's end coarse")
    return f"{lr} Validation loss evaluated {every}{coarse}."


def execution_text(record: dict[str, Any] | None) -> str:
    if not record:
        return ""
    threads = ", ".join(f"{k} ({v} runs)" for k, v in record["threads"].items())
    determ = ", ".join(f"{k} ({v})" for k, v in record["deterministic"].items())
    return f"torch threads per run: {threads}; deterministic algorithms: {determ}."


def gpu_text(plan: Plan, result: dict[str, Any]) -> str:
    """The GPU plan, its assumptions, and what the runs measured beside them."""
    b = plan.budget
    measured = b.measured or {}
    seen = (f" Measured in the last invocation: {measured.get('runs')} runs, median "
            f"{measured.get('median_run_tokens_per_s')} tokens/s per run over its whole wall time, "
            f"{measured.get('packed_tokens_per_s')} tokens/s packed, {(measured.get('elapsed_s') or 0) / 60:.1f} min "
            f"elapsed against {b.estimate_s / 60:.1f} min estimated." if measured else "")
    return (f"### The GPU plan\n\n{b.text()}{seen} Invocations so far: {len(b.invocations)} (`plan.json`). The "
            "CPU result stays the committed baseline; a GPU verdict that disagrees with it is reported under the "
            "verdict.")


def results_section(findings: Findings, result: dict[str, Any], figures: list[str], report: str) -> str:
    unigram = result["unigram_val_loss"]
    baseline = (f"Unigram baseline: **{number(unigram)} nats**: the cross-entropy of the train split's byte "
                f"frequencies on the same validation windows. Labels (normtrain/training/outcome.py), on the loss "
                f"each run is judged by: *collapsed*: it ends within {LINE_BAND:g} nats of the line and its "
                f"validation loss moved by at most {STILL_FALLING:g} nats over the last quarter; *above the line*: it "
                f"ends more than {LINE_BAND:g} above it; *plateaued*: it sat on the line for at least "
                f"{PLATEAU_SPAN:.0%} of the run, then went below (runs.csv: `left_line_at_step`); *undertrained*: its "
                f"validation loss still fell by more than {STILL_FALLING:g} nats over the last quarter (unknown where "
                "the run was not evaluated there)."
                if unigram is not None else "")
    cells = result.get("cells")
    totals = ""
    if cells:
        t = {k: sum(c.get(k, 0) for c in cells) for k in ("n", "diverged", *stats.LABELS)}
        totals = (f"Of {t['n']} runs, {t['diverged']} diverged, {t['collapsed']} collapsed, {t['above_line']} ended "
                  f"above the line, {t['plateaued']} plateaued and {t['undertrained']} were still falling (per cell: "
                  "the tables, and `cells` in result.json).")
    data_files = ", ".join(f"[`{f}`]({f})" for f in ["runs.csv", *findings.csv])
    pictures = "\n\n".join(f"![{f}]({f})" for f in figures)
    return "\n\n".join(["## Results", findings.table, baseline, totals, pictures, f"Per-run numbers: {data_files}.",
                        report])


def verdict_section(judged: Judgement, result: dict[str, Any], findings: Findings, discussion: str,
                    figures: list[str] = ()) -> str:
    """The verdict, why, our headline number and ``figures`` (the first), then each check and what explains it."""
    parts = layout.verdict_head(f"## Verdict: {verdict_words(result)}", f"Why: {judged.why}.", findings.key, figures)
    header = ["check", "measured here (median, its interval or range over seeds or repeats; how many pass)", "holds"]
    if judged.protocol >= 4:
        primary = judged.role("primary")[0]
        parts.append(f"**Primary (the paper's claim{', ours' if primary.rule.source == 'ours' else ''}).** "
                     f"`{primary.rule.id}`: {primary.rule.expectation}. Measured: {primary.measured()}. Holds: "
                     f"{MARK[primary.ok]}.")
        pre = [*([judged.guard] if judged.guard else []), *judged.role("precondition")]
        if pre:
            parts.append("Preconditions (each must hold for the comparison to mean anything):\n\n"
                         + check_table(header, pre))
        if sec := judged.role("secondary"):
            parts.append("Secondary checks, reported beside the verdict (they do not change it):\n\n"
                         + check_table(header, sec))
    else:
        if judged.guard is not None:
            parts.append(f"Trainability guard: {MARK[judged.guard.ok]} ({judged.guard.measured()}).")
        parts.append(check_table(header, judged.checks))
    if judged.v5:
        parts.append(details_text(judged.v5))
    parts += [*(["Notes:\n\n" + "".join(f"- {n}\n" for n in findings.notes)] if findings.notes else []),
              rerun_text(result.get("rerun")), agreement_text(result), failures(judged, discussion)]
    return "\n\n".join(p for p in parts if p)


def check_table(header: list[str], checks: list[CheckResult]) -> str:
    return markdown_table(header, [[c.rule.id + (" *(ours)*" if c.rule.source == "ours" else ""), c.measured(),
                                    MARK[c.ok]] for c in checks])


def rerun_text(record: dict[str, Any] | None) -> str:
    """A rerun of the same configuration that moved a checked value is a finding: say so, with its size."""
    if not record or not record["compared"]:
        return ""
    if not record["moved"]:
        return (f"**Rerun.** The folder held an earlier result of this configuration; all {record['compared']} "
                "checked per-seed values are the same.")
    sizes = "; ".join(f"`{cid}` by {number(m['delta'])} ({m['condition'] or 'its one condition'}, seed {m['seed']}: "
                      f"{number(m['before'])} → {number(m['after'])})" for cid, m in record["largest"].items())
    return (f"**Rerun finding.** Against an earlier result of the same configuration (same declaration, grid and "
            f"overrides) {record['moved']} of {record['compared']} checked per-seed values moved; the largest move "
            f"per check: {sizes}. Earlier runs' commits: {record['before']['run_commits']}; their execution: "
            f"{record['before']['execution'] or 'not recorded'}.")


def agreement_text(result: dict[str, Any]) -> str:
    if result.get("scale") != "gpu" or result.get("cpu_verdict") is None:
        return ""
    if result["agrees_with_cpu"]:
        return f"The committed CPU result's verdict is the same: {result['cpu_verdict']}."
    return (f"**This GPU result disagrees with the committed CPU result**, whose verdict is *{result['cpu_verdict']}*"
            f" (this one: *{result['verdict']}*). The CPU result stays the baseline; the disagreement is a finding.")


def failures(judged: Judgement, discussion: str) -> str:
    """Why each failed check failed (DISCUSSION.md), and what the checks do not show."""
    judged_ids = {c.rule.id for c in [*judged.checks, *([judged.guard] if judged.guard else [])]}
    failed = [c.rule.id for c in [*judged.checks, *([judged.guard] if judged.guard else [])] if c.ok is False]
    sections = explanations(discussion)
    parts = []
    if failed:
        parts.append("### Why checks failed\n\n" + "\n\n".join(
            f"**{cid}.** " + sections.get(cid, "*Not yet explained: no section in DISCUSSION.md.*") for cid in failed))
    if others := [(title, text) for title, text in sections.items() if title not in judged_ids]:
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
    registered = record.get("registered")
    if not record.get("before_runs") and registered:
        changed = record.get("changed") or []
        changes = ", ".join(f"`{c['commit'][:10]}` of {c['committed_at']}" for c in changed)
        return (f"**Registered before the runs, changed after they began**: declared in {files} at commit "
                f"`{registered['commit'][:10]}` of {registered['committed_at']}, before the first run of this "
                f"result started ({record['first_run_at']}); changed since by commit{'s' * (len(changed) > 1)} "
                f"{changes}. Each change made after the runs began, and why, is in the check history below; the "
                f"declaration's digest now `{record['digest']}`.")
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
