"""One number format for every table, write-up and report cell (normtrain/util/numbers.py)."""

from __future__ import annotations

import math

import pytest

from normtrain.reproduce.writeup import markdown_table
from normtrain.study import stats
from normtrain.util.numbers import number, short_exponent


@pytest.mark.parametrize(("value", "decimals", "text"), [
    (2.53, 3, "2.530"), (0.03, 3, "0.030"), (0.0, 3, "0.000"), (-0.5, 3, "-0.500"), (3.14159, 4, "3.1416"),
    (0.01, 3, "0.010"), (0.0099, 3, "0.0099"), (0.0012, 4, "0.0012"), (1e-5, 3, "1e-5"), (2.5e-5, 4, "2.5e-5"),
    (1234.56, 3, "1235"), (250000.0, 0, "250000"), (12345678.0, 0, "1.23e7"), (5.25, 0, "5.25"), (0.53, 1, "0.53"),
    (999.9996, 3, "1000"), (None, 3, "–"), (math.nan, 3, "nan"), (math.inf, 3, "∞"), (-math.inf, 3, "−∞"),
])
def test_number(value, decimals, text):
    assert number(value, decimals) == text


def test_the_same_value_reads_the_same_in_a_spread_a_table_and_a_check():
    assert number(None, missing="—") == "—"
    assert stats.spread([0.001, 0.002, 0.003]) == "0.002 ± 0.001 (n=3)"
    assert stats.spread([1e-5, 2e-5, 3e-5]) == "2e-5 ± 1e-5 (n=3)"
    assert markdown_table(["a", "b", "c"], [[2.5, None, 3]]).splitlines()[-1] == "| 2.500 | – | 3 |"
    assert short_exponent("2.5e+07") == "2.5e7" and short_exponent("1e-05") == "1e-5" and short_exponent("0.5") == "0.5"
