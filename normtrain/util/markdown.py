"""The one Markdown table writer, for compare's table, the reproduction write-ups and the catalog.

Two layouts of the same table: compact (``| a | b |`` under ``|---|---|``: what the write-ups and README's
catalog hold) and padded, numeric columns right-aligned, so that it also reads as a plain table in a terminal
(``normtrain-compare`` prints it). Cells are text; a ``|`` in one is escaped here.
"""

from __future__ import annotations

from collections.abc import Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool] | None = None) -> str:
    """The table without a final newline: compact when ``numeric`` is None, else padded with the columns it
    marks right-aligned."""
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [header, *rows]]
    if numeric is None:
        lines = ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join([lines[0], "|" + "---|" * len(header), *lines[1:]])
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    aligned = list(zip(widths, numeric, strict=True))

    def line(row: list[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if num else v.ljust(w) for v, (w, num) in zip(row, aligned,
                                                                                          strict=True)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in aligned) + "|"
    return "\n".join([line(cells[0]), rule, *map(line, cells[1:])])


def value_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """``table`` of values: floats and None through ``normtrain.util.numbers.number``, the rest as text."""
    from normtrain.util.numbers import number

    return table(header, [[number(v) if v is None or isinstance(v, float) else str(v) for v in row] for row in rows])
