"""Collapsed vs undertrained: the trend of a run's last fifth and where its final loss sits against the unigram line."""

import math

import numpy as np
import pytest

from normtrain.training.outcome import MIN_POINTS, STALL_DROP, Trend, outcome, tail_trend

UNIGRAM = 3.33


def series(last_step: int, every: int, level, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    steps = list(range(0, last_step, every))
    return steps, [level(s) + noise * rng.standard_normal() for s in steps]


def test_the_fitted_fall_over_the_last_fifth_is_the_line_through_those_points():
    steps, losses = series(1000, 10, lambda s: 5.0 - 1e-3 * s)  # exactly linear: falls 0.001 nats a step
    trend = tail_trend(steps, losses, 1000)
    assert trend.window == (800, 990) and trend.points == 20
    assert trend.drop == pytest.approx(1e-3 * 190) and trend.stderr == pytest.approx(0.0, abs=1e-12)
    assert trend.falling is True


def test_noise_is_not_progress_and_a_small_fall_is_no_fall():
    steps, losses = series(1000, 10, lambda s: UNIGRAM + 0.01, noise=0.08, seed=3)  # flat, noisy train losses
    flat = tail_trend(steps, losses, 1000)
    assert flat.falling is False
    slow = tail_trend(*series(1000, 10, lambda s: 3.0 - STALL_DROP / 400 * s), 1000)  # half the threshold
    assert slow.drop < STALL_DROP and slow.falling is False


def test_too_few_points_at_the_end_means_the_trend_is_unknown():
    steps, losses = series(20, 5, lambda s: 5.0 - 0.01 * s)  # a 20-step run logged every 5 steps
    trend = tail_trend(steps, losses, 20)
    assert trend.points < MIN_POINTS and trend.drop is None and trend.falling is None
    assert tail_trend([0, 5, float("nan")], [1.0, 2.0, math.nan], 10).points == 0


def test_collapsed_needs_the_line_and_a_stall_undertrained_is_on_the_line_and_still_falling():
    stalled, falling, unknown = Trend(0.0, 0.01, 20, (800, 990)), Trend(0.5, 0.01, 20, (800, 990)), Trend(None, None,
                                                                                                          1, None)
    assert outcome(UNIGRAM + 0.01, UNIGRAM, stalled) == {"collapsed": True, "undertrained": False}
    assert outcome(5.0, UNIGRAM, falling) == {"collapsed": False, "undertrained": True}  # short, not broken
    assert outcome(5.0, UNIGRAM, unknown) == {"collapsed": False, "undertrained": True}  # a 20-step run
    assert outcome(2.0, UNIGRAM, stalled) == {"collapsed": False, "undertrained": False}  # learned, converged
    assert outcome(2.0, UNIGRAM, falling) == {"collapsed": False, "undertrained": False}  # learned, still learning
    assert outcome(None, UNIGRAM, stalled) == {"collapsed": False, "undertrained": False}  # diverged: neither
