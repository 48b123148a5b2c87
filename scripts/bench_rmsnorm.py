"""Speed of the fused Triton RMSNorm against the alternatives, on one CUDA GPU (not a test).

For each width N (rows M fixed, bf16) and each op (forward, backward, forward+backward, residual
add+norm forward and forward+backward) it times, side by side: ours (`normtrain`), the torch eager
composite (`torch`), `torch.nn.functional.rms_norm` (`F.rms_norm`), `torch.compile` of the composite
(`compile`), Liger-Kernel (`liger`, if importable) and, for add+norm, our norm after a separate add
(`normtrain_unfused`). Bandwidth counts the bytes an ideal kernel moves (each tensor read or written
once); `%copy` divides it by the bandwidth of `y.copy_(x)` over the same number of bytes. Usage:

    python scripts/bench_rmsnorm.py [--rows 16384] [--widths 256 512 ...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

WIDTHS = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
OPS = ["fwd", "bwd", "fwd+bwd", "add+norm fwd", "add+norm fwd+bwd"]
EPS = 1e-6
# Tensors of M x N an ideal kernel reads or writes: x,y | x,dy,dx | both | x,r,y,s | + dy,ds,s,dx,dr.
TRAFFIC = {"fwd": 2, "bwd": 3, "fwd+bwd": 5, "add+norm fwd": 4, "add+norm fwd+bwd": 9}


def median_us(fn, grad_to_none=None) -> float:
    from triton.testing import do_bench  # flushes L2 between runs

    ms = do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, quantiles=[0.5])
    return 1000 * (ms[0] if isinstance(ms, (list, tuple)) else ms)


def implementations(n: int) -> dict:
    """name -> f(x, w, residual) returning y, or (y, s) when a residual is given."""
    from normtrain.ops import rms_norm

    def composite(x, w, r=None):
        return rms_norm(x, w, EPS, impl="torch", residual=r)

    def add_then(norm):  # a norm without residual fusion: add, then normalize the sum
        def run(x, w, r=None):
            if r is None:
                return norm(x, w)
            s = x + r
            return norm(s, w), s
        return run

    impls = {
        "normtrain": lambda x, w, r=None: rms_norm(x, w, EPS, impl="triton", residual=r),
        "torch": composite,
        "F.rms_norm": add_then(lambda x, w: torch.nn.functional.rms_norm(x, (n,), w, EPS)),
        "compile": torch.compile(composite, dynamic=False),
        "normtrain_unfused": add_then(lambda x, w: rms_norm(x, w, EPS, impl="triton")),
    }
    try:
        from liger_kernel.transformers.rms_norm import LigerRMSNorm

        liger = LigerRMSNorm(n, eps=EPS).cuda().to(torch.bfloat16)

        def run_liger(x, w):
            liger.weight = w if isinstance(w, torch.nn.Parameter) else torch.nn.Parameter(w)
            return liger(x)

        impls["liger"] = add_then(run_liger)
    except Exception as e:  # noqa: BLE001 - an optional competitor; say why it is missing and go on
        print(f"liger: not benchmarked ({type(e).__name__}: {e})", file=sys.stderr)
    return impls


def time_op(fn, op: str, m: int, n: int) -> float:
    """Median microseconds of one op for rows (m, n) in bf16."""
    residual = op.startswith("add+norm")
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(1 + 0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16))
    r = torch.randn_like(x, requires_grad=True) if residual else None
    leaves = [t for t in (x, w, r) if t is not None]
    call = (lambda: fn(x, w, r)) if residual else (lambda: fn(x, w))
    if op in ("fwd", "add+norm fwd"):
        with torch.no_grad():
            return median_us(call)
    outs = call()
    outs = list(outs) if residual else [outs]
    grads = [torch.randn_like(o) for o in outs]
    if op == "bwd":
        return median_us(lambda: torch.autograd.backward(outs, grads, retain_graph=True), grad_to_none=leaves)
    return median_us(lambda: torch.autograd.backward(list(call()) if residual else [call()], grads),
                     grad_to_none=leaves)


_COPY: dict[int, float] = {}


def copy_us(nbytes: int) -> float:
    """Microseconds of y.copy_(x) moving `nbytes` in all (half read, half written)."""
    if nbytes not in _COPY:
        x = torch.empty(nbytes // 4, dtype=torch.uint8, device="cuda").random_()
        y = torch.empty_like(x)
        _COPY[nbytes] = median_us(lambda: y.copy_(x))
    return _COPY[nbytes]


def host_overhead_us(calls: int = 2000) -> dict:
    """CPU time per call on a tiny input, where launching, not the GPU, bounds the rate."""
    from normtrain.ops import rms_norm

    x = torch.randn(4, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(256, device="cuda", dtype=torch.bfloat16))
    cases = {"fwd": lambda: rms_norm(x.detach(), w.detach(), EPS, impl="triton"),
             "fwd+bwd": lambda: rms_norm(x, w, EPS, impl="triton").sum().backward()}
    out = {}
    for name, fn in cases.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out[name] = 1e6 * (time.perf_counter() - t) / calls
    return out


def check_targets(rows: list[dict], host: dict) -> list[str]:
    """The issue's H100 targets, one line each: PASS, FAIL or n/a (not measured)."""
    ours = {(r["n"], r["op"]): r for r in rows if r["impl"] == "normtrain"}
    lines = []

    def target(what: str, ok: bool | None) -> None:
        lines.append(f"{'n/a ' if ok is None else 'PASS' if ok else 'FAIL'} {what}")

    for n, op, floor in [(n, "fwd", 0.9 if 1024 <= n <= 32768 else 0.7) for n in WIDTHS] + \
                        [(n, "bwd", 0.8) for n in WIDTHS]:
        r = ours.get((n, op))
        target(f"{op} N={n}: >= {floor:.0%} of copy bandwidth"
               + (f" ({r['frac_copy']:.0%})" if r else ""), None if r is None else r["frac_copy"] >= floor)
    for n in WIDTHS:
        r = ours.get((n, "bwd"))
        target(f"bwd N={n}: >= 2x torch.compile", None if r is None else r["speedup_vs_compile"] >= 2)
        r = ours.get((n, "add+norm fwd"))
        target(f"add+norm fwd N={n}: >= 1.25x add then norm",
               None if r is None or "speedup_vs_unfused" not in r else r["speedup_vs_unfused"] >= 1.25)
    target(f"host overhead <= 20 us a call ({host['fwd+bwd']:.1f} us fwd+bwd)", host["fwd+bwd"] <= 20)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=16384, help="M, rows per call (default 16384)")
    parser.add_argument("--widths", type=int, nargs="+", default=WIDTHS, help="hidden sizes N")
    parser.add_argument("--ops", nargs="+", default=OPS, choices=OPS)
    parser.add_argument("--impls", nargs="+", default=None, help="only these implementations")
    parser.add_argument("--out", type=Path, default=None, help="write every figure as JSON")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_rmsnorm.py needs a CUDA GPU (torch.cuda.is_available() is False); "
                 "on a CPU the kernels only run interpreted, for tests (pytest tests/ops)")
    import triton

    device = torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}, triton {triton.__version__}, M={args.rows}, bf16")
    rows = []
    for n in args.widths:
        torch._dynamo.reset()
        impls = implementations(n)
        for op in args.ops:
            nbytes = TRAFFIC[op] * args.rows * n * 2
            copy_gbs = nbytes / copy_us(nbytes) / 1e3
            names = [k for k in impls if (args.impls is None or k in args.impls)
                     and (k != "normtrain_unfused" or op.startswith("add+norm"))]
            timed = {}
            for name in names:
                try:
                    timed[name] = time_op(impls[name], op, args.rows, n)
                except Exception as e:  # noqa: BLE001 - e.g. out of memory at 65536; record and go on
                    print(f"  {name} {op} N={n}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
                torch.cuda.empty_cache()
            for name, us in timed.items():
                gbs = nbytes / us / 1e3
                row = {"n": n, "op": op, "impl": name, "us": us, "gb_s": gbs, "frac_copy": gbs / copy_gbs,
                       "speedup_vs_torch": timed.get("torch", float("nan")) / us,
                       "speedup_vs_compile": timed.get("compile", float("nan")) / us}
                if "normtrain_unfused" in timed:
                    row["speedup_vs_unfused"] = timed["normtrain_unfused"] / us
                rows.append(row)
                print(f"N={n:6d} {op:17s} {name:18s} {us:9.1f} us {gbs:7.0f} GB/s "
                      f"{100 * row['frac_copy']:5.1f}% copy  x{row['speedup_vs_torch']:.2f} torch  "
                      f"x{row['speedup_vs_compile']:.2f} compile", flush=True)
    host = host_overhead_us()
    print(f"host overhead per call (tiny input): fwd {host['fwd']:.1f} us, fwd+bwd {host['fwd+bwd']:.1f} us")
    targets = check_targets(rows, host)
    print("\n".join(["targets (H100):", *targets]))
    result = {"device": device, "torch": torch.__version__, "triton": triton.__version__, "rows": args.rows,
              "dtype": "bfloat16", "python": platform.python_version(), "host_overhead_us": host,
              "targets": targets, "results": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
