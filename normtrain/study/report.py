"""What a study of arms writes (normtrain-ablate, normtrain-compare --tune): ``ablation.json`` (everything the decision
rests on), ``verdict.md`` (the sentence a user quotes, then the table and every check) and the best-against-best
figures.

Figures (PNG, every seed drawn):
  lr_curves.png ....... the judged loss against the tuned value, per arm, each best ringed
  differences.png ..... the paired differences against the baseline, seed by seed, at T/2 and T, with the
                        decision's interval and the ±margin band
  curves_at_best.png .. each arm's validation curves at its best value, with the unigram line
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from normtrain.study import best_lr, plots, stats
from normtrain.study.best_against_best import Analysis, Budget, falls, judged_at, judged_or_inf
from normtrain.study.decision import BETTER, EQUIVALENT, WORSE, Decision
from normtrain.study.question import Question as Spec
from normtrain.util import markdown
from normtrain.util.atomic import write_json, write_text
from normtrain.util.numbers import number

ABLATION_JSON, VERDICT_MD = "ablation.json", "verdict.md"
FIGURES = ("lr_curves.png", "differences.png", "curves_at_best.png")
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def colors(spec: Spec) -> dict[str, str]:
    named = {**plots.NORM_COLORS, **plots.PLACEMENT_COLORS}
    return {a: named.get(a, PALETTE[i % len(PALETTE)]) for i, a in enumerate(spec.arms)}


def sentence(spec: Spec, d: Decision) -> str:
    """The one line a user quotes."""
    key = spec.arm_key
    head = f"{key}={d.arm} against {key}={d.baseline}, each at its own best {spec.tune}"
    p = d.at_best
    if d.decision in (BETTER, WORSE, EQUIVALENT) and p is not None:
        what = {BETTER: "better", WORSE: "worse", EQUIVALENT: f"equivalent within ±{spec.margin:g} nats"}[d.decision]
        return (f"**{what}**: {head}: {p.mean:+.4f} nats/token (the {spec.protocol.level:.0%} interval of the "
                f"paired difference {p.low:+.4f} to {p.high:+.4f}, n={p.n} seeds, {spec.steps} steps; lower is "
                "better)")
    return f"**{d.decision}**: {head}: {d.why}"


def table(spec: Spec, a: Analysis) -> str:
    """Arm | best value at T (and T/2) | judged loss there | difference against the baseline | decision."""
    head = [spec.arm_key, f"best {spec.tune} (T={spec.steps})", "judged loss at best", "vs baseline at T",
            f"vs baseline at T/2={spec.half_steps}", "last quarter's fall", "decision"]
    body = []
    for arm in spec.arms:
        c = a.full.choices[arm]
        h = a.half.choices[arm] if a.half else None
        judged = judged_at(a.full.rows, arm, c.best, spec.tune, spec.arm_key)
        d = a.decisions.get(arm)
        best = "–" if c.best is None else f"{c.best:g}" + (" (edge)" if c.at_edge else "")
        if h is not None and h.best is not None:
            best += f" ({h.best:g} at T/2)"
        vs_t = "baseline" if d is None else paired_text(d.at_best)
        vs_h = "baseline" if d is None else half_text(d.budget)
        fall = falls(a.full.rows, arm, spec.arm_key, c.best, spec.tune)
        body.append([arm, best, best_lr.range_text(list(judged.values())), vs_t, vs_h,
                     "–" if fall is None else f"{fall:.3f}", "baseline" if d is None else d.decision])
    return markdown.table(head, body)


def paired_text(p) -> str:
    """A Paired as a table cell: the mean and the decision's interval (n)."""
    if p is None:
        return "–"
    if p.mean is None:
        return f"– (n={p.n})"
    if p.low is None:
        return f"{p.mean:+.4f} (n={p.n}, no interval)"
    return f"{p.mean:+.4f} [{p.low:+.4f}, {p.high:+.4f}] (n={p.n})"


def half_text(b) -> str:
    """The T/2 comparison as a table cell, from the budget check: the mean and its decision."""
    if b is None or b.mean_half is None:
        return "–"
    return f"{b.mean_half:+.4f} ({b.decision_half})"


def checks_text(d: Decision) -> list[str]:
    c = d.checks
    lines = []
    t = c.get("trained", {})
    lines.append(f"- trained: the baseline ends {number(t.get('margin_below_unigram'))} nats below the unigram line "
                 f"(needed: {t.get('needed')}) — {_ok(t.get('ok'))}")
    e = c.get("best_inside_grid", {})
    lines.append("- best inside its grid: " + ("every best is inside — holds" if e.get("ok") else
                                               f"at an edge: {', '.join(e.get('at_edge', []))} — fails"))
    if "interval" in c:
        i = c["interval"]
        lines.append(f"- interval: {i['level']:.0%} t interval of the mean paired difference "
                     f"{number(i['low'])} to {number(i['high'])} (n={i['n']}): {i['decision']}")
    if "selection" in c:
        s = c["selection"]
        pairs = "; ".join(f"{va:g} vs {vb:g}: {dec}" for va, vb, dec in s["pairings"])
        lines.append(f"- selection robustness (every near-tied pairing decides alike): {pairs} — {_ok(s['ok'])}")
    if "budget" in c:
        b = c["budget"]
        lines.append(f"- budget stability: {b['why']} — {_ok(b['ok'])}")
    return lines


def _ok(ok: bool | None) -> str:
    return {True: "holds", False: "fails", None: "not measured"}[ok]


def write_verdict(out: Path, spec: Spec, a: Analysis, grids: dict[str, Any], record: dict[str, Any], command: str,
                  how: list[str] | None = None) -> Path:
    """verdict.md; ``how`` replaces the lines on how the runs were made (a sweep the user ran, not an ablation)."""
    lines = [f"# normtrain-ablate: {spec.arm_key} = {', '.join(spec.arms)}", ""]
    lines += [sentence(spec, d) + "." for d in a.decisions.values()]
    lines += ["", table(spec, a), "", "Lower is better; differences are arm − baseline in nats/token, paired by seed "
              "(seed s of each arm at its own best), with the decision's interval in brackets.", ""]
    for d in a.decisions.values():
        lines += [f"## {d.arm} against {d.baseline}: {d.decision}", "", d.why + ".", "", *checks_text(d), ""]
    lines += [f"## {spec.tune} against the judged loss at T={spec.steps}", "",
              best_lr.curve_table(a.full.rows, spec.arm_key, a.full.best, judged_or_inf), ""]
    ext = [f"{arm} +{n}" for arm, n in grids.get("extensions", {}).items() if n]
    lines += ["## How this was decided", "", *(how if how is not None else made_by_ablate(spec, ext)),
              (f"- Best value: the lowest median over seeds of the loss on {spec.select_windows} held-out windows "
               "between the judged ones, at the run's end (never the judged loss)." if spec.select_windows else
               "- Best value: the lowest median over seeds of each run's selection loss (see the notes)."),
              f"- Error rates: {spec.protocol.error_rates()}.",
              "- The rules: normtrain/study/decision.py (README, \"Is X better than Y?\").",
              f"- Code: training code {', '.join(record['provenance']['training_code_digests'])}; engine "
              f"{record['provenance']['engine_digest']}; commits {', '.join(record['provenance']['code_commits'])}"
              + (f"; {record['provenance']['dirty_runs']} runs from uncommitted code (--allow-dirty)"
                 if record['provenance']['dirty_runs'] else "") + ".",
              *(f"- Note: {n}" for n in a.notes),
              f"- Again (finished runs are reused): `{command}`", ""]
    path = out / VERDICT_MD
    write_text(path, "\n".join(lines))
    return path


def made_by_ablate(spec: Spec, ext: list[str]) -> list[str]:
    return [f"- Arms: {spec.arm_key} = {', '.join(spec.arms)}; baseline {spec.baseline}; shared overrides: "
            f"{' '.join(spec.shared) or '(none)'}.",
            f"- Each arm trained at {spec.tune} = {', '.join(f'{v:g}' for v in spec.grid)}"
            + (f", extended at an edge ({', '.join(ext)}; at most {spec.max_extensions} per arm)" if ext else
               f" (an edge best would add a point, at most {spec.max_extensions} per arm)")
            + f", seeds {', '.join(map(str, spec.seeds))}, {spec.steps} steps; and at {spec.half_steps} steps "
            + ("as decay branches off each run's stable phase (optim.schedule=wsd, branch at step "
               f"{spec.branch_step})." if spec.branch else "as complete runs.")]


def record(spec: Spec, a: Analysis, grids: dict[str, Any], rows: list[dict[str, Any]], provenance: dict[str, Any],
           command: str, wall_s: float) -> dict[str, Any]:
    return {"format": 1, "command": command, "spec": spec.as_dict(), "grids": grids,
            "decisions": {arm: {"decision": d.decision, "why": d.why, "sentence": sentence(spec, d)}
                          for arm, d in a.decisions.items()},
            "analysis": a.as_dict(), "provenance": provenance, "wall_time_s": round(wall_s, 3),
            "runs": [{k: v for k, v in r.items() if k != "val_curve"} for r in rows]}


def write_record(out: Path, rec: dict[str, Any]) -> Path:
    write_json(out / ABLATION_JSON, rec)
    return out / ABLATION_JSON


def draw(out: Path, spec: Spec, a: Analysis) -> list[Path]:
    col = colors(spec)
    written = []
    fig, (ax,) = plots.figure(width=5.6, height=3.8)
    best_lr.draw_curves(ax, a.full.rows, spec.arm_key, a.full.best, col, judged_or_inf, a.unigram)
    plots.save(fig, out / FIGURES[0])
    written.append(out / FIGURES[0])
    fig, (ax,) = plots.figure(width=5.6, height=3.8)
    draw_differences(ax, spec, a, col)
    plots.save(fig, out / FIGURES[1])
    written.append(out / FIGURES[1])
    fig, (ax,) = plots.figure(width=5.6, height=3.8)
    best_lr.draw_val_at_best(ax, a.full.rows, spec.arm_key, a.full.best, col, a.unigram,
                             f"validation loss, each {spec.arm_key} at its best {spec.tune}")
    plots.save(fig, out / FIGURES[2])
    written.append(out / FIGURES[2])
    return written


def draw_differences(ax, spec: Spec, a: Analysis, col: dict[str, str]) -> None:
    """Seed by seed arm − baseline at T/2 and T (points), the mean and the decision's interval (bars)."""
    budgets: list[Budget] = [b for b in (a.half, a.full) if b is not None]
    arms = [arm for arm in spec.arms if arm != spec.baseline]
    width = 0.8 / max(1, len(arms))
    for j, arm in enumerate(arms):
        for i, b in enumerate(budgets):
            ca, cb = b.choices[arm], b.choices[spec.baseline]
            d = stats.paired(judged_at(b.rows, arm, ca.best, spec.tune, spec.arm_key),
                             judged_at(b.rows, spec.baseline, cb.best, spec.tune, spec.arm_key), stats.difference)
            vals = [v for v in d.values() if v is not None and math.isfinite(v)]
            x = i + (j - (len(arms) - 1) / 2) * width
            ax.scatter([x] * len(vals), vals, color=col[arm], s=14, alpha=0.6,
                       label=f"{arm} − {spec.baseline}" if i == len(budgets) - 1 else None)
            if len(vals) >= 2:
                from normtrain.study.significance import t_half_width

                m, half = statistics.fmean(vals), t_half_width(vals, spec.alpha)
                ax.errorbar([x + width * 0.25], [m], yerr=[[half], [half]], fmt="o", color=col[arm], capsize=4)
    ax.axhline(0, color="k", lw=0.8)
    ax.axhspan(-spec.margin, spec.margin, color="0.85", alpha=0.6, label=f"±{spec.margin:g} (equivalent)")
    ax.set_xticks(range(len(budgets)), [f"{b.steps} steps" for b in budgets])
    plots.finish(ax, f"arm − {spec.baseline}, each at its best ({spec.protocol.level:.0%} interval)", "budget",
                 "Δ final val loss (nats/token)")


def section_html(spec: Spec, a: Analysis, out: Path) -> str:
    """The report page's best-against-best section: the decisions in words, the table, the three figures (inlined,
    so the page stays one file)."""
    import base64
    import html

    e = html.escape
    said = "".join(f"<p>{_bold(e(sentence(spec, d)))}.</p>" for d in a.decisions.values())
    rows = [line.strip("|").split("|") for line in table(spec, a).splitlines() if not line.startswith("|---")]
    head, body = rows[0], rows[1:]
    grid = ("<table><thead><tr>" + "".join(f"<th>{e(c.strip())}</th>" for c in head) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(f"<td>{e(c.strip())}</td>" for c in r) + "</tr>" for r in body)
            + "</tbody></table>")
    images = "".join(f'<img alt="{e(name)}" style="max-width:32%;margin-right:1%" src="data:image/png;base64,'
                     f'{base64.b64encode((out / name).read_bytes()).decode()}">' for name in FIGURES
                     if (out / name).is_file())
    return (f"<h2>Best against best: {e(spec.arm_key)} = {e(', '.join(spec.arms))}</h2>{said}{grid}"
            f"<p>{images}</p><p>Every run of the ablation follows (T runs and their T/2 branches); verdict.md and "
            "ablation.json beside this page hold every check.</p>")


def _bold(text: str) -> str:
    import re

    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
