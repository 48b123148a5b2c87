"""A run's labels from its validation curve: collapsed (flat on the unigram line), above the line, plateaued (and
when it left the line), undertrained (the validation loss still falling over the last quarter); and the training
loss's fitted tail, which is reported and labels nothing."""

import math

import numpy as np
import pytest

from normtrain.training.outcome import (
    LINE_BAND,
    MIN_POINTS,
    PLATEAU_SPAN,
    STALL_DROP,
    STILL_FALLING,
    Labels,
    labels,
    tail_trend,
)

UNIGRAM = 3.33


def curve(level, last_step: int = 1000, every: int = 50) -> list[tuple[int, float]]:
    """The validation loss every 5% of a run (``level(step)``), the last point at ``last_step``."""
    return [(s, level(s)) for s in range(0, last_step + 1, every)]


def test_a_run_flat_on_the_line_is_collapsed_from_below_or_above():
    for offset in (-0.04, 0.0, 0.04):  # within the band, below it, on it, above it
        flat = labels(curve(lambda s, o=offset: 5.5 if s == 0 else UNIGRAM + o), UNIGRAM, 1000)
        assert flat.collapsed and flat.undertrained is False and flat.names() == ["collapsed"]
    falling = labels(curve(lambda s: UNIGRAM + 0.04 + (1000 - s) * 1e-3), UNIGRAM, 1000)  # 0.25 in the last quarter
    assert not falling.collapsed and falling.undertrained and falling.quarter_drop == pytest.approx(0.25)


def test_a_run_far_above_the_line_is_above_it_not_collapsed():
    sgd = labels(curve(lambda s: UNIGRAM + 2.0), UNIGRAM, 1000)  # SGD that barely moved: 2 nats above the line
    assert sgd.above_line and not sgd.collapsed and sgd.names() == ["above_line"]
    assert labels(curve(lambda s: UNIGRAM + LINE_BAND + 0.01), UNIGRAM, 1000).above_line
    assert not labels(curve(lambda s: UNIGRAM + LINE_BAND - 0.01), UNIGRAM, 1000).above_line


def test_undertrained_reads_the_validation_curve_over_the_last_quarter_wherever_the_run_ends():
    learning = labels(curve(lambda s: 3.0 - 4e-4 * s), UNIGRAM, 1000)  # below the line, still falling 0.1
    assert learning.undertrained and learning.quarter_window == (750, 1000) and not learning.above_line
    assert learning.quarter_drop == pytest.approx(0.1)
    slow = labels(curve(lambda s: 3.0 - STILL_FALLING / 300 * s), UNIGRAM, 1000)  # 0.042 over the quarter
    assert slow.undertrained is False
    # only the start and the end evaluated: nothing to measure the last quarter from, so unknown (never a guess)
    sparse = labels([(0, 5.5), (1000, 3.4)], UNIGRAM, 1000)
    assert sparse.undertrained is None and not sparse.collapsed and sparse.quarter_drop is None
    interrupted = labels(curve(lambda s: 3.0, last_step=800), UNIGRAM, 1000)  # the final point is not the run's end
    assert interrupted.undertrained is None


def test_a_plateau_on_the_line_then_a_fall_is_labelled_with_the_step_it_left():
    def xiong(s):  # Post-LN without warm-up: on the line from step 100 to 500, then it starts learning
        return 5.5 if s < 100 else (UNIGRAM + 0.01 if s <= 500 else 3.0 - (s - 500) * 1e-4)
    run = labels(curve(xiong), UNIGRAM, 1000)
    assert run.plateaued and run.left_line_at_step == 550 and not run.collapsed
    assert run.as_dict()["left_line_at_step"] == 550 and "plateaued" in run.as_dict()["labels"]
    # passing through the line on the way down (one point on it) is no plateau; nor is a run that never leaves
    passing = labels(curve(lambda s: 5.5 if s == 0 else (UNIGRAM if s == 50 else 2.5)), UNIGRAM, 1000)
    assert not passing.plateaued and passing.left_line_at_step is None
    stuck = labels(curve(lambda s: UNIGRAM), UNIGRAM, 1000)
    assert stuck.collapsed and not stuck.plateaued
    span = int(PLATEAU_SPAN * 1000)  # on the line for just less than the stated span: no plateau
    short = labels(curve(lambda s: UNIGRAM if 100 <= s < 100 + span else (5.5 if s < 100 else 2.5)), UNIGRAM, 1000)
    assert not short.plateaued


def test_a_diverged_run_and_a_run_without_a_baseline_carry_no_line_labels():
    assert labels(curve(lambda s: UNIGRAM), UNIGRAM, 1000, diverged=True) == Labels()
    assert labels([], UNIGRAM, 1000) == Labels()
    no_line = labels(curve(lambda s: 3.0 - 4e-4 * s), None, 1000)
    assert no_line.undertrained and not (no_line.collapsed or no_line.above_line or no_line.plateaued)
    assert labels([(0, 5.5), (500, math.nan), (1000, 3.0)], UNIGRAM, 1000).undertrained is None  # nan dropped


def series(last_step: int, every: int, level, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    steps = list(range(0, last_step, every))
    return steps, [level(s) + noise * rng.standard_normal() for s in steps]


def test_the_training_loss_tail_is_the_line_through_the_last_fifth():
    steps, losses = series(1000, 10, lambda s: 5.0 - 1e-3 * s)  # exactly linear: falls 0.001 nats a step
    trend = tail_trend(steps, losses, 1000)
    assert trend.window == (800, 990) and trend.points == 20
    assert trend.drop == pytest.approx(1e-3 * 190) and trend.stderr == pytest.approx(0.0, abs=1e-12)
    assert trend.falling is True
    flat = tail_trend(*series(1000, 10, lambda s: UNIGRAM + 0.01, noise=0.08, seed=3), 1000)
    assert flat.falling is False
    slow = tail_trend(*series(1000, 10, lambda s: 3.0 - STALL_DROP / 400 * s), 1000)  # half the threshold
    assert slow.drop < STALL_DROP and slow.falling is False
    short = tail_trend(*series(20, 5, lambda s: 5.0 - 0.01 * s), 20)
    assert short.points < MIN_POINTS and short.drop is None and short.falling is None
