"""``normtrain-compare PATH... [--out DIR] [--metric val/loss] [--by KEYS]`` (and ``--tune KEY --baseline KEY=V``: a
sweep judged best against best, normtrain/compare/tuned.py), its Python twin ``compare()``, and
``write_report()``, the interactive page alone (``report_page()``: the page, not yet written, within a size
budget if asked).

Reads run folders only (JSON and JSONL): one Vega-Lite spec per figure, inlined in the interactive page and
rendered to PNG by vl-convert; it needs neither torch nor Hydra, so a sweep copied from a cluster can be compared
on a laptop. Exit codes: 0 when a report was written, 2 for bad input (no runs found, an unknown ``--by`` key or
``--metric``).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from normtrain.compare import findings, page, paper, probe, report, specs, vega
from normtrain.compare.figdata import MIN_POINTS
from normtrain.compare.groups import group_runs
from normtrain.compare.labels import LabelError, label_runs, unique_slugs
from normtrain.compare.runs import Run, load_runs
from normtrain.util.atomic import write_text

PROG = "normtrain-compare"


class CompareError(ValueError):
    """Bad input: reported in one message, exit code 2."""


@dataclass
class Comparison:
    """What ``compare`` found and wrote."""

    runs: list[Run]  # sorted, labelled
    keys: list[str]  # the config keys in the table: those of the labels, then any other that varies
    table: str  # the Markdown table
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)  # the report's opening sentences (normtrain.compare.findings)


def default_out(paths: Sequence[str]) -> Path:
    first = Path(paths[0]) if paths else None
    return first / "compare" if first is not None and first.is_dir() else Path("compare")


def compare(paths: Sequence[str], out: str | Path | None = None, metric: str = "val/loss",
            by: Sequence[str] | None = None, figures: bool = True, section: str = "",
            title: str | None = None) -> Comparison:
    """Read every run under ``paths`` and write the table, the PNG figures and ``report.html`` into ``out``
    (``section``: trusted HTML the page shows before its table, e.g. an ablation's decision)."""
    out = Path(out) if out is not None else default_out(paths)
    runs, skipped = load_runs(list(paths), exclude=out)
    if not runs:
        why = "".join(f"\n  skipped: {s}" for s in skipped)
        raise CompareError(f"no runs found in {', '.join(paths)} (a run folder holds summary.json or "
                           f"metrics.jsonl){why}")
    runs, keys, groups, sorted_by = _prepare(runs, metric, by)
    cols = report.columns(keys, runs)
    table = report.markdown(runs, cols)
    notes = [f"{run.label}: {note}" for run in runs for note in run.notes]
    result = Comparison(runs=runs, keys=keys, table=table, skipped=skipped, notes=notes,
                        summary=[f.text for f in findings.summary(groups)])

    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "table.md", f"Sorted by {sorted_by}.\n\n{table}")
    report.write_csv(runs, cols, out / "table.csv")
    result.files += [out / "table.md", out / "table.csv"]
    view = page.Page(title=title or f"Comparison of {len(runs)} runs", sorted_by=sorted_by, sources=list(paths),
                     section=section)
    if figures:
        _interactive(view, groups, runs, result.notes)
        view.pngs = [p.name for p in _figures(view, groups, runs, out, result)]
    view.notes = [f"skipped: {s}" for s in skipped] + result.notes
    result.files.append(page.write(out / "report.html", runs, cols, groups, view))
    return result


@dataclass
class Report:
    """An interactive page, rendered but not written: its HTML and the cap on each series it was built with."""

    html: str
    points: int | None = None  # at most this many of each run's logged steps per series; None: not thinned


def write_report(runs: Sequence[Run | str | Path], out_path: str | Path, by: Sequence[str] | None = None,
                 title: str | None = None, metric: str = "val/loss", points: int | None = None,
                 max_bytes: int | None = None) -> Path:
    """Write just the interactive report (table and figures, one HTML file) of ``runs`` to ``out_path`` and return
    its path; ``report_page`` says what the arguments do."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_text(out_path, report_page(runs, by, title, metric, points, max_bytes).html)
    return out_path


def report_page(runs: Sequence[Run | str | Path], by: Sequence[str] | None = None, title: str | None = None,
                metric: str = "val/loss", points: int | None = None, max_bytes: int | None = None,
                root: Path | None = None) -> Report:
    """The interactive report of ``runs`` (run folders, sweep folders or globs, or ``Run`` objects, which are left
    as they are).

    ``by`` picks the grouping keys as ``--by`` does; ``metric`` sorts the table. ``points`` thins every series to
    at most that many of each run's logged steps (``figdata.Thinning``); by default only the usual limits of a page
    apply. ``max_bytes`` is a budget for the page's size: a page over it is drawn again with the most points per
    series that keep it within (``Draft.fit``); one still over at ``figdata.MIN_POINTS`` is returned as it is, for
    the caller to judge. A thinned page says so near its top. ``root``: run folders below it are named from its
    name on (a committed page names no machine's paths). Raises CompareError for bad input (no runs, an
    unknown key or metric).
    """
    loaded = [copy.copy(r) for r in runs if isinstance(r, Run)]
    paths = [str(r) for r in runs if not isinstance(r, Run)]
    found, skipped = load_runs(paths) if paths else ([], [])
    if not loaded + found:
        raise CompareError(f"no runs to report{''.join(f'; skipped: {s}' for s in skipped)}")
    ready, keys, groups, sorted_by = _prepare(loaded + found, metric, by)
    sources = paths or sorted({str(r.path.parent) for r in loaded})
    view = page.Page(title=title or f"Comparison of {len(ready)} runs", sorted_by=sorted_by, root=root,
                     sources=[report.shown_path(Path(s), root) for s in sources] if root else sources)
    draft = Draft(view, groups, ready, report.columns(keys, ready),
                  [f"skipped: {s}" for s in skipped] + [f"{r.label}: {n}" for r in ready for n in r.notes])
    html = draft.render(points)
    if max_bytes is None or _size(html) <= max_bytes or draft.longest() <= MIN_POINTS:
        return Report(html, view.points)
    return draft.fit(max_bytes, draft.longest())


@dataclass
class Draft:
    """A report page and what it is drawn from, to draw again with fewer points per series."""

    view: page.Page
    groups: list
    runs: list[Run]
    cols: list[report.Column]
    notes: list[str]  # the page's notes before the figures add theirs

    def render(self, points: int | None) -> str:
        """The page with every series at most ``points`` long (None: as compare draws it)."""
        self.view.notes = list(self.notes)
        _interactive(self.view, self.groups, self.runs, self.view.notes, points)
        logged = max(len(r.rows) for r in self.runs)
        self.view.points = points if points is not None and points < logged else None
        return page.render(self.runs, self.cols, self.groups, self.view)

    def longest(self) -> int:
        """The most points any series of the last page drawn has."""
        return max((len(r["step"]) for records in self.view.data.values() for r in records
                    if isinstance(r.get("step"), list)), default=0)

    def fit(self, max_bytes: int, over: int) -> Report:
        """The page with the most points per series that keeps it within ``max_bytes``, found to within a tenth by
        bisection below ``over`` (a cap known to be too many: the longest series drawn; the page's size grows with
        the cap), and not below ``MIN_POINTS``: at that floor even when it is still over."""
        self.view.budget = max_bytes
        fits, best = MIN_POINTS, None
        while over - fits > max(1, fits // 10):
            middle = (over + fits) // 2
            html = self.render(middle)
            if _size(html) <= max_bytes:
                fits, best = middle, html
            else:
                over = middle
        return Report(best or self.render(fits), fits)


def _size(html: str) -> int:
    return len(html.encode("utf-8"))


def _prepare(runs: list[Run], metric: str, by: Sequence[str] | None) -> tuple[list[Run], list[str], list, str]:
    """Label, sort and group the runs: (runs in table order, the table's config keys, the groups, the sort)."""
    try:
        keys = label_runs(runs, list(by) if by else None)
        value, higher, sorted_by = report.metric(metric, runs)
    except (LabelError, report.MetricError) as err:
        raise CompareError(str(err)) from None
    groups = group_runs(runs)  # before sorting: colours follow the fixed group order, not the table's
    return report.sort_runs(runs, value, higher), keys, groups, sorted_by


def _interactive(view: page.Page, groups: list, runs: list[Run], notes: list[str], points: int | None = None) -> None:
    """The interactive figures and their data into ``view``, each series at most ``points`` long; odd data or a
    missing library costs a note."""
    try:
        view.figures, view.data = specs.build(groups, runs, points)
        view.figures += probe.build(groups, view.data)  # runs with a probe/ folder (normtrain-probe)
        if view.figures:
            vega.bundle()
    except vega.VegaUnavailable as err:
        view.figures, view.data = [], {}
        notes.append(f"no interactive figures: {err}")
    except Exception as err:  # never the table
        view.figures, view.data = [], {}
        notes.append(f"the interactive figures could not be drawn ({type(err).__name__}: {err})")


def _figures(view: page.Page, groups: list, runs: list[Run], out: Path, result: Comparison) -> list[Path]:
    """The PNGs (for papers): the report's own specs, rendered by vl-convert (normtrain.compare.paper)."""
    for stale in out.glob("grad_norm_heatmap_*.png"):  # from an earlier comparison of other runs
        stale.unlink()
    if not view.figures:
        result.notes.append("no PNG figures: they are drawn from the interactive figures, and there are none")
        return []
    charts = paper.Charts(groups, {f.id: f for f in view.figures}, view.data)
    pngs: list[Path] = []
    for name, draw in paper.FILES:
        try:
            result.notes += draw(charts, out / name)
            pngs.append(out / name)
        except Exception as err:  # odd data costs one figure, never the report
            result.notes.append(f"{name} could not be drawn ({type(err).__name__}: {err})")
    try:
        heatmaps, notes = paper.grad_norm_heatmaps(runs, unique_slugs([r.label for r in runs]), out)
        result.notes += notes
        pngs += heatmaps
    except Exception as err:  # likewise
        result.notes.append(f"grad_norm_heatmap_*.png could not be drawn ({type(err).__name__}: {err})")
    result.files += pngs
    return pngs


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG, description="Compare normtrain runs: an interactive HTML report (one file, works offline), PNG "
                               "figures for papers and a table.",
        epilog="PATH is a multirun folder, run folders, or globs (quote them), searched recursively for folders "
               "with summary.json or metrics.jsonl. Example: normtrain-compare multirun/2026-01-01/12-00-00")
    p.add_argument("paths", nargs="+", metavar="PATH", help="multirun folder, run folder or glob")
    p.add_argument("--out", metavar="DIR", help="output folder (default: <first PATH>/compare, or ./compare)")
    p.add_argument("--metric", default="val/loss",
                   help="sort key, best first: val/loss (final; default), val/best_loss, val/bpb, tokens_per_s, "
                        "wall_time_s, or any metrics.jsonl key (its last value)")
    p.add_argument("--by", metavar="KEYS",
                   help="comma-separated config keys that make the labels and group the runs, e.g. "
                        "norm,placement,model.n_layers (default: every config value that differs between the runs; "
                        "runs that differ only in train.seed form one group: mean and band)")
    p.add_argument("--table-only", action="store_true", help="write and print the table only: no figures")
    p.add_argument("--tune", metavar="KEY", help="judge the sweep best against best: each arm at its own best value "
                                                 "of KEY (e.g. optim.lr), paired seeds, a decision (with --baseline)")
    p.add_argument("--baseline", metavar="KEY=VALUE", help="with --tune: the arm key and the reference arm, e.g. "
                                                           "placement=pre")
    p.add_argument("--margin", type=float, default=0.02, help="with --tune: the equivalence band ±δ in nats")
    p.add_argument("--alpha", type=float, default=0.05, help="with --tune: one-sided level of each test")
    return p.parse_args(argv)


def main_tuned(args: argparse.Namespace) -> int:
    """``--tune``: the best-against-best analysis of a finished sweep (normtrain/compare/tuned.py)."""
    from normtrain.compare.tuned import compare_tuned
    from normtrain.study.report import sentence
    from normtrain.util.errors import StudyError

    if not args.baseline:
        print(f"{PROG}: --tune needs --baseline KEY=VALUE (the arm key and the reference arm, e.g. "
              "--baseline placement=pre)", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else default_out(args.paths).parent / "best_against_best"
    try:
        found = compare_tuned(list(args.paths), args.tune, args.baseline, out, args.margin, args.alpha)
    except (StudyError, ValueError) as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    for line in found["limits"]:
        print(f"{PROG}: the sweep cannot support: {line}", file=sys.stderr)
    for d in found["analysis"].decisions.values():
        print(sentence(found["question"], d).replace("**", ""))
    print(f"{PROG}: wrote {found['verdict_md']} and {found['ablation_json']}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.tune or args.baseline:
        return main_tuned(args) if args.tune else _needs_tune()
    by = [k for k in args.by.split(",") if k.strip()] if args.by else None
    try:
        result = compare(args.paths, out=args.out, metric=args.metric, by=by, figures=not args.table_only)
    except CompareError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # --out is a file, or not writable
        print(f"{PROG}: cannot write the report: {err}", file=sys.stderr)
        return 2
    for line in result.skipped:
        print(f"{PROG}: skipped: {line}", file=sys.stderr)
    for line in result.notes:
        print(f"{PROG}: note: {line}", file=sys.stderr)
    print(result.table, end="")
    for line in result.summary:
        print(f"{PROG}: {line}", file=sys.stderr)
    out = result.files[0].parent
    print(f"{PROG}: {len(result.runs)} runs; wrote {len(result.files)} files to {out} (open {out / 'report.html'})",
          file=sys.stderr)
    return 0


def _needs_tune() -> int:
    print(f"{PROG}: --baseline goes with --tune KEY (the key tuned for every arm, e.g. --tune optim.lr)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
