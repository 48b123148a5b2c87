"""Put committed reproduction READMEs into the order of normtrain/reproduce/layout.py (the verdict, our headline
number and the first figure first; the registration after), moving their paragraphs and changing none; no run is
trained or read. Each folder needs its README.md and result.json; a README already in that order stays as it is.

    python scripts/relayout_experiments.py experiments/xiong_warmup experiments/deepnet_depth ...

Exits 0 when every folder was rearranged or already in order, 2 at the first that could not be (why on stderr).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from normtrain.reproduce.layout import relayout_folder


def main(argv: Sequence[str] | None = None) -> int:
    for folder in map(Path, sys.argv[1:] if argv is None else argv):
        try:
            changed = relayout_folder(folder)
        except (OSError, ValueError, KeyError) as err:
            print(f"{folder}: {err}", file=sys.stderr)
            return 2
        print(f"{folder}: {'rearranged' if changed else 'already in order'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
