"""The guard in front of the GPU default: ``norm.impl=auto`` runs the fused Triton RMSNorm only after it has matched
torch once on this device, at the model's widths and dtypes.

The kernels are tested under Triton's CPU interpreter and compiled for sm_90 in CI, but a user's GPU and Triton
version give them their first real run. So before training, ``guard_norms`` compiles them and runs one forward and
backward per norm width and dtype (a micro-batch's rows; plain, and with the fused residual add from an fp32
stream) against the torch path. An error or a disagreement makes the run use torch (the trainer says why in one
warning line); the verdict is kept for the process.

Tolerance (flash-attention's rule, as tests/ops): for every output and gradient, max |triton − fp32 reference| ≤
2 · max |torch − fp32 reference| + atol, atol 1e-4 (fp32), 1e-2 (fp16), 5e-2 (bf16): the kernel may err at most
twice as much as torch itself does in that dtype.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import torch

from normtrain.ops.rmsnorm import rms_norm
from normtrain.util.errors import first_line

ATOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}
GPU_TYPES = ("cuda",)  # devices where auto tries Triton (tests add "cpu" to run the check in the interpreter)


@dataclass(frozen=True)
class Choice:
    """Which implementation the RMS norms run (``triton`` | ``torch``) and why: summary.json's ``norm_impl``."""

    impl: str
    why: str
    fallback: bool = False  # auto wanted Triton, and the check sent it to torch

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


_VERDICTS: dict[tuple, Choice] = {}  # per device, shapes, dtypes, rows and eps: the check runs once a process


def guard_norms(model: torch.nn.Module, impl: str, device: torch.device, rows: int,
                dtypes: Sequence[torch.dtype] = (torch.float32,)) -> Choice:
    """Check ``impl=auto`` norms of ``model`` (the modules with ``supports_triton``) once on ``device``; on a
    failure switch them to torch. ``rows``: the tokens of a micro-batch; ``dtypes``: what reaches the norms."""
    norms = [m for m in model.modules() if getattr(m, "supports_triton", False)]
    if not norms:
        return Choice("torch", "no RMS norm in the model (the Triton kernel is RMSNorm's)")
    if impl != "auto":
        return Choice(impl, f"norm.impl={impl}")
    if device.type not in GPU_TYPES:
        return Choice("torch", f"norm.impl=auto on {device.type}: the Triton kernel is for CUDA")
    shapes = sorted({(m.dim, m.n_stat) for m in norms}, key=str)
    eps = norms[0].eps
    choice = verdict(device, shapes, dtypes, rows, eps)
    if choice.impl == "torch":
        for m in norms:
            m.impl = "torch"
    return choice


def verdict(device: torch.device, shapes: Iterable[tuple[int, int | None]], dtypes: Sequence[torch.dtype],
            rows: int, eps: float) -> Choice:
    """``triton`` when every (width, n_stat) × dtype passes ``mismatch``, else ``torch`` naming the first failure."""
    key = (str(device), tuple(shapes), tuple(dtypes), rows, eps)
    if key not in _VERDICTS:
        problem = next((p for (n, k) in key[1] for dt in dtypes if (p := mismatch(device, n, k, dt, rows, eps))),
                       None)
        if problem is None:
            where = ", ".join(f"{n}" for n, _ in key[1])
            _VERDICTS[key] = Choice("triton", f"norm.impl=auto: the Triton kernel matched torch on {device} "
                                              f"(width {where}, {', '.join(_name(d) for d in dtypes)})")
        else:
            _VERDICTS[key] = Choice("torch", f"norm.impl=auto fell back to torch: {problem}", fallback=True)
    return _VERDICTS[key]


def mismatch(device: torch.device, width: int, n_stat: int | None, dtype: torch.dtype, rows: int,
             eps: float) -> str | None:
    """None when Triton matches torch forward and backward at (rows, width) in ``dtype``, else what went wrong."""
    gen = torch.Generator().manual_seed(0)
    make = lambda *shape: torch.randn(*shape, generator=gen).to(device)  # noqa: E731
    x, stream, dy, ds = make(rows, width).to(dtype), make(rows, width), make(rows, width).to(dtype), make(rows, width)
    w = 1 + 0.5 * make(width)
    for residual, grads in ((None, (dy,)), (stream, (dy, ds))):
        form = f"width {width}, {_name(dtype)}" + (", residual add" if residual is not None else "")
        try:
            got = _outputs(x, w, residual, grads, eps, n_stat, "triton")
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except Exception as err:  # noqa: BLE001 - a compile or launch failure is the verdict, not a crash
            return f"the kernel failed ({form}): {first_line(err)}"
        same = _outputs(x, w, residual, grads, eps, n_stat, "torch")
        ref = _outputs(x, w, residual, grads, eps, n_stat, "torch", upcast=True)
        for name, out in got.items():
            err = (out.float() - ref[name].float()).abs().max().item()
            bound = 2 * (same[name].float() - ref[name].float()).abs().max().item() + ATOL[dtype]
            if not err <= bound:  # NaN fails too
                return f"{name} differs from torch ({form}): max error {err:.3g} > {bound:.3g}"
    return None


def _outputs(x, w, residual, grads, eps: float, n_stat: int | None, impl: str, upcast: bool = False) -> dict:
    """y (and s), and the gradients of x, w (and the residual) for the upstream ``grads``."""
    cast = (lambda t: t.float()) if upcast else (lambda t: t)  # noqa: E731
    leaves = [cast(t).detach().requires_grad_() for t in (x, w, residual) if t is not None]
    out = rms_norm(leaves[0], leaves[1], eps, impl=impl, residual=leaves[2] if residual is not None else None,
                   n_stat=n_stat)
    outs = out if isinstance(out, tuple) else (out,)
    dgrads = torch.autograd.grad(outs, leaves, [cast(g).to(o.dtype) for o, g in zip(outs, grads, strict=True)])
    return {**dict(zip(("y", "s"), outs, strict=False)), **dict(zip(("dx", "dweight", "dresidual"), dgrads,
                                                                      strict=False))}


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
