"""``normtrain-reproduce``: the deep-model stability experiments, each one command end to end.

One module per experiment (its claim, its measurement, its verdict); ``runner`` expands the grid of
``configs/experiment/NAME.yaml`` and trains the runs, ``writeup`` writes ``experiments/NAME/``.

    from normtrain.reproduce import reproduce
    result = reproduce("deepnet_depth", scale="cpu")     # the README, figures, runs.csv and result.json
"""

from __future__ import annotations

from normtrain.reproduce.catalog import EXPERIMENTS
from normtrain.reproduce.cli import main, reproduce
from normtrain.reproduce.runner import Experiment

__all__ = ["EXPERIMENTS", "Experiment", "reproduce", "main"]
