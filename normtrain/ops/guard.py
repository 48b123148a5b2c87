"""The guard in front of the GPU default: ``norm.impl=auto`` runs the fused Triton RMSNorm only after it has matched
torch once on this device, at the model's widths and dtypes.

The kernels are tested under Triton's CPU interpreter and compiled for sm_90 in CI, but a user's GPU and Triton
version give them their first real run. So before training, ``guard_norms`` compiles them and runs one forward and
backward per norm width and dtype (a micro-batch's rows; plain, and with the fused residual add from an fp32
stream) against the torch path. An error or a disagreement makes the run use torch (the trainer says why in one
warning line); the verdict is kept for the process.

The reference is torch's formula in fp64. Each quantity is held to a bound that fits what it is:

* elementwise outputs (y, s, dx, dresidual), flash-attention's rule as tests/ops: max |triton − ref| ≤
  2 · max |torch − ref| + atol, atol 1e-4 (fp32), 1e-2 (fp16), 5e-2 (bf16): the kernel may err at most twice as
  much as torch itself does in that dtype.
* dweight is a sum over the micro-batch's rows, and two correct kernels sum in different orders, so their errors
  grow with the rows (a bound that was absolute sent a correct kernel to torch at 16384 rows on an H200). Per
  column j, with t_ij = dy_ij · x̂_ij the terms: |dw_j − ref_j| ≤ λ·√rows·u·Σ_i |t_ij| + ε_w·|ref_j| + 2·max_k
  |torch_k − ref_k| (twice what torch's own path errs by, as for the elementwise outputs), u = 2⁻²⁴
  (fp32 accumulation), ε_w the relative spacing of the weight's dtype (one ulp for the final cast, which may
  round or truncate: Triton's CPU interpreter truncates to bfloat16), λ = 8: the probabilistic
  bound of a floating-point sum in any order (Higham & Mary 2019, SIAM J. Sci. Comput. 41(5)), which fails with
  probability below 2·rows·e^(−λ²/2) (4e-10 a column at 16384 rows) when rounding errors are independent. The
  check's dy has the sign of x̂ (every term positive), so |dw_j| = Σ_i |t_ij|: the bound is a relative error of
  λ·√rows·u (6e-5 at 16384 rows, 5e-4 at a million), and a kernel 1% off exceeds it 20-fold or more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import torch

from normtrain.ops.rmsnorm import rms_norm
from normtrain.util.errors import first_line

ATOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}
LAMBDA = 8.0  # dweight: λ of the probabilistic sum bound (module docstring)
U_ACC = 2.0**-24  # unit roundoff of the fp32 accumulation
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
                dtypes: Sequence[torch.dtype] = (torch.float32,), compiled: bool = False) -> Choice:
    """Check ``impl=auto`` norms of ``model`` (the modules with ``supports_triton``) once on ``device``; on a
    failure switch them to torch. ``rows``: the tokens of a micro-batch; ``dtypes``: what reaches the norms;
    ``compiled``: the run's steps go through torch.compile, where auto runs inductor's own norm (ops/rmsnorm.py)
    and the kernel only in the steps that run eagerly."""
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
    elif compiled:
        choice = Choice("triton", choice.why + "; the compiled steps run inductor's own norm, fused with the ops "
                                                "around it (faster there), the kernel the eager ones")
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
    x, stream, ds = make(rows, width).to(dtype), make(rows, width), make(rows, width)
    w = 1 + 0.5 * make(width)
    for residual in (None, stream):
        form = f"width {width}, {_name(dtype)}" + (", residual add" if residual is not None else "")
        normed = x.double() if residual is None else x.double() + residual.double()  # what the norm sees
        dy = (make(rows, width).abs() * torch.sign(normed)).to(dtype)  # dweight's terms all positive
        grads = (dy,) if residual is None else (dy, ds)
        try:
            got = _outputs(x, w, residual, grads, eps, n_stat, "triton")
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except Exception as err:  # noqa: BLE001 - a compile or launch failure is the verdict, not a crash
            return f"the kernel failed ({form}): {first_line(err)}"
        same = _outputs(x, w, residual, grads, eps, n_stat, "torch")
        ref = _outputs(x, w, residual, grads, eps, n_stat, "torch", upcast=True)
        for name, out in got.items():
            err = (out.double() - ref[name]).abs()
            if name == "dweight":
                bound = dweight_bound(dy, normalized(normed, n_stat, eps), ref[name], w.dtype, same[name])
                worst = int(torch.argmax(torch.nan_to_num(err / bound, nan=float("inf"))))
                err, bound = err[worst].item(), bound[worst].item()
            else:
                err = err.max().item()
                bound = 2 * (same[name].double() - ref[name]).abs().max().item() + ATOL[dtype]
            if not err <= bound:  # NaN fails too
                return f"{name} differs from torch ({form}): max error {err:.3g} > {bound:.3g}"
    return None


def normalized(normed: torch.Tensor, n_stat: int | None, eps: float) -> torch.Tensor:
    """x̂ = x · rstd in fp64: what dweight's terms multiply dy by."""
    normed = normed.double()
    stat = normed if n_stat is None else normed[..., :n_stat]
    return normed * torch.rsqrt(stat.square().mean(-1, keepdim=True) + eps)


def dweight_bound(dy: torch.Tensor, xhat: torch.Tensor, ref: torch.Tensor, wdtype: torch.dtype,
                  torch_dw: torch.Tensor) -> torch.Tensor:
    """Per column j, what a correct dweight may miss its fp64 reference by: λ·√rows·u·Σ_i|dy_ij·x̂_ij| +
    ε_w·|ref_j| + 2·max_k |torch_k − ref_k| (module docstring; the last term: what torch's own path errs by in
    this dtype, e.g. from a residual sum rounded before it is normalized). Shared with tests/ops."""
    n = xhat.shape[-1]
    terms = (dy.double() * xhat).abs().reshape(-1, n)
    return (LAMBDA * max(1, terms.shape[0]) ** 0.5 * U_ACC * terms.sum(0) + torch.finfo(wdtype).eps * ref.abs()
            + 2 * (torch_dw.double() - ref).abs().max())


def _outputs(x, w, residual, grads, eps: float, n_stat: int | None, impl: str, upcast: bool = False) -> dict:
    """y (and s), and the gradients of x, w (and the residual) for the upstream ``grads``; ``upcast``: in fp64."""
    cast = (lambda t: t.double()) if upcast else (lambda t: t)  # noqa: E731
    leaves = [cast(t).detach().requires_grad_() for t in (x, w, residual) if t is not None]
    out = rms_norm(leaves[0], leaves[1], eps, impl=impl, residual=leaves[2] if residual is not None else None,
                   n_stat=n_stat)
    outs = out if isinstance(out, tuple) else (out,)
    dgrads = torch.autograd.grad(outs, leaves, [cast(g).to(o.dtype) for o, g in zip(outs, grads, strict=True)])
    return {**dict(zip(("y", "s"), outs, strict=False)), **dict(zip(("dx", "dweight", "dresidual"), dgrads,
                                                                      strict=False))}


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
