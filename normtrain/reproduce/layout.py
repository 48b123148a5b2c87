"""The order of a reproduction's README: what a reader comes for first, the registration after.

The first screen holds the claim in one line, the verdict with the reason that decided it, our headline number and
the experiment's first figure; then the rest of the verdict (each check), the results (the tables, every other
figure, the per-run files), the claim's detail and the paper's number, what we ran, the registration and the
check history. normtrain/reproduce/writeup.py writes its sections into this order (``arrange``).

``relayout`` puts a README written in the earlier order (the claim, the registration, what we ran, the results,
the verdict) into this one by moving its paragraphs, changing none of them: a committed result cannot be
written again without its runs (its results table comes from the runs' analysis, which result.json does not
hold), so its README is rearranged from its own text, checked against the verdict, claim and headline number
of its result.json. ``python scripts/relayout_experiments.py experiments/NAME ...`` does it for those folders.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from normtrain.util.atomic import write_text

# section name -> the start of its heading, in the order the README shows them
SECTIONS = {"verdict": "## Verdict", "quick": "## What this quick run can and cannot show", "results": "## Results",
            "claim": "## The claim", "method": "## What we ran",
            "registration": "## Registration", "history": "## Check history"}
CLAIM = "**The claim.** "
FIGURE = "!["


def claim_line(claim: str) -> str:
    return CLAIM + claim


def verdict_head(heading: str, why: str, key: str, figures: Sequence[str]) -> list[str]:
    """The verdict section's first paragraphs: the verdict, why, our headline number, the first figure."""
    return [heading, why, key, *(f"![{f}]({f})" for f in figures[:1])]


def arrange(head: Sequence[str], sections: dict[str, str]) -> str:
    """The README: ``head`` (title, the generated-by line, the smoke warning, the claim line), then the sections
    in the order of SECTIONS; empty paragraphs dropped."""
    if unknown := set(sections) - set(SECTIONS):
        raise ValueError(f"sections {sorted(unknown)} have no place in the README's order")
    text = "\n\n".join(p for p in [*head, *(sections[name] for name in SECTIONS if name in sections)] if p)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def split(text: str) -> tuple[list[str], dict[str, str]]:
    """A README's paragraphs before its first section, and each ``## `` section's text by its name."""
    head, *blocks = re.split(r"^(?=## )", text.strip(), flags=re.M)
    sections = {}
    for block in blocks:
        name = next((n for n, h in SECTIONS.items() if block.startswith(h)), None)
        if name is None or name in sections:
            raise ValueError(f"section {block.splitlines()[0]!r}: unknown or repeated")
        sections[name] = block.strip()
    return head.strip().split("\n\n"), sections


def take(paragraphs: list[str], wanted: str, where: str) -> str:
    if wanted not in paragraphs:
        raise ValueError(f"the {where} section does not hold {wanted[:60]!r}... (from result.json)")
    paragraphs.remove(wanted)
    return wanted


def relayout(text: str, result: dict[str, Any]) -> str:
    """``text`` (a README in the earlier order, or already in this one) in this order, every paragraph kept: the
    claim moves to the head, the headline number and the results' first figure to the top of the verdict."""
    head, sections = split(text)
    if missing := set(SECTIONS) - set(sections) - {"quick"}:  # a quick run's own section only
        raise ValueError(f"no section {', '.join(SECTIONS[n] for n in sorted(missing))}")
    if not any(p.startswith(CLAIM) for p in head):
        claim = sections["claim"].split("\n\n")
        head.append(claim_line(take(claim, result["claim"], "claim")))
        verdict, results = sections["verdict"].split("\n\n"), sections["results"].split("\n\n")
        key = take(verdict, result["key"], "verdict")
        at = next((i for i, p in enumerate(results) if p.startswith(FIGURE)), None)
        figure = [] if at is None else [results.pop(at)]
        verdict[2:2] = [key, *figure]
        sections.update(claim="\n\n".join(claim), verdict="\n\n".join(verdict), results="\n\n".join(results))
    if not sections["verdict"].startswith(f"{SECTIONS['verdict']}: {result['verdict']}\n"):
        raise ValueError(f"the README's verdict is not result.json's ({result['verdict']})")
    return arrange(head, sections)


def relayout_folder(folder: Path) -> bool:
    """Rearrange ``folder``'s README.md by its result.json; True when the text changed."""
    readme = folder / "README.md"
    before = readme.read_text()
    after = relayout(before, json.loads((folder / "result.json").read_text()))
    if after != before:
        write_text(readme, after)
    return after != before
