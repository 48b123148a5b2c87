"""``normtrain-compare``: figures, tables and an HTML report from run folders.

This package reads ``summary.json`` and ``metrics.jsonl`` only; it never imports torch, the model or
Hydra, so it runs anywhere numpy and vl-convert (which draws the figures, in the page and as PNGs) do.

    from normtrain.compare import compare, write_report
    result = compare(["multirun/2026-01-01/12-00-00"], out="cmp")   # result.runs, result.table, result.files
    write_report(["multirun/sweep"], "sweep.html", by=["norm", "placement"])   # the interactive page alone
    write_report(["multirun/sweep"], "sweep.html", max_bytes=2 << 20)   # its series thinned to fit, if need be
"""

from normtrain.compare.cli import CompareError, Comparison, Report, compare, main, report_page, write_report
from normtrain.compare.runs import Run, load_runs

__all__ = ["compare", "write_report", "report_page", "main", "Comparison", "Report", "CompareError", "Run",
           "load_runs"]
