"""The catalog printed two ways: plain text for a terminal, and the Markdown tables README.md carries.

README's copy sits between two marker comments; ``replace_block`` rewrites it (``normtrain-catalog --update``), and
a test fails when it differs from ``markdown()``.
"""

from __future__ import annotations

import textwrap

from normtrain.catalog.entries import CHOICES, KINDS, Choice
from normtrain.util.markdown import table

BEGIN = ("<!-- normtrain-catalog:begin: generated from normtrain/catalog/entries.py by "
         "`normtrain-catalog --update README.md`; edit the entries, not this table -->")
END = "<!-- normtrain-catalog:end -->"


def selected(kinds: list[str] | None = None) -> list[Choice]:
    """The choices of ``kinds`` (every kind when None), in catalog order."""
    return [c for c in CHOICES if kinds is None or c.kind in kinds]


def _choice_label(c: Choice) -> str:
    return c.select + (f" (with {', '.join(c.needs)})" if c.needs else "")


def _formula(c: Choice) -> str:
    return c.formula + (f"; {c.note}" if c.note else "")


def _text_entry(c: Choice, width: int) -> list[str]:
    rows = [("formula", _formula(c))]
    rows += [("paper", p.cite()) for p in c.papers]
    rows += [("code", str(ref)) for ref in c.code]
    rows += [("used by", ", ".join(c.models))] if c.models else []
    lines = [f"  {c.name}: {_choice_label(c)}"]
    for label, value in rows:
        lines += textwrap.wrap(value, width, initial_indent=f"      {label:<8} ", subsequent_indent=" " * 15,
                               break_on_hyphens=False)
    return lines


def text(kinds: list[str] | None = None, width: int = 100) -> str:
    """Plain text: per kind a heading, then per choice its name and override, formula, papers, code and models,
    wrapped to ``width`` columns."""
    sections = []
    for kind, title in KINDS.items():
        choices = [c for c in selected(kinds) if c.kind == kind]
        if choices:
            sections.append("\n\n".join([title.upper(), *("\n".join(_text_entry(c, width)) for c in choices)]))
    return "\n\n\n".join(sections) + "\n"


def markdown(kinds: list[str] | None = None) -> str:
    """One Markdown table per kind (README's catalog is this with every kind)."""
    out: list[str] = []
    for kind, title in KINDS.items():
        choices = [c for c in selected(kinds) if c.kind == kind]
        if not choices:
            continue
        rows = [[v or "–" for v in (
            f"`{c.select}`" + "".join(f" (with `{n}`)" for n in c.needs) + f": {c.name}", _formula(c),
            "; ".join(p.cite(title=False) for p in c.papers),
            "; ".join(f"`{ref.repo}`" + (f" ({ref.path})" if ref.path else "") for ref in c.code),
            ", ".join(c.models))] for c in choices]
        out += [f"**{title}**", "", table(["choice", "formula", "paper", "reference code", "used by"], rows), ""]
    return "\n".join(out)


def replace_block(document: str, table: str) -> str:
    """``document`` with the text between the catalog's markers replaced by ``table``. ValueError when the
    markers are missing or out of order."""
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no catalog block: the file needs a line {BEGIN!r} and, after it, a line {END!r}")
    return document[:start] + BEGIN + "\n\n" + table + "\n" + document[end:]
