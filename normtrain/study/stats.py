"""Seeds and spread: per-seed values grouped by condition, summarized as mean ± sd (n), intervals named for what
they are, and growth fits.

Every number a reproduction reports comes from its seeds: the tables give mean ± sample sd and n, the figures
show each seed, and the checks (normtrain.study.verdicts) decide on the per-seed values.

Intervals are named for what they are (issue 37): with 5 seeds or fewer the percentile bootstrap interval of the
median *is* the range of the seeds (the bootstrap median of 5 draws lands on the smallest value more than 2.5% of
the time), and the range of 3 seeds covers their population median only 75% of the time, so it is called "range of
n seeds", never a 95% CI. With 6 or more it is the 95% bootstrap CI of the median (or a t interval of the mean).
A band on a paired difference (A − B, seed by seed) takes its width from the sd of those differences
(:func:`paired_sd`), not from one arm's seed sd: pairing removes what the seeds share.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from normtrain.study.significance import t_half_width
from normtrain.util.numbers import number
from normtrain.util.spread import mean_sd

MIN_CI = 6  # seeds: below this an interval is the seeds' range and is called so
SEED = "train.seed"


def finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def per_seed(rows: list[dict[str, Any]], value: str | Callable[[dict], float | None],
             where: Callable[[dict], bool] = lambda r: True, key: str = SEED) -> dict[str, float | None]:
    """``{seed: value}`` over the rows that ``where`` selects (one row per seed; or per ``key``, e.g. a repeat)."""
    read = value if callable(value) else (lambda r: r.get(value))
    return {str(r.get(key, "0")): read(r) for r in rows if where(r)}


def mean(values: Iterable[float | None]) -> float | None:
    vals = finite(values)
    return sum(vals) / len(vals) if vals else None


def median(values: Iterable[float | None]) -> float | None:
    vals = finite(values)
    return statistics.median(vals) if vals else None


def spread(values: Iterable[float | None]) -> str:
    """``2.531 ± 0.021 (n=3)``: mean ± sample sd (normtrain/util/spread.py); infinite values (a diverged run in a
    penalty) are counted apart."""
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    inf = sum(1 for v in values if math.isinf(v))
    vals = finite(values)
    if not vals:
        return f"∞ (n={inf})" if inf else "–"
    m, sd, n = mean_sd(vals)
    text = f"{number(float(m))} ± {number(float(sd))} (n={n})"
    return text + (f", +{inf} ∞" if inf else "")


def median_ci(values: list[float], level: float = 0.95, draws: int = 4000) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the median (a fixed generator: the same values give the same interval);
    None with fewer than 3 finite values. Infinite values (diverged runs) take part as they are. With 5 values or
    fewer it is their range (see the module docstring): call it that (:func:`interval`)."""
    if len(values) < 3 or any(math.isnan(v) for v in values):
        return None
    import numpy as np

    rng = np.random.default_rng(0)
    arr = np.asarray(values, dtype=float)
    medians = np.median(rng.choice(arr, size=(draws, len(arr)), replace=True), axis=1)
    lo, hi = np.quantile(medians, (1 - level) / 2, method="lower"), np.quantile(medians, (1 + level) / 2,
                                                                                  method="higher")
    return float(lo), float(hi)


def interval(values: Iterable[float | None], unit: str = "seeds") -> dict[str, Any] | None:
    """The interval to report around a median, named for what it is: ``{"label", "low", "high", "n"}``, the range
    of the values with fewer than ``MIN_CI`` of them, the 95% bootstrap CI of the median from ``MIN_CI`` on; None
    with fewer than 2 values."""
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    if len(vals) < 2:
        return None
    if len(vals) < MIN_CI:
        return {"label": f"range of {len(vals)} {unit}", "low": min(vals), "high": max(vals), "n": len(vals)}
    lo, hi = median_ci(vals)
    return {"label": "95% bootstrap CI of the median", "low": lo, "high": hi, "n": len(vals)}


def median_and_interval(values: Iterable[float | None], unit: str = "seeds") -> str:
    """``median 1.46 (95% bootstrap CI of the median 1.20 to 1.70, n=20)`` or ``median 0.41 (range of 5 seeds 0.38
    to 0.45)``; ``–`` without values."""
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return "–"
    found = interval(vals, unit)
    if found is None:
        return f"{number(statistics.median(vals))} (n=1)"
    n = f", n={found['n']}" if found["label"].startswith("95%") else ""
    return (f"median {number(statistics.median(vals))} ({found['label']} {number(found['low'])} to "
            f"{number(found['high'])}{n})")


def t_interval(values: Iterable[float | None], level: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval of the mean; None with fewer than ``MIN_CI`` finite values (the protocol calls an
    interval a CI only from there)."""
    vals = finite(values)
    if len(vals) < MIN_CI:
        return None
    m, half = statistics.fmean(vals), t_half_width(vals, (1 - level) / 2)
    return m - half, m + half


def paired_sd(a: dict[str, float | None], b: dict[str, float | None]) -> float | None:
    """The sample sd over seeds of the paired differences a − b (seeds in both, finite): the spread a band on a
    paired difference must be built from; None with fewer than 2 pairs."""
    diffs = finite(paired(a, b, lambda x, y: x - y).values())
    return statistics.stdev(diffs) if len(diffs) >= 2 else None


def loglog_slope(xs: list[float], ys: list[float | None]) -> float | None:
    """Least-squares slope of log y against log x (y ~ x^slope); None with fewer than two points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y is not None and y > 0
           and math.isfinite(y)]
    return slope(pts)


def variance_exponent(rms: list[float]) -> float | None:
    """k of Var(x_ℓ) ∝ ℓ^k over blocks ℓ = 1…L from the stream's rms after each block (Var = rms²): about 1 for
    the linear growth of independent, equal residual updates; larger for a faster growth."""
    return loglog_slope(list(range(1, len(rms) + 1)), [r * r for r in rms]) if len(rms) > 1 else None


def slope(pts: list[tuple[float, float]]) -> float | None:
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    var = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / var if var else None


def r_squared(xs: list[float], ys: list[float]) -> float | None:
    """R² of the least-squares line y = a + b·x."""
    if len(xs) < 3:
        return None
    b = slope(list(zip(xs, ys, strict=True)))
    if b is None:
        return None
    my, mx = sum(ys) / len(ys), sum(xs) / len(xs)
    total = sum((y - my) ** 2 for y in ys)
    resid = sum((y - (my + b * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    return 1 - resid / total if total else None


# --- selecting rows, and what a table cell says about its runs

def select(rows: list[dict[str, Any]], **axes: Any) -> list[dict[str, Any]]:
    """The rows whose grid values equal ``axes`` (compared as text; a dotted key is passed with ``__`` for ``.``,
    e.g. ``model__n_layers=24``)."""
    want = {k.replace("__", "."): str(v) for k, v in axes.items()}
    return [r for r in rows if all(str(r.get(k)) == v for k, v in want.items())]


def seeds(rows: list[dict[str, Any]], value: str | Callable[[dict], float | None], **axes: Any
          ) -> dict[str, float | None]:
    """``{seed: value}`` of the rows selected by ``axes``."""
    chosen = select(rows, **axes)
    return per_seed(chosen, value)


def final_or_inf(row: dict[str, Any]) -> float | None:
    """The final val loss, +∞ for a diverged run (a gap or a penalty then reads as infinite)."""
    return math.inf if row.get("status") == "diverged" else row.get("final_val_loss")


def difference(a: float | None, b: float | None) -> float | None:
    """a − b of two final losses, where both infinite (both diverged) is no difference."""
    if a is None or b is None:
        return None
    return 0.0 if math.isinf(a) and math.isinf(b) and a == b else a - b


def minus(a: float | None, b: float | None) -> float | None:
    """a − b of two finite measurements (None where either is missing)."""
    return a - b if a is not None and b is not None else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b of two positive measurements (None where either is missing, zero or not finite)."""
    return a / b if a is not None and b and math.isfinite(a) and math.isfinite(b) else None


def absolute(x: float | None) -> float | None:
    """|x|, None kept."""
    return None if x is None else abs(x)


def paired(a: dict[str, float | None], b: dict[str, float | None], op: Callable[[float, float], float | None]
           ) -> dict[str, float | None]:
    """``op(a[seed], b[seed])`` seed by seed (None where either is missing)."""
    return {s: (op(v, b[s]) if v is not None and b.get(s) is not None else None) for s, v in a.items()}


LABELS = ("collapsed", "above_line", "plateaued", "undertrained")  # normtrain/training/outcome.py
SHORT = {"collapsed": "coll", "above_line": "above", "plateaued": "plat", "undertrained": "short"}


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many runs, and how many of them diverged or carry each label (normtrain/training/outcome.py)."""
    return {"n": len(rows), "diverged": sum(r.get("status") == "diverged" for r in rows),
            **{label: sum(r.get(label) is True for r in rows) for label in LABELS}}


def cell(values: Iterable[float | None], rows: list[dict[str, Any]]) -> str:
    """A table cell of trained runs: ``mean ± sd (n=3; 0 div, 1 coll)`` (+ ``, 2 above``, ``, 1 plat``, ``, 2 short``
    where runs ended above the unigram line, plateaued on it, or were still falling)."""
    c = counts(rows)
    flags = ", ".join([f"{c['diverged']} div", f"{c['collapsed']} coll",
                       *(f"{c[k]} {SHORT[k]}" for k in LABELS[1:] if c[k])])
    text = spread(values)
    if text.endswith(")") and "(n=" in text:
        return text[:-1] + f"; {flags})"
    return f"{text} (n={c['n']}; {flags})"


CELL_NOTE = ("cells give mean ± sd over seeds (n), then how many of the cell's runs diverged (div), collapsed (coll: "
             "flat on the unigram line), ended above it (above), sat on it and then left it (plat) and were still "
             "falling over their last quarter (short)")


def cell_counts(rows: list[dict[str, Any]], axes: Sequence[str]) -> list[dict[str, Any]]:
    """Per cell of the grid (every axis but the seed): its values and the counts of ``counts``."""
    keys = sorted({tuple(str(r.get(a)) for a in axes) for r in rows})
    return [{**dict(zip(axes, key, strict=True)), **counts([r for r in rows
                                                             if tuple(str(r.get(a)) for a in axes) == key])}
            for key in keys]


def unigram_of(rows: list[dict[str, Any]]) -> float | None:
    """The experiment's unigram baseline (the same eval windows in every run); None for forward-only ones."""
    values = {round(r["unigram_val_loss"], 9) for r in rows if r.get("unigram_val_loss") is not None}
    return min(values) if values else None


def margin_below(unigram: float | None, losses: dict[str, float | None]) -> dict[str, float | None]:
    """unigram − loss per seed: how far below the unigram line a run ended (the trainability guard's measure)."""
    return {s: (unigram - v if unigram is not None and v is not None else None) for s, v in losses.items()}
