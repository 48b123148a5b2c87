"""The launch-heuristic sweeps of scripts/bench_rmsnorm.py (``--sweep``, ``--sweep-rows``): the same op timed at
other settings of ``normtrain/ops/rmsnorm_triton.py``'s module constants, restored afterwards.

Each sweep takes the timer (``time_op(fn, op, m, n) -> µs``) and our implementation's factory (``ours(kind)``) from
bench_rmsnorm, so that both time exactly what the kernel table times. ``sweep_rows`` keeps the fastest setting per
width, with the device it was measured on: what the rows backward's defaults should become, by measurement.
"""

from __future__ import annotations

import itertools

TRAFFIC_BWD = 3  # tensors of M x N an ideal backward moves (x, dy read; dx written)
ROWS_KNOBS = ("ROWS_TILE_ELEMS", "ROWS_WARPS_PER_SM", "ROWS_CHUNK_N", "ROWS_MAX_INLINE_N")
ROWS_GRID = {  # the rows backward's settings tried at every width (the chunk matters only past the inline width)
    "ROWS_TILE_ELEMS": (2048, 4096, 8192),
    "ROWS_WARPS_PER_SM": (16, 32, 64),
    "ROWS_CHUNK_N": (2048, 4096, 8192),
}
ROWS_WIDTHS = (768, 4096, 8192, 16384)


def _frac(op_tensors: int, m: int, n: int, us: float, copy_gbs: float) -> float:
    return op_tensors * m * n * 2 / us / 1e3 / copy_gbs


def sweep(time_op, ours, elements: int, copy_gbs: float, widths=((256, 768), (768, 4096), 16384)) -> list[dict]:
    """Other launch heuristics than the defaults: the forward's elements per program at narrow widths; the
    default backward's programs per SM (warps per SM) and elements per program, tiled and looped."""
    from normtrain.ops import rmsnorm_triton as T

    saved = (T.BWD_WARPS_PER_SM, T.TILE_ELEMS, T.BWD_TILE_ELEMS)
    fn = ours("tile")
    cases = [("fwd", n, T.BWD_WARPS_PER_SM, elems) for n in widths[0] for elems in (1024, 4096)]
    cases += [("bwd", n, wps, elems) for n in widths[1] for wps in (16, 32, 64) for elems in (2048, 8192)]
    cases += [("bwd", widths[2], wps, T.BWD_TILE_ELEMS) for wps in (16, 64)]
    rows = []
    try:
        for op, n, warps_per_sm, elems in cases:
            m = max(1, elements // n)
            T.BWD_WARPS_PER_SM = warps_per_sm
            if op == "fwd":
                T.TILE_ELEMS = elems
            else:
                T.BWD_TILE_ELEMS = elems
            us = time_op(fn, op, m, n)
            frac = _frac(2 if op == "fwd" else TRAFFIC_BWD, m, n, us, copy_gbs)
            rows.append({"op": op, "n": n, "warps_per_sm": warps_per_sm, "tile_elems": elems, "us": us,
                         "frac_copy": frac})
            print(f"sweep {op} N={n} warps/SM {warps_per_sm} tile {elems}: {us:.1f} us {100 * frac:.1f}% copy",
                  flush=True)
    finally:
        T.BWD_WARPS_PER_SM, T.TILE_ELEMS, T.BWD_TILE_ELEMS = saved
    return rows


def rows_settings(n: int, grid: dict) -> list[dict]:
    """The settings of the rows backward worth trying at width n: the chunk only where the row is chunked."""
    from normtrain.ops import rmsnorm_triton as T

    keys = [k for k in grid if k != "ROWS_CHUNK_N" or 1 << (n - 1).bit_length() > T.ROWS_MAX_INLINE_N]
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def sweep_rows(time_op, ours, device: str, elements: int, copy_gbs: float, widths=ROWS_WIDTHS,
               grid=None) -> dict:
    """The rows backward at every setting of ``grid`` (default ``ROWS_GRID``) and width; ``chosen``: the fastest
    per width, named with ``device``. A setting that fails (a compile error, too many resources) is recorded."""
    from normtrain.ops import rmsnorm_triton as T

    saved = {k: getattr(T, k) for k in ROWS_KNOBS}
    fn = ours("rows")
    tried, chosen = [], {}
    try:
        for n in widths:
            m = max(1, elements // n)
            for setting in rows_settings(n, grid or ROWS_GRID):
                for k, v in {**saved, **setting}.items():
                    setattr(T, k, v)
                row = {"n": n, "m": m, **{k.lower(): v for k, v in setting.items()},
                       "config": list(T.rows_config(n, T._rows_limits()))}
                try:
                    row["us"] = time_op(fn, "bwd", m, n)
                    row["frac_copy"] = _frac(TRAFFIC_BWD, m, n, row["us"], copy_gbs)
                except Exception as e:  # noqa: BLE001 - one setting failing must not lose the others
                    row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
                tried.append(row)
                print("sweep-rows " + " ".join(f"{k} {v}" for k, v in row.items()), flush=True)
            ok = [r for r in tried if r["n"] == n and "us" in r]
            if ok:
                chosen[str(n)] = min(ok, key=lambda r: r["us"])
    finally:
        for k, v in saved.items():
            setattr(T, k, v)
    return {"device": device, "defaults": {k.lower(): v for k, v in saved.items()}, "tried": tried,
            "chosen": chosen}
