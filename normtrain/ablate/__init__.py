"""``normtrain-ablate``: the user's own "is X better than Y?", each arm at its own best learning rate, paired
seeds, a decision that must hold at half the budget (protocol v5: normtrain/study/decision.py).

    spec.py ...... the question, read from the command line and checked before anything trains
    runs.py ...... the runs: T, the edge extensions, the T/2 decay branches
    estimate.py .. how long they take, measured here; the seeds a budget buys
    report.py .... ablation.json, verdict.md, the figures
    cli.py ....... the command
"""

from __future__ import annotations


def main(argv=None) -> int:
    from normtrain.ablate.cli import main as run

    return run(argv)


__all__ = ["main"]
