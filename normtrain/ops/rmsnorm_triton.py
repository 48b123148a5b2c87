"""The fused Triton RMSNorm's host side: launch configuration, the forward and backward launches, the
``autograd.Function`` that eager mode calls and the ``torch.library.triton_op``s that torch.compile traces.

Host time is a design constraint here, not an afterthought: a GPT-2-small step runs 25 norms forward and backward,
and a norm whose launch costs the host 100 µs makes a 50-ms step host-bound. So a call allocates only its outputs,
keeps no tensor it does not need (the backward recomputes rstd), and launches through ``launch.Kernel`` (the
compiled variant's launcher, called directly). Under torch.compile the same host code runs with every launch
wrapped by ``torch.library.wrap_triton``, so inductor sees the kernels themselves, not an opaque op.

Triton is imported on first use (``kernels()``), so this module and the package import with torch alone.
"""

from __future__ import annotations

import functools
import os

import torch

from normtrain.ops.launch import Kernel, current_device

# Launch heuristics. BLOCK_N is a power of two, so a width compiles one variant per bucket (plus triton's
# divisibility-by-16 specialization); eps, alpha, the row count and n_stat are runtime scalars. Sized so that
# ptxas (sm_90) reports no register spills (tests/ops: test_kernels_compile_for_h100_without_register_spills).
# Measured on an H200 at 2^27 elements (experiments/kernels/, the sweep): forward programs of 2048 elements beat
# 4096 and 8192 at narrow widths (97% of copy against 91% at N 768); the backward's 4096 elements and 32 warps an
# SM beat 16 or 64 warps and 8192 elements at N 768 and 4096.
MAX_TILE_N = 16384  # forward: widest row held whole in registers; wider rows take the looped kernels
MAX_TILE_N_BWD = 8192  # backward holds more per element (x, dy, w, the dw accumulator)
LOOP_BLOCK_N = 2048  # chunk the looped kernels walk a row in (4 elements a thread)
TILE_ELEMS = 2048  # forward: elements per program in the tile kernel: narrow rows are packed several a program
BWD_TILE_ELEMS = 4096  # backward: the same for its tile kernel
MAX_ROWS = 64  # most rows packed into one program
MAX_WARPS_FWD = 16  # a forward row of 16384 takes 16 warps (32 elements a thread), as Liger's; 32 warps lost 30%
BWD_WARPS_PER_SM = 32  # persistent backward: as many programs per SM as fit this many warps (half of an H100's)
CPU_PROGRAMS = 4  # persistent backward grid under the CPU interpreter (GPUs use their SM count)
DW_BLOCK_P, DW_BLOCK_N, DW_WARPS = 32, 64, 4  # dw_reduce: partial rows per step, columns per program, warps

# The blocked-rows backward (rmsnorm_rows_kernels.py), behind NORMTRAIN_RMSNORM_BWD=rows / set_backward("rows").
# Its defaults are a starting point, not a measurement: scripts/bench_rmsnorm.py --sweep-rows picks them per device.
ROWS_MAX_INLINE_N = 8192  # widest row whose statistics come from one chunk (x, dy read once); 16384 spills
ROWS_CHUNK_N = 4096  # columns a program owns when the row is wider (statistics from rms_bwd_rows_stats first)
ROWS_TILE_ELEMS = 4096  # elements a step of the row loop holds: narrow rows are packed several a step
ROWS_WARPS_PER_SM = 32  # programs an SM, as the default's BWD_WARPS_PER_SM

KERNEL_NAMES = {"rmsnorm_kernels": ("rms_fwd_tile", "rms_fwd_loop", "rms_bwd_tile", "rms_bwd_loop", "dw_reduce"),
                "rmsnorm_rows_kernels": ("rms_bwd_rows_stats", "rms_bwd_rows")}
BACKWARDS = ("tile", "rows")  # the default backward (tile, looped above MAX_TILE_N_BWD), the blocked-rows one
BACKWARD_ENV = "NORMTRAIN_RMSNORM_BWD"
_KERNELS: list = []  # [{name: launch.Kernel}] or [the exception importing triton raised], filled on first use
_BACKWARD: list[str] = []  # the chosen backward, once read from BACKWARD_ENV or set by set_backward


def set_backward(name: str) -> None:
    """Which backward the fused RMSNorm launches from now on: ``tile`` (the default) or ``rows``."""
    if name not in BACKWARDS:
        raise ValueError(f"rms_norm backward {name!r} is unknown; allowed: {', '.join(BACKWARDS)}")
    _BACKWARD[:] = [name]


def backward_kind() -> str:
    """The backward in use: set_backward's choice, else ``$NORMTRAIN_RMSNORM_BWD`` (read once), else tile."""
    if not _BACKWARD:
        value = os.environ.get(BACKWARD_ENV, "") or "tile"
        if value not in BACKWARDS:
            raise ValueError(f"{BACKWARD_ENV}={value!r} is not a backward of the fused RMSNorm; allowed: "
                             f"{', '.join(BACKWARDS)}")
        _BACKWARD.append(value)
    return _BACKWARD[0]


def kernels() -> dict:
    """The kernels, wrapped for direct launch; imported on first use, a clear error without a working triton."""
    if not _KERNELS:
        try:
            import importlib

            _KERNELS.append({name: Kernel(getattr(importlib.import_module(f"normtrain.ops.{module}"), name))
                             for module, names in KERNEL_NAMES.items() for name in names})
        except Exception as e:  # noqa: BLE001 - missing or broken triton: auto falls back, triton explains
            _KERNELS.append(e)
    if isinstance(_KERNELS[0], Exception):
        raise RuntimeError(f"rms_norm(impl='triton') needs triton, which failed to import ({_KERNELS[0]}); "
                           "install triton (Linux) or use impl='auto' or 'torch'") from _KERNELS[0]
    return _KERNELS[0]


@functools.cache
def config(n: int, backward: bool = False, limits: tuple = ()) -> tuple[bool, int, int, int]:
    """(looped, BLOCK_M, BLOCK_N, num_warps) for rows of width n: 16 elements a thread forward, 8 backward.
    ``limits`` is the module's tile limits (part of the cache key, so that tests may change them)."""
    block_n = 1 << (n - 1).bit_length()
    if block_n > (MAX_TILE_N_BWD if backward else MAX_TILE_N):
        return True, 1, LOOP_BLOCK_N, 16
    block_m = max(1, min(MAX_ROWS, (BWD_TILE_ELEMS if backward else TILE_ELEMS) // block_n))
    per_thread, most = (8, 32) if backward else (16, MAX_WARPS_FWD)
    return False, block_m, block_n, min(most, max(1, block_m * block_n // (32 * per_thread)))


def _limits() -> tuple:
    return MAX_TILE_N, MAX_TILE_N_BWD, LOOP_BLOCK_N, TILE_ELEMS, BWD_TILE_ELEMS, MAX_ROWS, MAX_WARPS_FWD


@functools.cache
def rows_config(n: int, limits: tuple = ()) -> tuple[bool, int, int, int]:
    """The rows backward's (inline, BLOCK_M, BLOCK_N, num_warps) for width n: 8 elements a thread, as the default's
    tile. ``limits``: ``_rows_limits()``, the cache key that lets tests and the sweep change them."""
    block_n = 1 << (n - 1).bit_length()
    inline = block_n <= ROWS_MAX_INLINE_N
    if not inline:
        block_n = ROWS_CHUNK_N
    block_m = max(1, min(MAX_ROWS, ROWS_TILE_ELEMS // block_n))
    return inline, block_m, block_n, min(32, max(1, block_m * block_n // 256))


def _rows_limits() -> tuple:
    return ROWS_MAX_INLINE_N, ROWS_CHUNK_N, ROWS_TILE_ELEMS, ROWS_WARPS_PER_SM, MAX_ROWS


_SMS: dict[int, int] = {}


def persistent_programs(t: torch.Tensor, num_warps: int, warps_per_sm: int | None = None) -> int:
    """Backward grid: a few resident programs an SM (``BWD_WARPS_PER_SM`` warps in all), one wave."""
    if not t.is_cuda:
        return CPU_PROGRAMS
    idx = t.get_device()
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * max(1, (warps_per_sm or BWD_WARPS_PER_SM) // num_warps)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """A (rows, n) view with unit column stride; copies only when no such view exists."""
    t2 = t.reshape(-1, n)
    return t2 if n == 1 or t2.stride(1) == 1 else t2.contiguous()


def out_dtype(x: torch.Tensor, residual: torch.Tensor | None) -> torch.dtype:
    return x.dtype if residual is None else torch.promote_types(x.dtype, residual.dtype)


# ---------------------------------------------------------------- launches


def _launch_direct(name: str, grid: int, args: tuple, consts: tuple, num_warps: int) -> None:
    t = args[0]
    if t.is_cuda and t.get_device() != current_device():  # triton launches on the current device
        with torch.cuda.device(t.device):
            kernels()[name](grid, args, consts, num_warps)
        return
    kernels()[name](grid, args, consts, num_warps)


def _launch_wrapped(name: str, grid: int, args: tuple, consts: tuple, num_warps: int) -> None:
    """The launch torch.compile traces: the raw jit function through ``torch.library.wrap_triton``."""
    kernel = kernels()[name]
    torch.library.wrap_triton(kernel.fn)[(grid,)](*args, **dict(zip(kernel.consts, consts, strict=True)),
                                                  num_warps=num_warps)


_DENSE = torch.contiguous_format  # outputs are dense rows of n, whatever the inputs' layout


def _rows_of(t: torch.Tensor, n: int) -> tuple[torch.Tensor, int]:
    """A tensor whose rows of n sit one row stride apart, and that stride: ``t`` itself when contiguous (no view
    to make: the kernels take a pointer and a row stride), else a (rows, n) view, copied only when the last
    dimension is not unit-stride."""
    if t.is_contiguous():
        return t, n
    t2 = _rows(t, n)
    return t2, t2.stride(0)


def forward(x, weight, residual, eps: float, alpha: float, n_stat: int, launch=_launch_direct):
    """y, and s = alpha * residual + x (None without a residual), both of x's shape."""
    n = int(x.shape[-1])  # traced with dynamic shapes: the width picks the kernel's block sizes, so it specializes
    m = x.numel() // n if n else 0
    x2, sx = _rows_of(x, n)
    if residual is None:
        y, s = torch.empty_like(x, memory_format=_DENSE), None
        r2, sr = x2, sx  # unused pointers get a valid tensor
    else:
        y = torch.empty_like(x, dtype=torch.promote_types(x.dtype, residual.dtype), memory_format=_DENSE)
        s = torch.empty_like(y)
        r2, sr = _rows_of(residual, n)
    if m:
        looped, block_m, block_n, warps = config(n, False, _limits())
        has = (residual is not None, weight is not None, n_stat < n)
        w = weight if weight is not None else x2
        if looped:
            launch("rms_fwd_loop", m, (x2, r2, w, y, y if s is None else s, n, n_stat, sx, sr, eps, alpha),
                   (*has, block_n), warps)
        else:
            launch("rms_fwd_tile", _cdiv(m, block_m), (x2, r2, w, y, y if s is None else s, m, n, n_stat, sx, sr,
                                                       eps, alpha), (*has, block_m, block_n), warps)
    return y, s


def backward(dy, ds, xs, weight, eps: float, alpha: float, n_stat: int, dx_dtype, dr_dtype, need_dw: bool,
             launch=_launch_direct):
    """dx, dr (None without a residual) and dw (None unless need_dw) from the normalized xs (x, or s with a
    residual) and the grads of y and of the returned s (``ds``, None when s was not used)."""
    n = int(xs.shape[-1])  # specializes when traced, as in forward; the rows stay symbolic
    m = xs.numel() // n if n else 0
    xs2, sxs = _rows_of(xs, n)
    dy2, sdy = _rows_of(dy, n)
    ds2, sds = _rows_of(ds, n) if ds is not None else (dy2, sdy)
    need_dw = need_dw and weight is not None
    dx = torch.empty_like(xs, dtype=dx_dtype, memory_format=_DENSE)
    dr = torch.empty_like(xs, dtype=dr_dtype, memory_format=_DENSE) if dr_dtype is not None else None
    dw = None
    if m:
        w = weight if weight is not None else xs2  # unused pointers get a valid tensor
        has = (ds is not None, dr is not None, weight is not None, need_dw, n_stat < n)
        if backward_kind() == "rows":
            programs, part = _launch_rows(launch, (dy2, ds2, xs2, w, dx, dx if dr is None else dr), m, n, n_stat,
                                          (sdy, sds, sxs), eps, alpha, has)
        else:
            looped, block_m, block_n, warps = config(n, True, _limits())
            programs = torch.sym_min(persistent_programs(xs, warps), _cdiv(m, block_m))
            part = torch.empty((programs, n), dtype=torch.float32, device=xs.device) if need_dw else dx  # fp32
            args = (dy2, ds2, xs2, w, dx, dx if dr is None else dr, part, m, n, n_stat, sdy, sds, sxs, eps, alpha,
                    _cdiv(_cdiv(m, block_m), programs))
            if looped:
                launch("rms_bwd_loop", programs, args, (*has, block_n), warps)
            else:
                launch("rms_bwd_tile", programs, args, (*has, block_m, block_n), warps)
        if need_dw:
            dw = torch.empty_like(weight)
            launch("dw_reduce", _cdiv(n, DW_BLOCK_N), (part, dw, programs, n), (DW_BLOCK_P, DW_BLOCK_N), DW_WARPS)
    elif need_dw:
        dw = torch.zeros_like(weight)
    return dx, dr, dw


def _launch_rows(launch, tensors: tuple, m, n: int, n_stat: int, strides: tuple, eps: float, alpha: float,
                 has: tuple):
    """The blocked-rows backward (rmsnorm_rows_kernels.py): row blocks x column chunks, about one wave of
    programs; each row block writes one fp32 dW partial row. Returns (row blocks, the partial rows)."""
    dy2, ds2, xs2, w, dx, dr = tensors
    inline, block_m, block_n, warps = rows_config(n, _rows_limits())
    chunks = _cdiv(n, block_n)
    wave = persistent_programs(xs2, warps, ROWS_WARPS_PER_SM)
    row_blocks = _cdiv(m, block_m)
    per_prog = block_m * _cdiv(row_blocks, torch.sym_max(1, torch.sym_min(row_blocks, wave // chunks)))
    blocks = _cdiv(m, per_prog)  # every block holds a row: each writes its whole partial row
    part = torch.empty((blocks, n), dtype=torch.float32, device=xs2.device) if has[3] else dx
    stats = dx
    if not inline:  # each row's rstd and coef, from the whole row, before any chunk needs them
        stats = torch.empty((2, m), dtype=torch.float32, device=xs2.device)
        launch("rms_bwd_rows_stats", _cdiv(m, block_m), (dy2, xs2, w, stats, m, n, n_stat, strides[0], strides[2],
                                                         eps), (has[2], has[4], block_m, block_n), warps)
    launch("rms_bwd_rows", blocks * chunks, (dy2, ds2, xs2, w, stats, dx, dr, part, m, n, n_stat, *strides, eps,
                                             alpha, per_prog), (*has, inline, block_m, block_n), warps)
    return blocks, part


# ---------------------------------------------------------------- eager: one autograd.Function


class RMSNormFunction(torch.autograd.Function):
    """Eager Triton path: returns y, or (y, s) with a residual; the backward is one fused kernel (and the
    reduction of dw's partial rows)."""

    @staticmethod
    def forward(ctx, x, weight, residual, eps, alpha, n_stat):
        y, s = forward(x, weight, residual, eps, alpha, n_stat)
        ctx.save_for_backward(x if residual is None else s, weight)
        ctx.args = (eps, alpha, n_stat, x.dtype, None if residual is None else residual.dtype)
        ctx.set_materialize_grads(False)  # an unused s gets no zero-filled gradient
        return y if residual is None else (y, s)

    @staticmethod
    def backward(ctx, dy, ds=None):
        xs, weight = ctx.saved_tensors
        eps, alpha, n_stat, dx_dtype, dr_dtype = ctx.args
        if dy is None:  # only s was used
            dy = torch.zeros_like(xs)
        dx, dr, dw = backward(dy, ds, xs, weight, eps, alpha, n_stat, dx_dtype, dr_dtype, ctx.needs_input_grad[1])
        return dx, dw, dr, None, None, None


# ---------------------------------------------------------------- torch.compile: two triton_ops
# The ops always return tensors; what does not exist is an empty placeholder.


def _empty(like: torch.Tensor) -> torch.Tensor:
    return like.new_empty(0)


def _traced() -> bool:
    """Register triton_ops (torch >= 2.6), which inductor traces into, calling the kernels from its own code?
    Not under Triton's CPU interpreter (CI's tests): ``wrap_triton`` cannot trace an interpreted kernel, so there
    the ops are opaque custom ops with the same signatures, as on an older torch."""
    return hasattr(torch.library, "triton_op") and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")


TRACED = _traced()
_OP_LAUNCH = _launch_wrapped if TRACED else _launch_direct


def fwd_op(x: torch.Tensor, weight: torch.Tensor | None, residual: torch.Tensor | None, eps: float, alpha: float,
           n_stat: int) -> tuple[torch.Tensor, torch.Tensor]:
    y, s = forward(x, weight, residual, eps, alpha, n_stat, launch=_OP_LAUNCH)
    return y, (s if s is not None else _empty(y))


def bwd_op(dy: torch.Tensor, ds: torch.Tensor | None, xs: torch.Tensor, weight: torch.Tensor | None, eps: float,
           alpha: float, n_stat: int, dx_dtype: torch.dtype, dr_dtype: torch.dtype | None, need_dw: bool
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dr, dw = backward(dy, ds, xs, weight, eps, alpha, n_stat, dx_dtype, dr_dtype, need_dw, launch=_OP_LAUNCH)
    return dx, (dr if dr is not None else _empty(dx)), (dw if dw is not None else _empty(dx))


def _register_ops():
    """``normtrain::rms_norm_fwd`` / ``_bwd``: triton_ops where ``TRACED``, else custom ops with fake kernels."""
    make = torch.library.triton_op if TRACED else torch.library.custom_op
    fwd = make("normtrain::rms_norm_fwd", fwd_op, mutates_args=())
    bwd = make("normtrain::rms_norm_bwd", bwd_op, mutates_args=())
    if not TRACED:  # triton_ops trace their own fake implementation
        fwd.register_fake(lambda x, w, r, *_: (torch.empty_like(x, dtype=out_dtype(x, r)),
                                               torch.empty_like(x, dtype=out_dtype(x, r)) if r is not None
                                               else _empty(x)))
        bwd.register_fake(lambda dy, ds, xs, w, eps, a, k, dxt, drt, need: (
            torch.empty_like(xs, dtype=dxt), torch.empty_like(xs, dtype=drt) if drt is not None else _empty(xs),
            torch.empty_like(w) if need and w is not None else _empty(xs)))

    def setup_context(ctx, inputs, output):
        x, weight, residual, eps, alpha, n_stat = inputs
        ctx.save_for_backward(x if residual is None else output[1], weight)
        ctx.args = (eps, alpha, n_stat, x.dtype, None if residual is None else residual.dtype)

    def op_backward(ctx, dy, ds):
        xs, weight = ctx.saved_tensors
        eps, alpha, n_stat, dx_dtype, dr_dtype = ctx.args
        dx, dr, dw = bwd(dy, ds if dr_dtype is not None else None, xs, weight, eps, alpha, n_stat, dx_dtype,
                         dr_dtype, ctx.needs_input_grad[1])
        return dx, (dw if ctx.needs_input_grad[1] else None), (dr if dr_dtype is not None else None), None, None, None

    fwd.register_autograd(op_backward, setup_context=setup_context)
    return fwd, bwd


rms_norm_fwd, rms_norm_bwd = _register_ops()
