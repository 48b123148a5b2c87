"""The normtrain-catalog command line: ``[--markdown] [--kind KIND ...] [--update FILE]``.

Pure data and the standard library: it imports neither torch nor Hydra, so it answers at once.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from normtrain.catalog.entries import KINDS
from normtrain.catalog.render import markdown, replace_block, text


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="normtrain-catalog",
        description="Every norm, gain, placement, QK-norm form, logit control and optimizer normtrain offers: the "
                    "config override that selects it, its formula, the papers, the reference code and the published "
                    "models that use it.",
        epilog="Examples: normtrain-catalog --kind placement; normtrain-catalog --markdown > catalog.md; "
               "normtrain-catalog --update README.md (rewrites README's catalog table, between its markers).")
    p.add_argument("--markdown", action="store_true", help="Markdown tables (README's catalog) instead of text")
    p.add_argument("--kind", action="append", choices=list(KINDS), metavar="KIND",
                   help=f"only this kind (repeatable): {', '.join(KINDS)}")
    p.add_argument("--update", metavar="FILE",
                   help="rewrite the catalog table of this Markdown file (between its marker comments) in place")
    return p


def update(path: str) -> None:
    """Rewrite ``path``'s catalog block with every kind's table."""
    from normtrain.util.errors import NormtrainError

    file = Path(path)
    try:
        document = file.read_text(encoding="utf-8")
        new = replace_block(document, markdown())
    except (OSError, ValueError) as err:
        raise NormtrainError(f"cannot update {path}: {err}") from None
    if new != document:
        from normtrain.util.atomic import write_text

        write_text(file, new)
    print(f"normtrain-catalog: {path}: catalog table {'updated' if new != document else 'already up to date'}")


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.update and (args.kind or args.markdown):
        parser().error("--update writes every kind's Markdown table; it takes neither --kind nor --markdown")

    def body() -> None:
        if args.update:
            update(args.update)
        elif args.markdown:
            print(markdown(args.kind), end="")
        else:
            print(text(args.kind, width=min(shutil.get_terminal_size((100, 24)).columns, 120) - 1), end="")

    from normtrain.commands import run_command

    run_command("normtrain-catalog", body)


if __name__ == "__main__":
    main(sys.argv[1:])
