"""Speed of the fused Triton RMSNorm against the alternatives, on one CUDA GPU (not a test).

Three measurements, side by side in one run, each against torch's own RMSNorm on the same shapes:

* **kernels**: for each width N (256 ... 16384 by default, rows M = 2^27 / N so that every case moves the same
  bytes, far more than L2 holds, and the GPU's time exceeds the host's, the autograd engine's included; bf16)
  the forward, and the backward (dx and dw, from a kept graph), of ours
  (``normtrain``), ``torch.nn.functional.rms_norm`` (``F.rms_norm``), ``torch.compile`` of the torch formula
  (``compile``) and Liger-Kernel (``liger``, when importable). Bandwidth counts the bytes an ideal kernel moves
  (x read and y written forward; x and dy read and dx written backward; the weight is negligible); ``% copy``
  divides it by the device's copy bandwidth, ``y.copy_(x)`` over a 1-GiB buffer (2 GiB moved).
* **host**: wall time per call on a tiny input (16 × 768 by default), where launching, not the GPU, sets the rate:
  forward (no grad), forward of a graph, forward + backward; for ours with the direct launcher and with triton's
  own launch path (the candidates of issue 36), and for F.rms_norm and Liger. A cProfile of our forward +
  backward says where the rest goes.
* **sweep** (``--sweep``): other launch heuristics (the forward's elements per program at narrow widths, the
  backward's programs per SM and elements per program), to see what the defaults leave on the table.

The targets (issue 36) are printed PASS/FAIL with their numbers, and everything goes to ``--out`` as JSON:

    python scripts/bench_rmsnorm.py [--widths 256 768 ...] [--elements 33554432] [--sweep] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import sys
import time
from pathlib import Path

import torch

WIDTHS = [256, 512, 768, 1024, 2048, 4096, 8192, 16384]
OPS = ["fwd", "bwd"]
EPS = 1e-6
TRAFFIC = {"fwd": 2, "bwd": 3}  # tensors of M x N an ideal kernel reads or writes
TARGETS = {"fwd": 0.90, "bwd": 0.80}  # fraction of copy bandwidth (issue 36, must-have 3)
HOST_TARGETS = {"fwd": 30.0, "fwd+bwd": 80.0}  # µs a call on a 16 x 768 input (must-have 1)


def median_us(fn, grad_to_none=None) -> float:
    from triton.testing import do_bench  # flushes L2 between runs

    ms = do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, quantiles=[0.5])
    return 1000 * (ms[0] if isinstance(ms, (list, tuple)) else ms)


def copy_bandwidth_gbs(gib: float = 1.0) -> float:
    """GB/s of ``y.copy_(x)`` with x of ``gib`` GiB: bytes read plus bytes written over the time."""
    bufs = [torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda").random_()]
    bufs.append(torch.empty_like(bufs[0]))
    us = median_us(lambda: bufs[1].copy_(bufs[0]))
    bufs.clear()
    torch.cuda.empty_cache()
    return 2 * gib * 2**30 / us / 1e3


def implementations(n: int) -> dict:
    """name -> f(x, w) returning y."""
    from normtrain.ops.rmsnorm import _rms_norm_torch, rms_norm

    impls = {
        "normtrain": lambda x, w: rms_norm(x, w, EPS, impl="triton"),
        "F.rms_norm": lambda x, w: torch.nn.functional.rms_norm(x, (n,), w, EPS),
        "compile": torch.compile(lambda x, w: _rms_norm_torch(x, w, EPS), dynamic=False),
    }
    liger = liger_norm(n)
    if liger is not None:
        impls["liger"] = liger
    return impls


def liger_norm(n: int):
    """Liger-Kernel's RMSNorm as f(x, w) (its module holds the weight), or None when it is not installed."""
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    except Exception as e:  # noqa: BLE001 - an optional competitor; say why it is missing and go on
        print(f"liger: not benchmarked ({type(e).__name__}: {e})", file=sys.stderr)
        return None
    return lambda x, w: LigerRMSNormFunction.apply(x, w, EPS)


def time_op(fn, op: str, m: int, n: int) -> float:
    """Median microseconds of one op for rows (m, n) in bf16."""
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(1 + 0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16))
    if op == "fwd":
        with torch.no_grad():
            return median_us(lambda: fn(x, w))
    y = fn(x, w)
    dy = torch.randn_like(y)
    return median_us(lambda: torch.autograd.backward([y], [dy], retain_graph=True), grad_to_none=[x, w])


def kernel_table(widths, elements: int, copy_gbs: float, only=None, compile_widths=None) -> list[dict]:
    rows = []
    for n in widths:
        m = max(1, elements // n)
        torch._dynamo.reset()
        impls = {k: f for k, f in implementations(n).items() if (only is None or k in only)
                 and (k != "compile" or compile_widths is None or n in compile_widths)}
        for op in OPS:
            nbytes = TRAFFIC[op] * m * n * 2
            timed = {}
            for name, fn in impls.items():
                try:
                    timed[name] = time_op(fn, op, m, n)
                except Exception as e:  # noqa: BLE001 - e.g. a competitor's failure; record and go on
                    print(f"  {name} {op} N={n}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
                torch.cuda.empty_cache()
            for name, us in timed.items():
                gbs = nbytes / us / 1e3
                row = {"n": n, "m": m, "op": op, "impl": name, "us": us, "gb_s": gbs, "frac_copy": gbs / copy_gbs}
                rows.append(row)
                print(f"N={n:6d} M={m:7d} {op:4s} {name:11s} {us:9.1f} us {gbs:7.0f} GB/s "
                      f"{100 * row['frac_copy']:5.1f}% copy", flush=True)
    return rows


def per_call_us(fn, calls: int) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return 1e6 * (time.perf_counter() - t) / calls


def host_overhead(rows: int, n: int, calls: int = 2000) -> dict:
    """µs per call on a (rows, n) bf16 input: forward without grad, forward of a graph, forward + backward."""
    from normtrain.ops import launch

    x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(n, device="cuda", dtype=torch.bfloat16))
    dy = torch.randn_like(x)
    impls = implementations(n)
    impls.pop("compile")
    out = {}
    for name, fn in impls.items():
        variants = [(name, fn, True)]
        if name == "normtrain":
            variants = [("normtrain (direct launch)", fn, True), ("normtrain (triton launch)", fn, False)]
        for label, f, direct in variants:
            launch.set_direct(direct)
            try:
                def nograd(f=f):
                    with torch.no_grad():
                        f(x, w)
                out[label] = {"fwd": per_call_us(nograd, calls), "fwd (graph)": per_call_us(lambda f=f: f(x, w), calls),
                              "fwd+bwd": per_call_us(lambda f=f: f(x, w).backward(dy), calls)}
            finally:
                launch.set_direct(True)
            print(f"host {label:27s} " + "  ".join(f"{k} {v:6.1f} us" for k, v in out[label].items()), flush=True)
    return out


def host_profile(rows: int, n: int, calls: int = 500) -> str:
    """cProfile of our forward + backward on the tiny input: where the host time goes."""
    from normtrain.ops import rms_norm

    x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(n, device="cuda", dtype=torch.bfloat16))
    dy = torch.randn_like(x)
    for _ in range(20):
        rms_norm(x, w, EPS).backward(dy)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        rms_norm(x, w, EPS).backward(dy)
    torch.cuda.synchronize()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(20)
    return text.getvalue()


def sweep(elements: int, copy_gbs: float) -> list[dict]:
    """Other launch heuristics than the defaults: the forward's elements per program at narrow widths; the
    backward's programs per SM (warps per SM) and elements per program, tiled and looped."""
    from normtrain.ops import rms_norm
    from normtrain.ops import rmsnorm_triton as T

    saved = (T.BWD_WARPS_PER_SM, T.TILE_ELEMS, T.BWD_TILE_ELEMS)
    ours = lambda x, w: rms_norm(x, w, EPS, impl="triton")  # noqa: E731
    cases = [("fwd", n, T.BWD_WARPS_PER_SM, tile) for n in (256, 768) for tile in (1024, 4096)]
    cases += [("bwd", n, wps, tile) for n in (768, 4096) for wps in (16, 32, 64) for tile in (2048, 8192)]
    cases += [("bwd", 16384, wps, T.BWD_TILE_ELEMS) for wps in (16, 64)]
    rows = []
    try:
        for op, n, warps_per_sm, tile in cases:
            m = max(1, elements // n)
            T.BWD_WARPS_PER_SM = warps_per_sm
            if op == "fwd":
                T.TILE_ELEMS = tile
            else:
                T.BWD_TILE_ELEMS = tile
            us = time_op(ours, op, m, n)
            frac = TRAFFIC[op] * m * n * 2 / us / 1e3 / copy_gbs
            rows.append({"op": op, "n": n, "warps_per_sm": warps_per_sm, "tile_elems": tile, "us": us,
                         "frac_copy": frac})
            print(f"sweep {op} N={n} warps/SM {warps_per_sm} tile {tile}: {us:.1f} us {100 * frac:.1f}% copy",
                  flush=True)
    finally:
        T.BWD_WARPS_PER_SM, T.TILE_ELEMS, T.BWD_TILE_ELEMS = saved
    return rows


def check_targets(rows: list[dict], host: dict) -> list[dict]:
    """Issue 36's kernel targets, one dict each: what, the number, and met (True/False)."""
    by = {(r["n"], r["op"], r["impl"]): r for r in rows}
    checks = []
    for (n, op, impl), r in sorted(by.items()):
        if impl != "normtrain":
            continue
        floor = TARGETS[op]
        checks.append({"what": f"{op} N={n}: >= {floor:.0%} of copy", "value": f"{r['frac_copy']:.1%}",
                       "met": r["frac_copy"] >= floor})
        liger = by.get((n, op, "liger"))
        if liger is not None:
            checks.append({"what": f"{op} N={n}: >= Liger", "value": f"{liger['us'] / r['us']:.2f}x Liger",
                           "met": r["us"] <= liger["us"]})
    ours = host.get("normtrain (direct launch)")
    if ours:
        for key, limit in HOST_TARGETS.items():
            checks.append({"what": f"host {key} <= {limit:.0f} us", "value": f"{ours[key]:.1f} us",
                           "met": ours[key] <= limit})
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--widths", type=int, nargs="+", default=WIDTHS, help="hidden sizes N")
    parser.add_argument("--elements", type=int, default=2**27, help="M * N of every case (default 2^27)")
    parser.add_argument("--impls", nargs="+", default=None, help="only these (normtrain, F.rms_norm, compile, liger)")
    parser.add_argument("--compile-widths", type=int, nargs="+", default=None,
                        help="time torch.compile at these widths only (each width compiles anew: seconds each)")
    parser.add_argument("--host-shape", type=int, nargs=2, default=(16, 768), metavar=("ROWS", "N"))
    parser.add_argument("--skip", nargs="*", default=[], choices=["kernels", "host", "profile"])
    parser.add_argument("--sweep", action="store_true", help="also time the backward at other launch heuristics")
    parser.add_argument("--out", type=Path, default=None, help="write every figure as JSON")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_rmsnorm.py needs a CUDA GPU (torch.cuda.is_available() is False); on a CPU the kernels only "
              "run interpreted, for tests (pytest tests/ops)", file=sys.stderr)
        return 2
    import triton

    device = torch.cuda.get_device_name()
    copy_gbs = copy_bandwidth_gbs()
    print(f"{device}, torch {torch.__version__}, triton {triton.__version__}, bf16; copy bandwidth "
          f"{copy_gbs:.0f} GB/s (y.copy_(x), 1 GiB)", flush=True)
    result = {"device": device, "torch": torch.__version__, "triton": triton.__version__,
              "python": platform.python_version(), "dtype": "bfloat16", "elements": args.elements,
              "copy_gb_s": copy_gbs, "host_shape": list(args.host_shape)}
    def save() -> None:  # after every section: a run stopped by a time limit keeps what it measured
        result["targets"] = check_targets(result.get("results", []), result.get("host_us", {}))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2) + "\n")

    result["host_us"] = {} if "host" in args.skip else host_overhead(*args.host_shape)
    save()
    result["results"] = [] if "kernels" in args.skip else kernel_table(args.widths, args.elements, copy_gbs,
                                                                       args.impls, args.compile_widths)
    save()
    if "profile" not in args.skip:
        result["host_profile"] = host_profile(*args.host_shape)
        print(result["host_profile"])
    if args.sweep:
        result["sweep"] = sweep(args.elements, copy_gbs)
    save()
    print("targets (issue 36):")
    for c in result["targets"]:
        print(f"  {'MET ' if c['met'] else 'MISS'} {c['what']}: {c['value']}")
    if args.out:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
