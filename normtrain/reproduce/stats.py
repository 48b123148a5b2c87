"""Seeds and spread: per-seed values grouped by condition, summarized as mean ± sd (n), and growth fits.

Every number a reproduction reports comes from its seeds: the tables give mean ± sample sd and n, the figures
show each seed, and the checks (normtrain.reproduce.preregistration) decide on the per-seed values.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from normtrain.util.numbers import number
from normtrain.util.spread import mean_sd

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


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many runs, and how many of them diverged, collapsed or ended undertrained (normtrain/training/outcome.py)."""
    return {"n": len(rows), "diverged": sum(r.get("status") == "diverged" for r in rows),
            "collapsed": sum(bool(r.get("collapsed")) for r in rows),
            "undertrained": sum(bool(r.get("undertrained")) for r in rows)}


def cell(values: Iterable[float | None], rows: list[dict[str, Any]]) -> str:
    """A table cell of trained runs: ``mean ± sd (n=3; 0 div, 1 coll)`` (+ ``, 2 short`` for undertrained runs)."""
    c = counts(rows)
    flags = f"{c['diverged']} div, {c['collapsed']} coll" + (f", {c['undertrained']} short" if c["undertrained"]
                                                              else "")
    text = spread(values)
    if text.endswith(")") and "(n=" in text:
        return text[:-1] + f"; {flags})"
    return f"{text} (n={c['n']}; {flags})"


CELL_NOTE = ("cells give mean ± sd over seeds (n), then how many of the cell's runs diverged (div), collapsed on "
             "the unigram line (coll) and ended undertrained, still falling above it (short)")


def cell_counts(rows: list[dict[str, Any]], axes: Sequence[str]) -> list[dict[str, Any]]:
    """Per cell of the grid (every axis but the seed): its values and the counts of ``counts``."""
    keys = sorted({tuple(str(r.get(a)) for a in axes) for r in rows})
    return [{**dict(zip(axes, key, strict=True)), **counts([r for r in rows
                                                             if tuple(str(r.get(a)) for a in axes) == key])}
            for key in keys]


def margin_below(unigram: float | None, losses: dict[str, float | None]) -> dict[str, float | None]:
    """unigram − loss per seed: how far below the unigram line a run ended (the trainability guard's measure)."""
    return {s: (unigram - v if unigram is not None and v is not None else None) for s, v in losses.items()}
