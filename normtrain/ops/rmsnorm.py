"""RMSNorm (Zhang & Sennrich 2019), LLaMA style: statistics in fp32, output in the input dtype.

y = x * rsqrt(mean(x[..., :n_stat]^2) + eps) * weight, computed in fp32 and cast once to x.dtype.
With ``residual`` the op first forms s = alpha * residual + x and returns ``(rms_norm(s), s)``.

Two implementations behind one function:
* torch: ``torch.nn.functional.rms_norm`` wherever it computes this formula (no weight, or a weight in x's dtype:
  torch's fused kernel on CUDA, its composite elsewhere); the same formula written out for pRMSNorm's partial
  statistic and for a weight in another dtype (torch would warn and fall back to its composite anyway).
* triton: fused kernels (``rmsnorm_kernels.py``, host side in ``rmsnorm_triton.py``), one pass forward and
  backward, residual add included. Two backwards: ``tile`` (the default) and ``rows``, a blocked-rows kernel for
  wide rows (``rmsnorm_rows_kernels.py``), chosen by ``NORMTRAIN_RMSNORM_BWD=rows`` or ``set_backward("rows")``
  and unmeasured on a GPU so far.

Which one ``impl="auto"`` runs: Triton for CUDA tensors in eager mode; under torch.compile the torch formula,
which inductor fuses with the ops around it (the residual add, the cast to the matmul's dtype). The rule comes
from whole-step measurements (scripts/bench_train.py, experiments/throughput/): compiled GPT-2-small steps were
faster with inductor's own norm than with any kernel it cannot fuse into. ``impl="triton"`` under compile still
runs the kernels, traced as ``torch.library.triton_op``s (one graph, no break). Triton is imported lazily so
that the package imports with torch alone.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from normtrain.ops import rmsnorm_triton as T

IMPLS = ("auto", "torch", "triton")
BACKWARDS = T.BACKWARDS
set_backward = T.set_backward  # the fused backward from now on: "tile" (default) or "rows"
backward_kind = T.backward_kind  # the one in use
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _rms_norm_torch(x: torch.Tensor, weight: torch.Tensor | None, eps: float,
                    n_stat: int | None = None) -> torch.Tensor:
    if n_stat is None and (weight is None or weight.dtype == x.dtype):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
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

    impl: ``auto`` (Triton on CUDA tensors in eager mode, torch elsewhere), ``torch`` or ``triton`` (CUDA, or CPU
    under ``TRITON_INTERPRET=1``).
    residual/alpha: fused residual add; returns ``(y, alpha * residual + x)`` instead of ``y``.
    n_stat: estimate the RMS from the first ``n_stat`` features only (pRMSNorm); None = all.
    """
    if impl == "auto":  # the hot path: a few attribute reads before the launch
        fused = x.is_cuda and _supported(x, weight, residual) and _triton_available() \
            and not torch.compiler.is_compiling()
    elif impl == "torch":
        fused = False
    elif impl == "triton":
        fused = _check_triton(x, weight, residual)
    else:
        raise ValueError(f"rms_norm: unknown impl {impl!r}; allowed: {', '.join(IMPLS)}")
    if n_stat is not None:
        n = x.shape[-1] if x.dim() else 0
        if not 1 <= n_stat <= n:
            raise ValueError(f"rms_norm: n_stat must be in [1, {n}] (the last dimension), got {n_stat}")
    if fused:
        k = x.shape[-1] if n_stat is None else int(n_stat)
        if torch.compiler.is_compiling():
            y, s = T.rms_norm_fwd(x, weight, residual, float(eps), float(alpha), k)
        elif torch.is_grad_enabled() and (x.requires_grad or (weight is not None and weight.requires_grad)
                                          or (residual is not None and residual.requires_grad)):
            return T.RMSNormFunction.apply(x, weight, residual, float(eps), float(alpha), k)
        else:  # nothing to differentiate (evaluation, inference): no autograd node to build
            y, s = T.forward(x, weight, residual, float(eps), float(alpha), k)
        return y if residual is None else (y, s)
    if residual is not None:
        s = x + residual if alpha == 1.0 else x + alpha * residual
        return _rms_norm_torch(s, weight, eps, n_stat), s
    return _rms_norm_torch(x, weight, eps, n_stat)


# ---------------------------------------------------------------- dispatch


def _supported(x: torch.Tensor, weight, residual) -> bool:
    """What the kernels take: float32/16 or bfloat16 tensors, a weight of shape (N,), a residual of x's shape.
    On every call of the hot path, so plain int and tuple comparisons only."""
    shape = x.shape
    if x.dtype not in DTYPES or not shape or shape[-1] < 1:
        return False
    if weight is not None and (weight.dtype not in DTYPES or weight.dim() != 1 or weight.shape[0] != shape[-1]):
        return False
    return residual is None or (residual.dtype in DTYPES and tuple(residual.shape) == tuple(shape))


def _problems(x: torch.Tensor, weight, residual) -> list[str]:
    """What ``_supported`` refuses, in words."""
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
    return problems


_MODE: list[str] = []  # _triton_mode's answer, once computed


def _triton_mode() -> str:
    """'missing', 'compiled', 'interpreter', or 'late' (TRITON_INTERPRET=1 set after triton was imported).

    Triton reads TRITON_INTERPRET when a kernel is defined: our kernels are defined on first use, but
    triton's own helpers (``tl.sum`` is a jit function) when triton is first imported, which importing
    ``torch._dynamo`` already does. The interpreter needs both.
    """
    if not _MODE:
        try:
            k = T.kernels()
        except RuntimeError:
            _MODE.append("missing")
            return _MODE[0]
        import triton.language as tl

        if type(k["rms_fwd_tile"].fn).__name__ != "InterpretedFunction":
            _MODE.append("compiled")
        else:
            _MODE.append("interpreter" if type(tl.sum).__name__ == "InterpretedFunction" else "late")
    return _MODE[0]


# Fixed for the process, so torch.compile may bake it in without a guard. This is all that
# torch.compiler.assume_constant_result(fn) does, but calling it imports torch._dynamo: about 2 s at every start
# of the CLI (tests/ops/test_rmsnorm.py checks that torch still marks a function this way).
CONSTANT_MARK = "_dynamo_marked_constant"
setattr(_triton_mode, CONSTANT_MARK, True)


def _triton_available() -> bool:
    if _triton_mode() != "missing":
        return True
    warnings.warn("rms_norm(impl='auto'): triton is unavailable, using the torch path", stacklevel=3)
    return False


def _check_triton(x: torch.Tensor, weight, residual) -> bool:
    """impl='triton': True, or a clear error saying why the kernels cannot take these tensors here."""
    if not _supported(x, weight, residual):
        raise ValueError("rms_norm(impl='triton'): " + "; ".join(_problems(x, weight, residual)))
    mode = _triton_mode()
    if mode == "missing":
        T.kernels()  # raises the import error
    if x.device.type == "cpu" and mode == "late":
        raise RuntimeError("rms_norm(impl='triton'): TRITON_INTERPRET=1 was set after triton was first "
                           "imported (importing torch._dynamo imports it), so triton's own helpers are not "
                           "interpreted; set it in the environment, or before torch is imported")
    if x.device.type == "cpu" and mode != "interpreter":
        raise RuntimeError("rms_norm(impl='triton') got a CPU tensor: Triton runs on the CPU only in its "
                           "interpreter. Set TRITON_INTERPRET=1 before normtrain first uses Triton "
                           "(slow; for tests), or use impl='auto' or 'torch'")
    if x.device.type not in ("cpu", "cuda"):
        raise RuntimeError(f"rms_norm(impl='triton') does not run on {x.device.type}; use impl='auto'")
    return True
