"""Honest statistics: intervals named for what they are, bands on paired differences from paired spreads, and the
sign and t tests a handful of seeds can carry."""

import math
import statistics

import pytest

from normtrain.study import stats
from normtrain.study.significance import sign_test, t_cdf, t_quantile, t_test


def test_below_six_seeds_the_interval_is_the_range_and_is_called_so():
    five = [0.41, 0.38, 0.45, 0.40, 0.43]
    found = stats.interval(five)
    assert found == {"label": "range of 5 seeds", "low": 0.38, "high": 0.45, "n": 5}
    assert stats.median_ci(five) == (0.38, 0.45)  # the bootstrap "interval" of 5 values is their range
    assert stats.median_and_interval(five) == "median 0.410 (range of 5 seeds 0.380 to 0.450)"
    assert stats.interval([1.0]) is None and stats.median_and_interval([]) == "–"
    assert stats.interval([1.0, 2.0], unit="repeats")["label"] == "range of 2 repeats"


def test_from_six_seeds_the_interval_is_the_bootstrap_ci_of_the_median():
    twenty = [1.0 + 0.05 * i for i in range(20)]
    found = stats.interval(twenty)
    assert found["label"] == "95% bootstrap CI of the median" and found["n"] == 20
    assert min(twenty) < found["low"] < statistics.median(twenty) < found["high"] < max(twenty)
    assert stats.median_and_interval(twenty).endswith(", n=20)")


def test_the_t_interval_is_a_ci_only_from_six_values():
    assert stats.t_interval([1.0, 2.0, 3.0]) is None
    six = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    lo, hi = stats.t_interval(six)
    half = 2.5706 * statistics.stdev(six) / math.sqrt(6)  # t(0.975, 5) = 2.5706
    assert (lo, hi) == pytest.approx((3.5 - half, 3.5 + half), abs=1e-3)


def test_a_band_on_a_paired_difference_takes_the_spread_of_the_pairs():
    """norm_types' case: each arm's seeds spread by ~0.01 nats, but both arms move together seed by seed, so the
    paired differences spread by far less, and that is the width a band on the difference must use."""
    ln = {"0": 2.00, "1": 2.02, "2": 1.99, "3": 2.01, "4": 2.03}
    rms = {s: v + 0.001 + (0.0005 if s in "13" else 0.0) for s, v in ln.items()}
    assert statistics.stdev(ln.values()) == pytest.approx(0.0158, abs=1e-4)  # one arm's seed sd
    assert stats.paired_sd(rms, ln) == pytest.approx(0.000274, abs=1e-5)  # the pairs': 60× smaller
    assert stats.paired_sd({"0": 1.0}, {"0": 2.0}) is None


def test_the_sign_test_is_exact_and_the_t_test_matches_the_tables():
    assert sign_test([0.1] * 5) == pytest.approx(1 / 32)  # five of five the same way: the smallest p at n = 5
    assert sign_test([0.1, 0.2, 0.3, -0.1]) == pytest.approx(5 / 16)
    assert sign_test([0.1, -0.2], greater=False) == pytest.approx(3 / 4)
    assert sign_test([0.0, 0.0]) is None  # nothing off the threshold
    assert t_cdf(2.0, 4) == pytest.approx(0.94194, abs=1e-5) and t_cdf(-1.5, 2) == pytest.approx(0.13620, abs=1e-5)
    assert t_quantile(0.975, 4) == pytest.approx(2.7764, abs=1e-4)
    t, df, p = t_test([0.1, 0.2, 0.15, 0.12, 0.3], 0.0)
    assert df == 4 and t == pytest.approx(4.871, abs=1e-3) and p == pytest.approx(0.00411, abs=1e-5)
    assert t_test([1.0, 1.0, 1.0]) is None and t_test([1.0]) is None


def test_a_table_cell_counts_every_label():
    rows = [{"status": "completed", "collapsed": True}, {"status": "completed", "above_line": True},
            {"status": "completed", "plateaued": True, "undertrained": True}, {"status": "diverged"}]
    assert stats.counts(rows) == {"n": 4, "diverged": 1, "collapsed": 1, "above_line": 1, "plateaued": 1,
                                  "undertrained": 1}
    assert stats.cell([2.0, 2.1], rows) == "2.050 ± 0.071 (n=2; 1 div, 1 coll, 1 above, 1 plat, 1 short)"
    assert stats.cell([2.0, 2.1], rows[:1]) == "2.050 ± 0.071 (n=2; 0 div, 1 coll)"
