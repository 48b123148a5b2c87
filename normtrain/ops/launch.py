"""Launching a Triton kernel for about the host time of one aten op.

``kernel[grid](*args)`` does a lot of Python per call before the GPU sees anything: triton binds the arguments,
computes their specialization, reads its knobs and hooks, looks the compiled variant up and checks the globals it
captured. For the 25 norms of a GPT-2-small step, forward and backward, that host time was what made the fused
RMSNorm slower than torch's in eager training (issue 36).

``Kernel`` goes through triton once per specialization, then keeps the compiled variant's launcher and calls it
with the grid, the stream and the arguments, nothing more. The key it keeps variants under is finer than triton's
own (each tensor's dtype and 16-byte alignment, each specialized int's class: 1, a multiple of 16, other; each int's
width), so a variant found under a key is the one triton would pick. Triton's own path remains for the CPU
interpreter, while a launch hook is set (a profiler), for a triton whose compiled kernels are launched differently,
and whenever ``NORMTRAIN_TRITON_LAUNCH=triton`` (or ``set_direct(False)``) asks for it.
"""

from __future__ import annotations

import inspect
import os

import torch

_INT32 = 2**31
_DIRECT = [os.environ.get("NORMTRAIN_TRITON_LAUNCH", "direct") != "triton"]


def set_direct(enabled: bool) -> None:
    """Launch through the kept launchers (True, the default) or through triton every time (False)."""
    _DIRECT[0] = bool(enabled)


def direct_enabled() -> bool:
    return _DIRECT[0]


def _signature_function(args: tuple, specialized: tuple):
    """A function of an argument tuple like ``args`` returning what triton specializes on, position by position:
    a tensor's dtype and 16-byte alignment; an int's width, and when specialized whether it is 1 and whether 16
    divides it; nothing for a float or a bool (one kind each). Written out as one expression: this runs at every
    launch, and a loop over the arguments costs several times more."""
    parts = []
    for i, (a, spec) in enumerate(zip(args, specialized, strict=True)):
        if isinstance(a, torch.Tensor):
            parts.append(f"a[{i}].dtype, a[{i}].data_ptr() & 15 == 0")
        elif isinstance(a, int) and not isinstance(a, bool):
            parts.append(f"{-_INT32} <= a[{i}] < {_INT32}" + (f", a[{i}] == 1, a[{i}] & 15 == 0" if spec else ""))
    return eval(f"lambda a: ({', '.join(parts)},)")  # noqa: S307 - built above from positions only


class Kernel:
    """A ``@triton.jit`` function whose constexpr parameters come last; ``kernel(grid, args, consts, num_warps)``
    launches it on a 1-D grid of ``grid`` programs with the runtime ``args`` and the constexpr values ``consts``,
    both in the signature's order."""

    def __init__(self, fn):
        self.fn = fn
        params = list(inspect.signature(getattr(fn, "fn", fn)).parameters.values())
        is_const = ["constexpr" in str(p.annotation) for p in params]
        first = is_const.index(True) if True in is_const else len(params)
        if any(not c for c in is_const[first:]):
            raise ValueError(f"{getattr(fn, '__name__', fn)}: the constexpr parameters must come last")
        self.consts = tuple(p.name for p in params[first:])
        fixed = set(getattr(fn, "do_not_specialize", ()) or ())
        # do_not_specialize holds names or positions, depending on the triton version
        self.specialized = tuple(p.name not in fixed and i not in fixed for i, p in enumerate(params[:first]))
        self.variants: dict = {}
        self.signature = None  # args -> triton's specialization of them, made on the first call
        self.direct = type(fn).__name__ == "JITFunction" and _launcher_convention_known()

    def key(self, args: tuple, consts: tuple, num_warps: int) -> tuple:
        """Everything triton specializes a compiled variant on, and the device it was loaded on. The kind of
        argument at each position (tensor, int, float) is fixed by the first call: the kernels' callers pass the
        same kinds every time."""
        if self.signature is None:
            self.signature = _signature_function(args, self.specialized)
        return _DEVICE(), consts, num_warps, self.signature(args)

    def __call__(self, grid: int, args: tuple, consts: tuple, num_warps: int) -> None:
        if self.direct and _DIRECT[0] and not _hooks_set():
            key = self.key(args, consts, num_warps)
            variant = self.variants.get(key)
            if variant is not None:
                run, function, packed = variant
                run(grid, 1, 1, _STREAM(key[0]), function, packed, None, None, None, *args, *consts)
                return
            compiled = self.fn[(grid,)](*args, **dict(zip(self.consts, consts, strict=True)), num_warps=num_warps)
            if compiled is not None:
                self.variants[key] = (compiled.run, compiled.function, compiled.packed_metadata)
            return
        self.fn[(grid,)](*args, **dict(zip(self.consts, consts, strict=True)), num_warps=num_warps)


# What triton's own driver asks torch for: the current device and its current stream, as C calls.
_DEVICE = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)


def current_device() -> int:
    """The current CUDA device's index (where triton launches), without torch.cuda's Python wrapper."""
    return _DEVICE()
_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", lambda d: torch.cuda.current_stream(d).cuda_stream)


def _launcher_convention_known() -> bool:
    """Triton 3.3 and later launch a compiled kernel as ``run(gx, gy, gz, stream, function, packed_metadata,
    launch_metadata, enter_hook, exit_hook, *args)`` (read in 3.6 and 3.9): the call ``Kernel`` makes."""
    import triton

    try:
        major, minor = (int(p) for p in triton.__version__.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (3, 3)


_KNOBS: list = []


def _hooks_set() -> bool:
    """A launch hook is installed (a profiler's). Triton 3.6+ keeps them in chains that are empty by default, and
    then calls the empty chain around every launch; the direct path passes none."""
    if not _KNOBS:
        from triton import knobs

        _KNOBS.append(knobs.runtime)
    enter, leave = _KNOBS[0].launch_enter_hook, _KNOBS[0].launch_exit_hook
    return (enter is not None and bool(getattr(enter, "calls", True))) or \
        (leave is not None and bool(getattr(leave, "calls", True)))
