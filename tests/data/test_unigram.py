"""The unigram baseline: its cross-entropy on the eval windows, and the line a run can sit on."""

import math

import numpy as np
import pytest

from normtrain.data import eval_starts
from normtrain.data.unigram import COLLAPSE_MARGIN, on_unigram_line, unigram_loss


def test_unigram_loss_is_the_smoothed_cross_entropy_of_the_window_targets():
    rng = np.random.default_rng(1)
    train = rng.choice(4, 5_000, p=[0.7, 0.2, 0.1, 0.0]).astype(np.uint8)
    val = rng.choice(4, 2_000, p=[0.5, 0.3, 0.1, 0.1]).astype(np.uint8)
    counts, seq_len = np.bincount(train, minlength=4), 16
    starts = eval_starts(len(val), seq_len, 50)
    p = (counts + 1) / (counts.sum() + 4)  # add-one: a token unseen in train keeps a finite cost
    expected = np.mean([-math.log(p[val[s + 1 + t]]) for s in starts for t in range(seq_len)])
    assert unigram_loss(counts, val, starts, seq_len) == pytest.approx(expected, rel=1e-12)


def test_a_uniform_source_scores_log_vocab():
    val = np.arange(256, dtype=np.uint8).repeat(8)
    starts = eval_starts(len(val), 32, 20)
    assert unigram_loss(np.full(256, 1000), val, starts, 32) == pytest.approx(math.log(256))


def test_on_the_line_means_not_beating_the_unigram_line_by_the_margin():
    assert on_unigram_line(3.38, 3.376) and on_unigram_line(4.2, 3.376)  # on the line, or worse than it
    assert on_unigram_line(3.376 - COLLAPSE_MARGIN + 1e-9, 3.376)
    assert not on_unigram_line(3.2, 3.376) and not on_unigram_line(1.8, 3.376)
    assert not on_unigram_line(None, 3.376)  # a diverged run has no final loss: it is diverged, not on the line
