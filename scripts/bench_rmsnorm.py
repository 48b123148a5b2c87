"""Speed of the fused Triton RMSNorm against the alternatives, on one CUDA GPU (not a test).

Three measurements, side by side in one run, each against torch's own RMSNorm on the same shapes:

* **kernels**: for each width N (256 ... 16384 by default, rows M = 2^27 / N so that every case moves the same
  bytes, far more than L2 holds, and the GPU's time exceeds the host's, the autograd engine's included; bf16)
  the forward, and the backward (dx and dw, from a kept graph), of ours with each backward side by side
  (``normtrain``: the default tile backward; ``normtrain-rows``: the blocked-rows one, ``NORMTRAIN_RMSNORM_BWD=rows``),
  ``torch.nn.functional.rms_norm`` (``F.rms_norm``), ``torch.compile`` of the torch formula
  (``compile``) and Liger-Kernel (``liger``, when importable). Bandwidth counts the bytes an ideal kernel moves
  (x read and y written forward; x and dy read and dx written backward; the weight is negligible); ``% copy``
  divides it by the device's copy bandwidth, ``y.copy_(x)`` over a 1-GiB buffer (2 GiB moved).
* **host**: wall time per call on a tiny input (16 × 768 by default), where launching, not the GPU, sets the rate:
  forward (no grad), forward of a graph, forward + backward; for ours with the direct launcher and with triton's
  own launch path (the candidates of issue 36), and for F.rms_norm and Liger. A cProfile of our forward +
  backward says where the rest goes.
* **sweep** (``--sweep``): other launch heuristics (the forward's elements per program at narrow widths, the
  backward's programs per SM and elements per program), to see what the defaults leave on the table.
* **sweep-rows** (``--sweep-rows``): the rows backward's block sizes and programs per SM at each width; the fastest
  configuration per width is recorded with the device's name (``sweep_rows.chosen``), for its defaults.

The targets (issues 36 and 58) are printed MET/MISS with their numbers, and everything goes to ``--out`` as JSON:

    python scripts/bench_rmsnorm.py [--widths 256 768 ...] [--elements 33554432] [--sweep] [--sweep-rows] [--out F]
    python scripts/bench_rmsnorm.py --dry-run   # every section on CPU, tiny shapes, Triton's interpreter: no timings
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_rmsnorm_sweep as sweep_mod  # noqa: E402

WIDTHS = [256, 512, 768, 1024, 2048, 4096, 8192, 16384]
OPS = ["fwd", "bwd"]
EPS = 1e-6
TRAFFIC = {"fwd": 2, "bwd": 3}  # tensors of M x N an ideal kernel reads or writes
TARGETS = {"fwd": 0.90, "bwd": 0.80}  # fraction of copy bandwidth (issue 36, must-have 3)
HOST_TARGETS = {"fwd": 30.0, "fwd+bwd": 80.0}  # µs a call on a 16 x 768 input (must-have 1)
OURS = {"normtrain": "tile", "normtrain-rows": "rows"}  # our implementations: the backward each launches


@dataclass
class Mode:
    """Where this run times: a CUDA GPU, or (``--dry-run``) the CPU under Triton's interpreter, every section
    on tiny shapes, its times meaningless and no target judged."""

    device: str = "cuda"
    dry: bool = False
    copy_gib: float = 1.0  # the copy that sets the bandwidth: >= 1 GiB on a GPU (2 GiB moved)
    host_calls: int = 2000
    compile_backend: str = "inductor"


MODE = Mode()


def sync() -> None:
    if MODE.device == "cuda":
        torch.cuda.synchronize()


def median_us(fn, grad_to_none=None) -> float:
    if MODE.dry:  # one call after a warm-up one: the path runs, the number means nothing
        fn()
        t = time.perf_counter()
        fn()
        return 1e6 * (time.perf_counter() - t)
    from triton.testing import do_bench  # flushes L2 between runs

    ms = do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, quantiles=[0.5])
    return 1000 * (ms[0] if isinstance(ms, (list, tuple)) else ms)


def copy_bandwidth_gbs(gib: float) -> float:
    """GB/s of ``y.copy_(x)`` with x of ``gib`` GiB: bytes read plus bytes written over the time."""
    bufs = [torch.empty(int(gib * 2**30), dtype=torch.uint8, device=MODE.device).random_()]
    bufs.append(torch.empty_like(bufs[0]))
    us = median_us(lambda: bufs[1].copy_(bufs[0]))
    bufs.clear()
    if MODE.device == "cuda":
        torch.cuda.empty_cache()
    return 2 * gib * 2**30 / us / 1e3


def ours(kind: str):
    """Our RMSNorm as f(x, w) with the ``kind`` backward: chosen at each forward, so the backward of the graph it
    builds (run later, by autograd) launches that kernel."""
    from normtrain.ops import rms_norm, set_backward

    def f(x, w):
        set_backward(kind)
        return rms_norm(x, w, EPS, impl="triton")

    return f


def implementations(n: int) -> dict:
    """name -> f(x, w) returning y."""
    from normtrain.ops.rmsnorm import _rms_norm_torch

    impls = {name: ours(kind) for name, kind in OURS.items()}
    impls["F.rms_norm"] = lambda x, w: torch.nn.functional.rms_norm(x, (n,), w, EPS)
    impls["compile"] = torch.compile(lambda x, w: _rms_norm_torch(x, w, EPS), dynamic=False,
                                     backend=MODE.compile_backend)
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
    x = torch.randn(m, n, device=MODE.device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(1 + 0.1 * torch.randn(n, device=MODE.device, dtype=torch.bfloat16))
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
                if MODE.device == "cuda":
                    torch.cuda.empty_cache()
            for name, us in timed.items():
                gbs = nbytes / us / 1e3
                row = {"n": n, "m": m, "op": op, "impl": name, "us": us, "gb_s": gbs, "frac_copy": gbs / copy_gbs}
                rows.append(row)
                print(f"N={n:6d} M={m:7d} {op:4s} {name:14s} {us:9.1f} us {gbs:7.0f} GB/s "
                      f"{100 * row['frac_copy']:5.1f}% copy", flush=True)
    return rows


def per_call_us(fn, calls: int) -> float:
    for _ in range(min(50, calls)):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return 1e6 * (time.perf_counter() - t) / calls


def host_overhead(rows: int, n: int, calls: int) -> dict:
    """µs per call on a (rows, n) bf16 input: forward without grad, forward of a graph, forward + backward."""
    from normtrain.ops import launch

    x = torch.randn(rows, n, device=MODE.device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(n, device=MODE.device, dtype=torch.bfloat16))
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


def host_profile(rows: int, n: int, calls: int) -> str:
    """cProfile of our forward + backward on the tiny input: where the host time goes."""
    f = ours("tile")
    x = torch.randn(rows, n, device=MODE.device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(n, device=MODE.device, dtype=torch.bfloat16))
    dy = torch.randn_like(x)
    for _ in range(min(20, calls)):
        f(x, w).backward(dy)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        f(x, w).backward(dy)
    sync()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(20)
    return text.getvalue()


def check_targets(rows: list[dict], host: dict) -> list[dict]:
    """Issues 36's and 58's kernel targets for each of ours, one dict each: what, the number, and met (True/False;
    None in a dry run, whose times mean nothing)."""
    by = {(r["n"], r["op"], r["impl"]): r for r in rows}
    checks = []
    for (n, op, impl), r in sorted(by.items()):
        if impl not in OURS or (impl != "normtrain" and op == "fwd"):  # the rows variant differs backward only
            continue
        tag = "" if impl == "normtrain" else f" ({OURS[impl]} backward)"
        floor = TARGETS[op]
        checks.append({"what": f"{op} N={n}{tag}: >= {floor:.0%} of copy", "value": f"{r['frac_copy']:.1%}",
                       "met": r["frac_copy"] >= floor})
        for rival, label in (("liger", "Liger"), ("compile", "torch.compile")):
            other = by.get((n, op, rival))
            if other is not None and (op == "bwd" or rival == "liger"):
                checks.append({"what": f"{op} N={n}{tag}: >= {label}", "value": f"{other['us'] / r['us']:.2f}x "
                               f"{label}", "met": r["us"] <= other["us"]})
    mine = host.get("normtrain (direct launch)")
    if mine:
        for key, limit in HOST_TARGETS.items():
            checks.append({"what": f"host {key} <= {limit:.0f} us", "value": f"{mine[key]:.1f} us",
                           "met": mine[key] <= limit})
    if MODE.dry:
        for c in checks:
            c.update(met=None, value=f"dry run ({c['value']} means nothing)")
    return checks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--widths", type=int, nargs="+", default=None, help="hidden sizes N (default 256 ... 16384)")
    parser.add_argument("--elements", type=int, default=None, help="M * N of every case (default 2^27)")
    parser.add_argument("--impls", nargs="+", default=None,
                        help="only these (normtrain, normtrain-rows, F.rms_norm, compile, liger)")
    parser.add_argument("--compile-widths", type=int, nargs="+", default=None,
                        help="time torch.compile at these widths only (each width compiles anew: seconds each)")
    parser.add_argument("--host-shape", type=int, nargs=2, default=None, metavar=("ROWS", "N"))
    parser.add_argument("--skip", nargs="*", default=[], choices=["kernels", "host", "profile"])
    parser.add_argument("--sweep", action="store_true", help="also time the backward at other launch heuristics")
    parser.add_argument("--sweep-rows", action="store_true",
                        help="also sweep the rows backward's block sizes and programs per SM; record the fastest")
    parser.add_argument("--sweep-rows-widths", type=int, nargs="+", default=None, help="its widths")
    parser.add_argument("--dry-run", action="store_true",
                        help="every section on CPU under Triton's interpreter, tiny shapes: the path, no timings")
    parser.add_argument("--out", type=Path, default=None, help="write every figure as JSON")
    args = parser.parse_args(argv)
    dry = args.dry_run
    args.widths = args.widths or ([96, 9000] if dry else WIDTHS)  # 9000: the rows backward's chunked path
    args.elements = args.elements or (18000 if dry else 2**27)
    args.host_shape = tuple(args.host_shape or ((4, 64) if dry else (16, 768)))
    args.sweep_rows_widths = args.sweep_rows_widths or ([96, 9000] if dry else list(sweep_mod.ROWS_WIDTHS))
    return args


def dry_run_mode() -> None:
    """--dry-run: the CPU, Triton's interpreter (set before triton is first imported), small everything."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    MODE.device, MODE.dry, MODE.copy_gib, MODE.host_calls, MODE.compile_backend = "cpu", True, 2**-10, 3, "aot_eager"


def sections(args, result: dict, copy_gbs: float, save) -> None:
    """Host time, the kernel table, the profile and the sweeps, saved after each (a run stopped keeps them)."""
    calls = MODE.host_calls
    result["host_us"] = {} if "host" in args.skip else host_overhead(*args.host_shape, calls)
    save()
    result["results"] = [] if "kernels" in args.skip else kernel_table(args.widths, args.elements, copy_gbs,
                                                                       args.impls, args.compile_widths)
    save()
    if "profile" not in args.skip:
        result["host_profile"] = host_profile(*args.host_shape, max(3, calls // 4))
        print(result["host_profile"])
    if args.sweep_rows:
        grid = {k: v[:1] + v[-1:] for k, v in sweep_mod.ROWS_GRID.items()} if MODE.dry else None
        result["sweep_rows"] = sweep_mod.sweep_rows(time_op, ours, result["device"], args.elements, copy_gbs,
                                                    args.sweep_rows_widths, grid)
        save()
    if args.sweep:
        widths = ((96,), (96,), 9000) if MODE.dry else ((256, 768), (768, 4096), 16384)
        result["sweep"] = sweep_mod.sweep(time_op, ours, args.elements, copy_gbs, widths)
    save()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        dry_run_mode()
    elif not torch.cuda.is_available():
        print("bench_rmsnorm.py needs a CUDA GPU (torch.cuda.is_available() is False); on a CPU the kernels only "
              "run interpreted, for tests (pytest tests/ops) or --dry-run", file=sys.stderr)
        return 2
    import triton

    device = "dry run on CPU (Triton interpreter)" if MODE.dry else torch.cuda.get_device_name()
    copy_gbs = copy_bandwidth_gbs(MODE.copy_gib)
    print(f"{device}, torch {torch.__version__}, triton {triton.__version__}, bf16; copy bandwidth "
          f"{copy_gbs:.0f} GB/s (y.copy_(x), {MODE.copy_gib:g} GiB)" + (": no timing claims" if MODE.dry else ""),
          flush=True)
    result = {"device": device, "dry_run": MODE.dry, "torch": torch.__version__, "triton": triton.__version__,
              "python": platform.python_version(), "dtype": "bfloat16", "elements": args.elements,
              "copy_gb_s": copy_gbs, "copy_gib": MODE.copy_gib, "host_shape": list(args.host_shape)}

    def save() -> None:
        result["targets"] = check_targets(result.get("results", []), result.get("host_us", {}))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2) + "\n")

    sections(args, result, copy_gbs, save)
    print("targets (issues 36, 58):")
    for c in result["targets"]:
        print(f"  {'-   ' if c['met'] is None else 'MET ' if c['met'] else 'MISS'} {c['what']}: {c['value']}")
    for n, best in result.get("sweep_rows", {}).get("chosen", {}).items():
        print(f"rows backward, fastest at N={n} on {device}: {best['config']} ({best['us']:.1f} us)")
    if args.out:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
