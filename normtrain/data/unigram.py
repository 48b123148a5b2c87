"""The unigram baseline: what a model that learned only token frequencies scores.

On byte-level text a model that predicts nothing but the byte distribution reaches the cross-entropy of
the train split's byte frequencies on the evaluation windows (about 3.38 nats on the Python standard
library). A loss that stalls there looks like convergence on a curve but means the model learned nothing
of the context, so every run records this number (``unigram_val_loss``); a run whose final loss does not beat
it by more than ``COLLAPSE_MARGIN`` is *on the line* (normtrain/training/outcome.py then tells collapsed from
undertrained).
"""

from __future__ import annotations

import numpy as np

COLLAPSE_MARGIN = 0.05  # nats: a final val loss above unigram − margin learned no more than token frequencies


def unigram_loss(counts: np.ndarray, tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> float:
    """Cross-entropy (nats per token) of the add-one smoothed frequencies ``counts`` on the targets of the
    windows at ``starts`` (the tokens 1…seq_len of each window, exactly what the val loss scores)."""
    logp = np.log(counts + 1.0) - np.log(counts.sum() + len(counts))
    targets = np.asarray(tokens)[starts[:, None] + 1 + np.arange(seq_len)]
    return float(-logp[targets].mean())


def on_unigram_line(final_loss: float | None, unigram: float | None) -> bool:
    """Whether a final loss sits on (or above) the unigram line: so far no more than token frequencies learned.
    A run without a final loss (diverged) is not on the line: it is ``diverged``."""
    return final_loss is not None and unigram is not None and final_loss >= unigram - COLLAPSE_MARGIN
