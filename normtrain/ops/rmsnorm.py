"""RMSNorm (Zhang & Sennrich 2019), LLaMA style: statistics in fp32, output in the input dtype.

y = x * rsqrt(mean(x[..., :n_stat]^2) + eps) * weight, computed in fp32 and cast once to x.dtype.
With ``residual`` the op first forms s = alpha * residual + x and returns ``(rms_norm(s), s)``.

Two implementations behind one function: a torch composite (any device, the reference) and fused
Triton kernels (``rmsnorm_kernels.py``; one pass forward and backward, residual add included). The
Triton path is an ``autograd.Function`` in eager mode (least host overhead) and a pair of
``torch.library`` custom ops under ``torch.compile`` (no graph break). Triton is imported lazily so
that the package imports with torch alone.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import torch

IMPLS = ("auto", "torch", "triton")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Launch heuristics. BLOCK_N is a power of two, so a width compiles one variant per bucket (plus
# triton's divisibility-by-16 specialization); eps, alpha and n_stat are runtime fp32/int scalars.
# Sized so that ptxas (sm_90) reports no register spills; speed is to be tuned on a GPU.
MAX_TILE_N = 16384  # forward: widest row held whole in registers; wider rows take the looped kernels
MAX_TILE_N_BWD = 8192  # backward holds more per element (x, dy, w, the dw accumulator)
LOOP_BLOCK_N = 2048  # chunk the looped kernels walk a row in (4 elements a thread)
TILE_ELEMS = 4096  # elements per program in the tile kernels: narrow rows are packed several a program
MAX_ROWS = 64  # most rows packed into one program
CPU_PROGRAMS = 4  # persistent backward grid under the CPU interpreter (GPUs use their SM count)


def _rms_norm_torch(x: torch.Tensor, weight: torch.Tensor | None, eps: float,
                    n_stat: int | None = None) -> torch.Tensor:
    xf = x if x.dtype == torch.float64 else x.float()  # fp32 statistics at least; fp64 stays fp64
    stat = xf if n_stat is None else xf[..., :n_stat]
    y = xf * torch.rsqrt(stat.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(xf.dtype)
    return y.to(x.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6,
             impl: str = "auto", residual: torch.Tensor | None = None, alpha: float = 1.0,
             n_stat: int | None = None):
    """RMS-normalize the last dimension of ``x``.

    impl: ``auto`` (Triton on CUDA tensors, torch elsewhere), ``torch`` or ``triton`` (CUDA, or CPU
    under ``TRITON_INTERPRET=1``).
    residual/alpha: fused residual add; returns ``(y, alpha * residual + x)`` instead of ``y``.
    n_stat: estimate the RMS from the first ``n_stat`` features only (pRMSNorm); None = all.
    """
    if impl not in IMPLS:
        raise ValueError(f"rms_norm: unknown impl {impl!r}; allowed: {', '.join(IMPLS)}")
    n = x.shape[-1] if x.dim() else 0
    if n_stat is not None and not 1 <= n_stat <= n:
        raise ValueError(f"rms_norm: n_stat must be in [1, {n}] (the last dimension), got {n_stat}")
    if _use_triton(impl, x, weight, residual):
        k = n if n_stat is None else int(n_stat)
        if torch.compiler.is_compiling():
            y, s, _ = torch.ops.normtrain.rms_norm_fwd(x, weight, residual, float(eps), float(alpha), k)
            return y if residual is None else (y, s)
        return RMSNormFunction.apply(x, weight, residual, float(eps), float(alpha), k)
    if residual is not None:
        s = x + residual if alpha == 1.0 else x + alpha * residual
        return _rms_norm_torch(s, weight, eps, n_stat), s
    return _rms_norm_torch(x, weight, eps, n_stat)


# ---------------------------------------------------------------- dispatch

_KERNELS: list = []  # [kernel module or the exception importing it raised], filled on first use


def _kernels():
    """The kernel module, imported on first use; a clear error without a working triton."""
    if not _KERNELS:
        try:
            from normtrain.ops import rmsnorm_kernels
            _KERNELS.append(rmsnorm_kernels)
        except Exception as e:  # noqa: BLE001 - missing or broken triton: auto falls back, triton explains
            _KERNELS.append(e)
    if isinstance(_KERNELS[0], Exception):
        raise RuntimeError(f"rms_norm(impl='triton') needs triton, which failed to import ({_KERNELS[0]}); "
                           "install triton (Linux) or use impl='auto' or 'torch'") from _KERNELS[0]
    return _KERNELS[0]


def _triton_mode() -> str:
    """'missing', 'compiled', 'interpreter', or 'late' (TRITON_INTERPRET=1 set after triton was imported).

    Triton reads TRITON_INTERPRET when a kernel is defined: our kernels are defined on first use, but
    triton's own helpers (``tl.sum`` is a jit function) when triton is first imported, which importing
    ``torch._dynamo`` already does. The interpreter needs both.
    """
    try:
        k = _kernels()
    except RuntimeError:
        return "missing"
    if type(k.rms_fwd_tile).__name__ != "InterpretedFunction":
        return "compiled"
    return "interpreter" if type(k.tl.sum).__name__ == "InterpretedFunction" else "late"


# Fixed for the process, so torch.compile may bake it in without a guard. This is all that
# torch.compiler.assume_constant_result(fn) does, but calling it imports torch._dynamo: about 2 s at every start
# of the CLI (tests/ops/test_rmsnorm.py checks that torch still marks a function this way).
CONSTANT_MARK = "_dynamo_marked_constant"
setattr(_triton_mode, CONSTANT_MARK, True)


def _use_triton(impl: str, x: torch.Tensor, weight, residual) -> bool:
    """auto: Triton for CUDA tensors it supports, torch otherwise; triton: Triton or a clear error."""
    if impl == "torch":
        return False
    n = x.shape[-1] if x.dim() else 0
    problems = []
    if any(t is not None and t.dtype not in DTYPES for t in (x, weight, residual)):
        problems.append("x, weight and residual must be float32, float16 or bfloat16")
    if n < 1:
        problems.append("x needs a last dimension of size >= 1")
    if weight is not None and tuple(weight.shape) != (n,):
        problems.append(f"weight must have shape ({n},), got {tuple(weight.shape)}")
    if residual is not None and residual.shape != x.shape:
        problems.append(f"residual must have x's shape {tuple(x.shape)}, got {tuple(residual.shape)}")
    if impl == "auto":
        if not x.is_cuda or problems:
            return False
        if _triton_mode() == "missing":
            warnings.warn("rms_norm(impl='auto'): triton is unavailable, using the torch path", stacklevel=3)
            return False
        return True
    if problems:
        raise ValueError("rms_norm(impl='triton'): " + "; ".join(problems))
    if _triton_mode() == "missing":
        _kernels()  # raises the import error
    if x.device.type == "cpu" and _triton_mode() == "late":
        raise RuntimeError("rms_norm(impl='triton'): TRITON_INTERPRET=1 was set after triton was first "
                           "imported (importing torch._dynamo imports it), so triton's own helpers are not "
                           "interpreted; set it in the environment, or before torch is imported")
    if x.device.type == "cpu" and _triton_mode() != "interpreter":
        raise RuntimeError("rms_norm(impl='triton') got a CPU tensor: Triton runs on the CPU only in its "
                           "interpreter. Set TRITON_INTERPRET=1 before normtrain first uses Triton "
                           "(slow; for tests), or use impl='auto' or 'torch'")
    if x.device.type not in ("cpu", "cuda"):
        raise RuntimeError(f"rms_norm(impl='triton') does not run on {x.device.type}; use impl='auto'")
    return True


# ---------------------------------------------------------------- launchers


def _config(n: int, backward: bool = False) -> tuple[bool, int, int, int]:
    """(looped, BLOCK_M, BLOCK_N, num_warps) for rows of width n: 16 elements a thread forward, 8 backward."""
    block_n = 1 << (n - 1).bit_length()
    if block_n > (MAX_TILE_N_BWD if backward else MAX_TILE_N):
        return True, 1, LOOP_BLOCK_N, 16
    block_m = max(1, min(MAX_ROWS, TILE_ELEMS // block_n))
    per_thread = 8 if backward else 16
    return False, block_m, block_n, min(32, max(1, block_m * block_n // (32 * per_thread)))


_SMS: dict[int, int] = {}


def _persistent_programs(device: torch.device, num_warps: int) -> int:
    """Backward grid: one wave of resident programs, about 16 warps an SM (one program of 16+ warps)."""
    if device.type != "cuda":
        return CPU_PROGRAMS
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * max(1, 16 // num_warps)


def _on_device(t: torch.Tensor):
    """Triton launches on the current CUDA device: make it t's (nothing to do with one GPU)."""
    if t.is_cuda and t.device.index != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """A (rows, n) view with unit column stride; copies only when no such view exists."""
    t2 = t.reshape(-1, n)
    return t2 if n == 1 or t2.stride(1) == 1 else t2.contiguous()


def _out_dtype(x: torch.Tensor, residual: torch.Tensor | None) -> torch.dtype:
    return x.dtype if residual is None else torch.promote_types(x.dtype, residual.dtype)


def _forward(x, weight, residual, eps: float, alpha: float, n_stat: int):
    """Returns y, s (an empty tensor without residual) and rstd (rows, fp32)."""
    n = x.shape[-1]
    x2 = _rows(x, n)
    m = x2.shape[0]
    y = torch.empty((m, n), dtype=_out_dtype(x, residual), device=x.device)
    s = torch.empty_like(y) if residual is not None else y.new_empty(0)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    if m:
        k = _kernels()
        r2 = _rows(residual, n) if residual is not None else x2  # unused pointers get a valid tensor
        w = weight.contiguous() if weight is not None else x2
        looped, block_m, block_n, warps = _config(n)
        args = (x2, r2, w, y, s if residual is not None else y, rstd)
        flags = dict(HAS_RES=residual is not None, HAS_W=weight is not None, BLOCK_N=block_n, num_warps=warps)
        with _on_device(x):
            if looped:
                k.rms_fwd_loop[(m,)](*args, n, n_stat, x2.stride(0), r2.stride(0), eps, alpha, **flags)
            else:
                k.rms_fwd_tile[(_cdiv(m, block_m),)](*args, m, n, n_stat, x2.stride(0), r2.stride(0), eps,
                                                   alpha, BLOCK_M=block_m, **flags)
    return y.view(x.shape), (s.view(x.shape) if residual is not None else s), rstd


def _backward(dy, ds, xs, weight, rstd, alpha: float, n_stat: int, dx_dtype, dr_dtype, need_dw: bool):
    """Returns dx, dr (None without residual) and dw (None unless need_dw) from the saved xs and rstd.

    xs is the tensor that was normalized (x, or s with a residual); ds the grad of the returned s.
    """
    n = xs.shape[-1]
    xs2, dy2 = _rows(xs, n), _rows(dy, n)
    ds2 = _rows(ds, n) if ds is not None else dy2
    m = xs2.shape[0]
    need_dw = need_dw and weight is not None
    dx = torch.empty((m, n), dtype=dx_dtype, device=xs.device)
    dr = torch.empty((m, n), dtype=dr_dtype, device=xs.device) if dr_dtype is not None else None
    looped, block_m, block_n, warps = _config(n, backward=True)
    blocks = _cdiv(m, block_m)
    programs = min(_persistent_programs(xs.device, warps), max(1, blocks))
    part = None
    if need_dw:  # fp32 partial dw, one row per program; the looped kernel accumulates into it
        part = (torch.zeros if looped else torch.empty)((programs, n), dtype=torch.float32, device=xs.device)
    if m:
        k = _kernels()
        w = weight.contiguous() if weight is not None else xs2
        args = (dy2, ds2, xs2, w, rstd, dx, dr if dr is not None else dx, part if need_dw else dx,
                m, n, n_stat, dy2.stride(0), ds2.stride(0), xs2.stride(0), alpha, _cdiv(blocks, programs))
        flags = dict(HAS_DS=ds is not None, HAS_DR=dr is not None, HAS_W=weight is not None, NEED_DW=need_dw,
                     BLOCK_N=block_n, num_warps=warps)
        with _on_device(xs):
            if looped:
                k.rms_bwd_loop[(programs,)](*args, **flags)
            else:
                k.rms_bwd_tile[(programs,)](*args, BLOCK_M=block_m, **flags)
    dw = None
    if need_dw:
        dw = part.sum(0).to(weight.dtype) if m else torch.zeros_like(weight)
    return dx.view(xs.shape), (dr.view(xs.shape) if dr is not None else None), dw


# ---------------------------------------------------------------- autograd: eager and torch.compile


def _save(ctx, x, weight, residual, s, rstd, alpha: float, n_stat: int) -> None:
    ctx.save_for_backward(x if residual is None else s, weight, rstd)
    ctx.alpha, ctx.n_stat = alpha, n_stat
    ctx.dx_dtype = x.dtype
    ctx.dr_dtype = residual.dtype if residual is not None else None
    ctx.need_dw = weight is not None and weight.requires_grad


def _input_grads(ctx, dy, ds, backward):
    """Grads for (x, weight, residual, eps, alpha, n_stat); ``backward`` is ``_backward`` or its op."""
    xs, weight, rstd = ctx.saved_tensors
    has_res = ctx.dr_dtype is not None
    dx, dr, dw = backward(dy, ds if has_res else None, xs, weight, rstd, ctx.alpha, ctx.n_stat,
                          ctx.dx_dtype, ctx.dr_dtype, ctx.need_dw)
    return dx, (dw if ctx.need_dw else None), (dr if has_res else None), None, None, None


class RMSNormFunction(torch.autograd.Function):
    """Eager Triton path: returns y, or (y, s) with a residual; the backward is one fused kernel."""

    @staticmethod
    def forward(ctx, x, weight, residual, eps, alpha, n_stat):
        y, s, rstd = _forward(x, weight, residual, eps, alpha, n_stat)
        _save(ctx, x, weight, residual, s, rstd, alpha, n_stat)
        return y if residual is None else (y, s)

    @staticmethod
    def backward(ctx, dy, ds=None):
        return _input_grads(ctx, dy, ds, _backward)


# The custom ops always return three tensors; what does not exist is an empty placeholder.
@torch.library.custom_op("normtrain::rms_norm_fwd", mutates_args=())
def rms_norm_fwd(x: torch.Tensor, weight: torch.Tensor | None, residual: torch.Tensor | None, eps: float,
                 alpha: float, n_stat: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _forward(x, weight, residual, eps, alpha, n_stat)


@rms_norm_fwd.register_fake
def _(x, weight, residual, eps, alpha, n_stat):
    y = x.new_empty(x.shape, dtype=_out_dtype(x, residual))
    s = torch.empty_like(y) if residual is not None else y.new_empty(0)
    return y, s, x.new_empty(math.prod(x.shape[:-1]), dtype=torch.float32)


@torch.library.custom_op("normtrain::rms_norm_bwd", mutates_args=())
def rms_norm_bwd(dy: torch.Tensor, ds: torch.Tensor | None, xs: torch.Tensor, weight: torch.Tensor | None,
                 rstd: torch.Tensor, alpha: float, n_stat: int, dx_dtype: torch.dtype,
                 dr_dtype: torch.dtype | None, need_dw: bool
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dr, dw = _backward(dy, ds, xs, weight, rstd, alpha, n_stat, dx_dtype, dr_dtype, need_dw)
    return dx, (dr if dr is not None else dx.new_empty(0)), (dw if dw is not None else dx.new_empty(0))


@rms_norm_bwd.register_fake
def _(dy, ds, xs, weight, rstd, alpha, n_stat, dx_dtype, dr_dtype, need_dw):
    dx = xs.new_empty(xs.shape, dtype=dx_dtype)
    dr = xs.new_empty(xs.shape, dtype=dr_dtype) if dr_dtype is not None else dx.new_empty(0)
    dw = torch.empty_like(weight) if need_dw and weight is not None else dx.new_empty(0)
    return dx, dr, dw


def _op_setup_context(ctx, inputs, output):
    x, weight, residual, eps, alpha, n_stat = inputs
    _save(ctx, x, weight, residual, output[1], output[2], alpha, n_stat)


def _op_backward(ctx, dy, ds, _drstd):
    return _input_grads(ctx, dy, ds, rms_norm_bwd)


rms_norm_fwd.register_autograd(_op_backward, setup_context=_op_setup_context)
