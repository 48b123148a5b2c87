"""The report page: one HTML file with the table, the notes and the interactive figures, and nothing outside it.

Layout: the summary in words (normtrain.compare.findings: which runs failed, and why in their own numbers), a
list of the page's sections, the sortable table (only the config keys that vary, every row marked by its group's
colour, diverged and collapsed runs highlighted), the notes, then the loss, the by-block profiles (the evidence the
summary cites, before the maps), the per-layer maps, a line chart per other logged value and, for runs with a
probe/ folder, the probe's figures. The data
(``<script type="application/json">``), Vega (gzipped, see vega.py) and the page's own script are inlined; the
PNGs beside the page are linked for papers.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from normtrain.compare import findings, report, specs, vega
from normtrain.compare.figdata import seed_list
from normtrain.compare.groups import Group, outcome
from normtrain.compare.runs import Run
from normtrain.util.atomic import write_text
from normtrain.util.numbers import number

STATIC = Path(__file__).parent / "static"
OUTCOMES = {  # summary flags shown as badges (normtrain/training/outcome.py has the rules)
    "collapsed": "flat on the unigram line: learned token frequencies only",
    "above_line": "ended above the unigram line, for whatever reason",
    "plateaued": "sat on the unigram line for a while, then left it (summary: left_line_at_step)",
    "undertrained": "validation loss still falling over the last quarter of the run: too short, not broken",
}
ON_LINE = "on the unigram line"  # normtrain.compare.groups.outcome's words for such a run
ON_LINE_TITLE = ("ended within the unigram line's band without the collapsed label: too few evaluations to tell "
                 "whether it had stopped falling (normtrain/data/unigram.py's rule)")
SEEDS_NOTE = ("Runs that differ only in their seed form a group: its line is the mean over the seeds, its band "
              "their min–max (or ± 1 sample sd over the seeds, n − 1), and 'each seed' draws every run.")


@dataclass
class Page:
    """What the page shows, besides the runs themselves."""

    title: str
    sorted_by: str
    sources: Sequence[str] = ()
    notes: Sequence[str] = ()
    pngs: Sequence[str] = ()  # file names beside the page
    figures: list[specs.Figure] = field(default_factory=list)
    data: dict[str, list] = field(default_factory=dict)
    points: int | None = None  # each series thinned to at most this many of each run's logged steps
    budget: int | None = None  # the size in bytes the page was thinned to stay under
    root: Path | None = None  # run folders below it are named from its name on (``report.shown_path``)
    section: str = ""  # trusted HTML before the table: normtrain-ablate's best-against-best section


def _shown(col: report.Column, runs: Sequence[Run]) -> bool:
    """Columns with a value somewhere; ``collapsed`` and ``undertrained`` are badges in the status column instead."""
    return col.key == "label" or (col.key not in OUTCOMES and any(col.value(r) is not None for r in runs))


def _status(run: Run) -> str:
    e = html.escape
    badges = ""
    if run.status in ("diverged", "failed"):
        at = f" at {run.diverged_at}" if run.diverged_at is not None else ""
        badges += f'<span class="badge {e(run.status)}">{e(run.status)}{at}</span>'
    for flag in _outcomes(run):
        badges += f'<span class="badge {flag}" title="{e(OUTCOMES[flag])}">{flag}</span>'
    if not badges and outcome(run) == ON_LINE:  # on the line, yet too few evaluations to be labelled collapsed
        badges = f'<span class="badge on_line" title="{e(ON_LINE_TITLE)}">on the line</span>'
    return badges or e(run.status)


def _outcomes(run: Run) -> list[str]:
    return [flag for flag in OUTCOMES if run.summary.get(flag) is True]


def table_html(runs: Sequence[Run], cols: Sequence[report.Column], root: Path | None = None) -> str:
    """The runs as a sortable table: a column per config key that varies and per result any run has."""
    e = html.escape
    cols = [c for c in cols if _shown(c, runs)]
    head = "".join(f'<th title="{e(c.key)}">{e(c.title)}</th>' for c in cols)
    rows = []
    for run in runs:
        cells = []
        for c in cols:
            v = c.value(run)
            sort = "" if v is None else f' data-v="{e(str(v))}"'
            if c.key == "label":
                cells.append(f'<td{sort}><span class="swatch" style="background:{e(run.color or "#999")}"></span>'
                             f"{e(report.cell(v, c.decimals))}</td>")
            elif c.key == "status":
                cells.append(f"<td{sort}>{_status(run)}</td>")
            else:
                num = ' class="num"' if report.is_number(v) else ""
                cells.append(f"<td{num}{sort}>{e(report.cell(v, c.decimals))}</td>")
        kind = " ".join([run.status, *_outcomes(run)])
        rows.append(f'<tr class="{e(kind)}" title="{e(report.shown_path(run.path, root))}">{"".join(cells)}</tr>')
    return (f'<div class="table-wrap"><table class="runs sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _figure(fig: specs.Figure) -> str:
    e = html.escape
    checked = " checked" if fig.log else ""
    scale = "colour" if fig.scale == "color" else "y"
    switch = f'<label><input type="checkbox" class="log"{checked}> log {scale} scale</label> · ' if fig.switch else ""
    return (f'<figure class="figure" id="{e(fig.id)}" data-state="waiting"><h3>{e(fig.title)}</h3>'
            f'<div class="tools">{switch}{e(fig.hint)}</div>'
            f'<div class="chart"></div><figcaption>{e(fig.caption)}</figcaption></figure>')


def probed_runs(groups: Sequence[Group], total: int) -> str:
    """Which runs the probe's figures show, in the groups' order: each with its group's swatch, its seed, the step
    its checkpoint is from and the full model's eval loss (the figures show no others)."""
    e = html.escape
    items = []
    for run in (r for g in groups for r in g.runs if r.probe):
        step, loss = run.probe.get("step"), run.probe.get("val_loss")
        facts = [f"seed {e(seed_list([run]))}", *([f"step {step}"] if isinstance(step, int) else []),
                 *([f"eval loss {number(loss, 4)}"] if isinstance(loss, (int, float)) else [])]
        items.append(f'<li><span class="swatch" style="background:{e(run.color or "#999")}"></span>{e(run.label)} '
                     f'<small>({", ".join(facts)})</small></li>')
    return f'<p class="lead">Probed runs ({len(items)} of {total}):</p><ul class="probed">{"".join(items)}</ul>'


def sections(figures: Sequence[specs.Figure], groups: Sequence[Group] = (),
             total: int = 0) -> list[tuple[str, str, str]]:
    """The page's figure sections, in order, as (anchor, heading, HTML): the loss, then the by-block profiles (the
    evidence the summary cites) before the ten or so block × step maps."""
    probes = [f for f in figures if f.id.startswith("fig-probe-")]
    maps = [f for f in figures if f.id.endswith("-map")]
    profiles = [f for f in figures if f.id.endswith("-profile")]
    heads = [f for f in figures if f.id.endswith("-heads")]
    rest = [f for f in figures if f not in maps + profiles + heads + probes and f.id != "fig-loss"]
    loss = [f for f in figures if f.id == "fig-loss"]
    parts = []
    for anchor, heading, group, grid, lead in (
            ("loss", "Loss", loss, False, ""),
            ("profiles", "Per-layer diagnostics by block", profiles, True, ""),
            ("maps", "Per-layer diagnostics by block and step", maps, False, ""),
            ("heads", "Per-head diagnostics by block and head", heads, False, ""),
            ("other", "Other logged values", rest, True, ""),
            ("probe", "The trained models, probed (normtrain-probe)", probes, False,
             probes and probed_runs(groups, total))):
        if group:
            body = "".join(map(_figure, group))
            parts.append((anchor, heading, f'<h2 id="{anchor}">{html.escape(heading)}</h2>{lead}'
                          + (f'<div class="grid">{body}</div>' if grid else body)))
    return parts


def summary_html(groups: Sequence[Group], figures: Sequence[specs.Figure]) -> str:
    """The summary's sentences, each linked to the figure that shows its numbers (where the page has it)."""
    titles = {f.id: f.title for f in figures}  # each link named for the figure it opens
    items = [f"<li>{html.escape(f.text)}" + (f' <a href="#{f.figure}">(see: {html.escape(titles[f.figure])})</a>'
                                            if f.figure in titles else "") + "</li>" for f in findings.summary(groups)]
    if not items:
        return ""
    return f'<section id="summary"><h2>Summary</h2><ul class="findings">{"".join(items)}</ul></section>'


def contents(parts: Sequence[tuple[str, str, str]], notes: bool, pngs: bool) -> str:
    """A line of links to the page's sections."""
    links = [("runs", "the runs"), *([("notes", "notes")] if notes else []),
             *((anchor, heading) for anchor, heading, _ in parts), *([("pngs", "figures for papers")] if pngs else [])]
    items = " · ".join(f'<a href="#{a}">{html.escape(h[0].lower() + h[1:])}</a>' for a, h in links)
    return f'<nav class="contents">On this page: {items}</nav>'


def thinned(page: Page) -> str:
    """The line near the top saying that, and how far, the series were thinned; none when they were not."""
    if page.points is None:
        return ""
    budget = f", for this page's size budget of {page.budget / 2**20:.3g} MiB" if page.budget else ""
    return (f'<p class="lead">Every series (per-layer maps and line charts alike) is thinned to at most {page.points} '
            f"of each run's logged steps{budget}: evenly spread, the first and the last kept, and every step where a "
            "run diverged or rolled back. The run folders hold every step.</p>")


def where(sources: Sequence[str]) -> str:
    """Where the runs came from, for the page's first line: many run folders (a reproduction passes each of
    its runs) are named by the folder that holds them."""
    if len(sources) > 3:
        try:
            return f"{len(sources)} folders in {os.path.commonpath(sources) or '.'}"
        except ValueError:  # absolute and relative paths mixed
            pass
    return ", ".join(sources)


def render(runs: Sequence[Run], cols: Sequence[report.Column], groups: Sequence[Group], page: Page) -> str:
    e = html.escape
    script = (STATIC / "report.js").read_text(encoding="utf-8")
    css = (STATIC / "report.css").read_text(encoding="utf-8")
    packed, versions = vega.bundle() if page.figures else ("", "")
    payload = json.dumps({"figures": [f.meta() for f in page.figures], "datasets": page.data},
                         separators=(",", ":"), allow_nan=False, ensure_ascii=False).replace("<", "\\u003c")
    legend = " ".join(f'<span class="swatch" style="background:{e(g.color)}"></span>{e(g.label)} '
                      f'<small>({g.n} run{"s" if g.n != 1 else ""})</small> &nbsp;' for g in groups)
    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(page.title)}</title><style>{css}</style></head><body data-state=\"loading\">",
        f"<h1>{e(page.title)}</h1>",
        f'<p class="lead">{len(runs)} runs from {e(where(page.sources)) or "—"}. The table is sorted by '
        f"{e(page.sorted_by)} (click a column to sort by it); runs that stopped early, diverged and failed come "
        "last.</p>" + thinned(page),
        f'<p class="lead">Groups: {legend}</p>' + (f'<p class="lead">{SEEDS_NOTE}</p>'
                                                   if any(g.n > 1 for g in groups) else ""),
        summary_html(groups, page.figures),
        contents(figures := sections(page.figures, groups, len(runs)), bool(page.notes), bool(page.pngs)),
        page.section,
        f'<div id="runs">{table_html(runs, cols, page.root)}</div>',
    ]
    if page.notes:
        parts.append('<h2 id="notes">Notes</h2><ul>' + "".join(f"<li>{e(n)}</li>" for n in page.notes) + "</ul>")
    parts += ['<p id="figures-state" hidden></p>', *(body for _, _, body in figures)]
    if page.pngs:
        links = ", ".join(f'<a href="{e(p)}">{e(p)}</a>' for p in page.pngs)
        parts.append(f'<h2 id="pngs">Figures for papers</h2><p>The same data as PNG files beside this page: '
                     f"{links}.</p>")
    if versions:
        parts.append(f"<footer>Figures drawn with {e(versions)}, inlined in this page.</footer>")
    parts += [f'<script type="application/json" id="normtrain-data">{payload}</script>',
              f'<script type="text/plain" id="normtrain-vega">{packed}</script>',
              f"<script>{script}</script></body></html>\n"]
    return "\n".join(parts)


def write(path: Path, runs: Sequence[Run], cols: Sequence[report.Column], groups: Sequence[Group],
          page: Page) -> Path:
    write_text(path, render(runs, cols, groups, page))
    return path
