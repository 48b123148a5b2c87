"""Fused Triton RMSNorm against an fp64 torch reference (CPU interpreter in CI; see conftest.py).

Tolerances as the guard's (normtrain/ops/guard.py), each fitting its quantity: for the elementwise outputs and
grads flash-attention's max|kernel - ref| <= 2 * max|torch_same_dtype - ref| + atol, so a kernel is held to the
error torch itself makes in that dtype; for dw, a sum over the rows that two correct kernels may take in different
orders, the probabilistic bound of such a sum (grows with sqrt(rows)) plus the final rounding to w's dtype.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys

import pytest
import torch

from normtrain.ops import guard, rms_norm
from normtrain.ops import rmsnorm as R
from normtrain.ops import rmsnorm_triton as T

HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
DEVICE = "cuda" if os.environ.get("TRITON_INTERPRET") == "0" and torch.cuda.is_available() else "cpu"
EPS = 1e-6
ATOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
SAME = "same"  # weight in the input dtype


def case(shape, dtype=F32, weight=F32, *, residual=False, alpha=1.0, n_stat=None, x_layout="contig",
         g_layout="contig", res_dtype=None, use_s=True, values="randn", marks=(), tag=""):
    """One test case; the id names what varies."""
    parts = ["x".join(map(str, shape)), str(dtype).split(".")[-1], f"w={str(weight).split('.')[-1]}"]
    parts += [f"res(a={alpha})" if residual else "", f"k={n_stat}" if n_stat else "", x_layout, g_layout,
              values, tag]
    kw = dict(shape=shape, dtype=dtype, weight=weight, residual=residual, alpha=alpha, n_stat=n_stat,
              x_layout=x_layout, g_layout=g_layout, res_dtype=res_dtype, use_s=use_s, values=values)
    return pytest.param(kw, id="-".join(p for p in parts if p and p not in ("contig", "randn")), marks=marks)


WIDTHS = [1, 7, 64, 257, 1000, 4096, 5000]
CASES = [  # every width in every dtype, weight cycling None / fp32 / input dtype
    case((129 if n <= 1000 else 3, n), dt, [None, F32, SAME][(i + j) % 3])
    for i, n in enumerate(WIDTHS) for j, dt in enumerate((F32, F16, BF16))
]
CASES += [  # rows: empty, one, few, many; 3-D and empty 3-D
    case((0, 257), BF16, SAME), case((1, 257), BF16, SAME), case((3, 257), F16, F32),
    case((3, 43, 257), BF16, F32), case((2, 0, 64), F32, F32), case((2, 3, 5000), F16, SAME),
    case((129, 4096), BF16, F32),
]
CASES += [  # non-contiguous x (and residual) and grads: copied only when the last dim is not unit-stride
    case((129, 257), F32, F32, x_layout="transposed"), case((129, 1000), BF16, SAME, x_layout="sliced"),
    case((3, 43, 64), F16, F32, x_layout="sliced"), case((129, 257), BF16, F32, x_layout="strided_rows"),
    case((129, 257), F32, F32, g_layout="transposed"), case((129, 1000), BF16, SAME, g_layout="sliced"),
]
CASES += [  # fused residual add (Pre-LN alpha=1, DeepNorm alpha=(2M)^1/4)
    case((129, 7), F32, F32, residual=True), case((129, 1000), BF16, SAME, residual=True, alpha=2.632),
    case((3, 5000), F16, F32, residual=True, alpha=0.5), case((3, 43, 64), BF16, None, residual=True),
    case((129, 257), BF16, F32, residual=True, res_dtype=F32, tag="fp32-stream"),
    case((129, 257), F16, SAME, residual=True, use_s=False, tag="s-unused"),
    case((129, 257), F32, F32, residual=True, alpha=2.0, x_layout="sliced", g_layout="transposed"),
]
CASES += [  # pRMSNorm: statistic from the first k features
    case((129, 64), F32, F32, n_stat=4), case((129, 1000), BF16, SAME, n_stat=63),
    case((3, 5000), F16, F32, n_stat=313, residual=True), case((129, 257), BF16, None, n_stat=257),
]
CASES += [  # the widths and row counts the best kernels test (Liger-Kernel, QuACK): odd multiples of 8, 1 and 199 rows
    case((199, 760), BF16, SAME), case((1, 1128), F32, F32, residual=True), case((199, 3000), F16, F32),
    case((1, 3000), BF16, None, residual=True, alpha=2.0), case((199, 1128), BF16, F32, n_stat=71),
]
CASES += [  # zero rows (eps decides rstd), large magnitudes (fp16 sum of squares would overflow)
    case((129, 257), F32, F32, values="zero_rows"), case((129, 1000), BF16, SAME, values="zero_rows"),
    case((129, 1000), F16, SAME, values="large"), case((129, 257), F16, F32, residual=True, values="large"),
]
WIDE = [  # the looped kernels at real widths (cheap: few rows)
    case((3, 65536), BF16, SAME, marks=pytest.mark.slow),
    case((2, 65536), F32, F32, residual=True, n_stat=4096, marks=pytest.mark.slow),
    case((1, 131072), BF16, F32, marks=pytest.mark.slow),
    case((2, 131072), F32, SAME, residual=True, alpha=0.5, marks=pytest.mark.slow),
]
LOOPED = [  # the looped kernels forced at small widths: chunk remainders, several programs, all options
    case((9, 65), F32, F32), case((17, 300), BF16, SAME, residual=True, alpha=2.0),
    case((9, 1000), F16, None, n_stat=63), case((9, 1000), BF16, F32, n_stat=200, residual=True),
    case((17, 300), F32, F32, values="zero_rows", x_layout="sliced", g_layout="sliced"),
]


def make_input(shape, dtype, layout, values="randn", seed=0):
    """A tensor of `shape` with the asked values and memory layout."""
    *lead, n = shape
    v = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    if values == "zero_rows":
        v.view(-1, n)[::3] = 0.0
    elif values == "large":
        v *= 1e4
    empty = lambda *size: torch.empty(size, dtype=dtype, device=DEVICE)
    if layout == "transposed":  # last dim not unit-stride: the one layout that must be copied
        buf = empty(*reversed(shape)).permute(*reversed(range(len(shape))))
    elif layout == "sliced":  # padded rows: unit column stride, row stride > n
        buf = empty(*lead, n + 5)[..., :n]
    elif layout == "strided_rows":  # every other row
        buf = empty(2 * lead[0], *lead[1:], n)[::2]
    else:
        buf = empty(*shape)
    return buf.copy_(v)


def forward_backward(c, x, w, r, grads, impl, upcast=False):
    """Outputs and input grads through rms_norm; upcast=True gives the fp64 reference."""
    cast = (lambda t: t.double()) if upcast else (lambda t: t)
    named = (("x", x), ("w", w), ("r", r))
    leaves = {k: cast(t).detach().requires_grad_() for k, t in named if t is not None}
    out = rms_norm(leaves["x"], leaves.get("w"), EPS, impl=impl, residual=leaves.get("r"), alpha=c["alpha"],
                   n_stat=c["n_stat"])
    outs = dict(zip(("y", "s"), out, strict=True)) if r is not None else {"y": out}
    used = [(o, cast(g)) for o, g in zip(outs.values(), grads, strict=True) if g is not None]
    dgrads = torch.autograd.grad([o for o, _ in used], list(leaves.values()), [g for _, g in used])
    return {**outs, **{"d" + k: g for k, g in zip(leaves, dgrads, strict=True)}}


def assert_matches(c, outs, same, ref, dw_bound=None):
    """Every output and grad within its bound: dw's (``dw_bound``, per column), else flash-attention's."""
    atol = ATOL[c["dtype"]]
    for name, o in outs.items():
        assert o.shape == ref[name].shape and o.dtype == same[name].dtype, name
        if o.numel() == 0:
            continue
        err = (o.double() - ref[name].double()).abs()
        if name == "dw":
            excess = (err - dw_bound).max().item()
            assert math.isfinite(excess) and excess <= 0, f"dw: max error over its bound {excess:.3g}"
            continue
        err = err.max().item()
        bound = 2 * (same[name].double() - ref[name].double()).abs().max().item() + atol
        assert math.isfinite(err) and err <= bound, f"{name}: max error {err:.3g} > bound {bound:.3g}"


def check(c):
    torch.manual_seed(0)
    shape, dtype = c["shape"], c["dtype"]
    x = make_input(shape, dtype, c["x_layout"], c["values"], seed=1)
    wdt = dtype if c["weight"] == SAME else c["weight"]
    w = None if wdt is None else (1 + 0.5 * torch.randn(shape[-1])).to(dtype=wdt, device=DEVICE)
    r = None
    if c["residual"]:
        values = "large" if c["values"] == "large" else "randn"
        r = make_input(shape, c["res_dtype"] or dtype, c["x_layout"], values, seed=2)
    n_out = 2 if r is not None else 1
    out_dtype = dtype if r is None else torch.promote_types(dtype, r.dtype)
    grads = [make_input(shape, out_dtype, c["g_layout"], seed=3 + i) for i in range(n_out)]
    if r is not None and not c["use_s"]:
        grads[1] = None
    outs = forward_backward(c, x, w, r, grads, "triton")
    same = forward_backward(c, x, w, r, grads, "torch")
    ref = forward_backward(c, x, w, r, grads, "torch", upcast=True)
    dw_bound = None
    if w is not None:
        normed = x.double() if r is None else x.double() + c["alpha"] * r.double()
        dw_bound = guard.dweight_bound(grads[0], guard.normalized(normed, c["n_stat"], EPS), ref["dw"], w.dtype,
                                       same["dw"])
    assert_matches(c, outs, same, ref, dw_bound)


@needs_triton
@pytest.mark.parametrize("c", CASES + WIDE)
def test_forward_backward_matches_fp32_reference(c):
    check(c)


@needs_triton
@pytest.mark.parametrize("c", LOOPED)
def test_looped_path_matches_fp32_reference(c, monkeypatch):
    monkeypatch.setattr(T, "MAX_TILE_N", 32)
    monkeypatch.setattr(T, "MAX_TILE_N_BWD", 32)
    monkeypatch.setattr(T, "LOOP_BLOCK_N", 128)
    n = c["shape"][-1]
    assert T.config(n, False, T._limits())[0] and T.config(n, True, T._limits())[0]
    check(c)


@needs_triton
def test_many_programs_and_rows_past_the_last_sum_dw_exactly_once(monkeypatch):
    """A persistent grid whose last round runs past M (some programs idle), tile and looped: dw must count
    every row once; the dw reduction must sum more partial rows than one of its steps holds."""
    monkeypatch.setattr(T, "CPU_PROGRAMS", 3)
    monkeypatch.setattr(T, "BWD_TILE_ELEMS", 128)  # 2 rows of 64 a block: 5 blocks over 3 programs
    monkeypatch.setattr(T, "DW_BLOCK_P", 2)
    check(dict(shape=(10, 33), dtype=F32, weight=F32, residual=False, alpha=1.0, n_stat=None, x_layout="contig",
               g_layout="contig", res_dtype=None, use_s=True, values="randn"))
    monkeypatch.setattr(T, "MAX_TILE_N_BWD", 16)
    monkeypatch.setattr(T, "LOOP_BLOCK_N", 16)
    check(dict(shape=(7, 40), dtype=BF16, weight=SAME, residual=True, alpha=1.0, n_stat=None, x_layout="contig",
               g_layout="contig", res_dtype=None, use_s=True, values="randn"))


@needs_triton
def test_results_are_bit_identical_run_to_run():
    """No atomics: the same inputs give the same bits, dw included (a resumed run matches an unbroken one)."""
    x = torch.randn(97, 300, device=DEVICE, requires_grad=True)
    w = torch.rand(300, device=DEVICE, requires_grad=True)
    grads = []
    for _ in range(2):
        y = rms_norm(x, w, EPS, impl="triton")
        grads.append(torch.autograd.grad(y, (x, w), torch.ones_like(y)))
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))


def test_matrix_is_large_enough():
    assert len(CASES + WIDE + LOOPED) >= 40


# ---------------------------------------------------------------- dispatch and errors


def test_auto_uses_torch_on_cpu(monkeypatch):
    monkeypatch.setattr(T, "forward", lambda *a: pytest.fail("auto must not launch Triton on a CPU tensor"))
    x = torch.randn(4, 8)
    torch.testing.assert_close(rms_norm(x, impl="auto"), rms_norm(x, impl="torch"))


def test_bad_arguments_raise():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="unknown impl"):
        rms_norm(x, impl="cuda")
    with pytest.raises(ValueError, match="n_stat"):
        rms_norm(x, n_stat=9)
    with pytest.raises(ValueError, match="weight must have shape"):
        rms_norm(x, torch.ones(4), impl="triton")
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        rms_norm(x.double(), impl="triton")


def test_triton_without_triton_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(T, "_KERNELS", [ImportError("No module named 'triton'")])
    monkeypatch.setattr(R, "_MODE", [])
    with pytest.raises(RuntimeError, match="needs triton"):
        rms_norm(torch.randn(2, 8), impl="triton")


@needs_triton
def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    monkeypatch.setattr(R, "_triton_mode", lambda: "compiled")
    with pytest.raises(RuntimeError, match="Set TRITON_INTERPRET=1"):
        rms_norm(torch.randn(2, 8), impl="triton")
    monkeypatch.setattr(R, "_triton_mode", lambda: "late")
    with pytest.raises(RuntimeError, match="set after triton was first imported"):
        rms_norm(torch.randn(2, 8), impl="triton")


def test_package_imports_without_triton():
    code = ("import sys; sys.modules['triton'] = None\n"
            "import torch, normtrain.ops as ops\n"
            "x = torch.randn(3, 8)\n"
            "assert torch.equal(ops.rms_norm(x), ops.rms_norm(x, impl='torch'))\n"
            "try:\n    ops.rms_norm(x, impl='triton')\nexcept RuntimeError as e:\n    print(e)\n")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert "needs triton" in out.stdout


# Compiles every kernel shape for an H100 (sm_90) with triton's own ptxas, no GPU needed, and prints
# the registers and stack (spill) bytes cuobjdump reports; run in a fresh process without the interpreter.
AOT = """
import os, subprocess, sys, tempfile, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from normtrain.ops import rmsnorm_kernels as K, rmsnorm_triton as T
KERNELS = {(0, 0): K.rms_fwd_tile, (0, 1): K.rms_fwd_loop, (1, 0): K.rms_bwd_tile, (1, 1): K.rms_bwd_loop}
cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")

def build(fn, consts, dt, warps, fp32_ptrs):
    ptr = lambda a: a.isupper() and a not in ("M", "N", "P")
    sig = {a: ("*fp32" if a in fp32_ptrs else f"*{dt}") if ptr(a) else "fp32" if a in ("eps", "alpha") else "i32"
           for a in fn.arg_names if a not in consts}
    src = ASTSource(fn, {**sig, **{c: "constexpr" for c in consts}}, consts)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    usage = "REG:? STACK:?"
    if os.path.exists(cuobjdump):
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"])
            f.flush()
            out = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
        usage = " ".join(w for w in out.split() if w.startswith(("REG:", "STACK:")))
    return usage

for n in (7, 256, 4096, 8192, 16384, 65536):
    for dt, res in (("bf16", True), ("fp32", False)):
        for bwd in (False, True):
            looped, bm, bn, warps = T.config(n, bwd, T._limits())
            flags = dict(HAS_DS=res, HAS_DR=res, NEED_DW=True) if bwd else dict(HAS_RES=res)
            flags["PARTIAL"] = not res  # both forms: pRMSNorm's masks with the fp32 rows
            consts = {**flags, "HAS_W": True, "BLOCK_N": bn, **({} if looped else {"BLOCK_M": bm})}
            usage = build(KERNELS[bwd, looped], consts, dt, warps, ("W", "DW_PART"))
            print(KERNELS[bwd, looped].__name__, n, dt, "res" if res else "-", usage, flush=True)
for dt in ("bf16", "fp32"):
    usage = build(K.dw_reduce, {"BLOCK_P": T.DW_BLOCK_P, "BLOCK_N": T.DW_BLOCK_N}, dt, T.DW_WARPS, ("PART",))
    print("dw_reduce", dt, usage, flush=True)
from normtrain.ops import rmsnorm_rows_kernels as RK  # the rows backward (NORMTRAIN_RMSNORM_BWD=rows)
for n in (256, 8192, 16384, 65536):
    for dt, res in (("bf16", True), ("fp32", False)):
        inline, bm, bn, warps = T.rows_config(n, T._rows_limits())
        flags = dict(HAS_DS=res, HAS_DR=res, HAS_W=True, NEED_DW=True, PARTIAL=not res)
        consts = {**flags, "INLINE": inline, "BLOCK_M": bm, "BLOCK_N": bn}
        usage = build(RK.rms_bwd_rows, consts, dt, warps, ("W", "DW_PART", "STATS"))
        print("rms_bwd_rows", n, dt, "res" if res else "-", usage, flush=True)
        if not inline:
            consts = {"HAS_W": True, "PARTIAL": not res, "BLOCK_M": bm, "BLOCK_N": bn}
            usage = build(RK.rms_bwd_rows_stats, consts, dt, warps, ("W", "STATS"))
            print("rms_bwd_rows_stats", n, dt, usage, flush=True)
"""


@needs_triton
@pytest.mark.slow
def test_kernels_compile_for_h100_without_register_spills():
    """The compiled (not interpreted) kernels build for sm_90, and no launch configuration spills."""
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_DEFAULT_FP_FUSION": "1"}
    out = subprocess.run([sys.executable, "-c", AOT], capture_output=True, text=True, env=env)
    if out.returncode != 0 and "No module named" in out.stderr and "nvidia" in out.stderr:
        pytest.skip("this triton has no NVIDIA backend")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 38
    spills = [line for line in lines if "STACK:" in line and "STACK:0" not in line]
    assert not spills, "register spills:\n" + "\n".join(spills)


def test_block_sizes_are_bucketed():
    """One compiled variant per power-of-two bucket: widths in a bucket share their constexprs."""
    config = lambda n, bwd=False: T.config(n, bwd, T._limits())  # noqa: E731
    assert config(257) == config(512)
    assert config(T.MAX_TILE_N)[0] is False and config(T.MAX_TILE_N + 1)[0] is True
    assert config(T.MAX_TILE_N_BWD, True)[0] is False
    assert config(T.MAX_TILE_N_BWD + 1, True)[0] is True
    assert config(65536) == config(131072)


# ---------------------------------------------------------------- torch.library and torch.compile


@needs_triton
def test_custom_ops_pass_opcheck():
    x = torch.randn(2, 3, 40, device=DEVICE)
    w, r = torch.rand(40, device=DEVICE), torch.randn(2, 3, 40, device=DEVICE)
    for args in [(x, w, r, 1e-6, 2.0, 40), (x, None, None, 1e-5, 1.0, 7)]:
        torch.library.opcheck(torch.ops.normtrain.rms_norm_fwd.default, args)
    dy = torch.randn_like(x)
    torch.library.opcheck(torch.ops.normtrain.rms_norm_bwd.default,
                          (dy, dy, x, w, 1e-6, 2.0, 40, torch.float32, torch.float32, True))
    torch.library.opcheck(torch.ops.normtrain.rms_norm_bwd.default,
                          (dy, None, x, None, 1e-5, 1.0, 40, torch.float32, None, False))


@needs_triton
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_full_graph(backend):
    """The kernel path compiles without a graph break, grads included, and shapes do not recompile."""
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm.code)
        return torch._dynamo.lookup_backend(backend)(gm, example_inputs)

    def block(x, w, r):
        y, s = rms_norm(x * 2, w, EPS, impl="triton", residual=r, alpha=1.5)
        return rms_norm(y, w, EPS, impl="triton", n_stat=5).square().sum() + s.sum()

    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, backend=counting, dynamic=True)
    for rows in (6, 10):
        if rows == 10:
            traced = len(graphs)  # dynamo may trace the first call twice (it restarts to specialize floats)
        x, r = torch.randn(2, rows, 40, device=DEVICE), torch.randn(2, rows, 40, device=DEVICE)
        w = torch.rand(40, device=DEVICE)
        got, want = [], []
        for fn, out in ((compiled, got), (block, want)):
            leaves = [t.clone().requires_grad_() for t in (x, w, r)]
            loss = fn(*leaves)
            out += [loss, *torch.autograd.grad(loss, leaves)]
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert len(graphs) == traced, "a new number of rows must not recompile"
    assert all("normtrain.rms_norm_fwd" in g for g in graphs)


def test_the_triton_mode_is_marked_constant_the_way_torch_marks_it():
    """ops marks ``_triton_mode`` itself (importing torch.compiler's decorator costs a torch._dynamo import); this
    fails if torch ever marks a constant-result function differently."""
    def probe() -> int:
        return 1

    torch.compiler.assume_constant_result(probe)
    assert vars(probe) == {R.CONSTANT_MARK: True} == vars(R._triton_mode)


def test_the_host_code_traces_with_symbolic_shapes():
    """What torch.compile's traced ops (triton_ops, on a GPU) run with dynamic shapes: the width specializes (it
    picks the block sizes), the rows stay symbolic, and nothing hashes or compares a symbol on the way (an
    lru_cache keyed on a symbolic width failed on an H200)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    launches = []

    def record(name, grid, args, consts, num_warps):
        launches.append((name, grid, consts))

    def fwd_bwd(x, w, r, dy):
        y, s = T.forward(x, w, r, 1e-6, 1.0, x.shape[-1], launch=record)
        dx, dr, dw = T.backward(dy, dy, s, w, 1e-6, 1.0, x.shape[-1], x.dtype, r.dtype, True, launch=record)
        return y, s, dx, dr, dw

    x, r, dy = torch.randn(6, 40), torch.randn(6, 40), torch.randn(6, 40)
    make_fx(fwd_bwd, tracing_mode="symbolic")(x, torch.rand(40), r, dy)
    names = [name for name, _, _ in launches]
    assert names == ["rms_fwd_tile", "rms_bwd_tile", "dw_reduce"]
    assert isinstance(launches[0][1], torch.SymInt)  # the forward's grid follows the (symbolic) rows


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("weight", [None, SAME, F32])
def test_the_torch_path_is_torchs_fused_op_where_it_computes_the_same_formula(dtype, weight, monkeypatch):
    """impl='torch' runs F.rms_norm for no weight or a weight in x's dtype, the written-out formula otherwise (a
    weight in another dtype, pRMSNorm): both paths give the same numbers (on CPU, F.rms_norm is that formula)."""
    x = (3 * torch.randn(5, 7, 96)).to(dtype)
    w = None if weight is None else (1 + 0.5 * torch.randn(96)).to(dtype if weight == SAME else weight)
    used, original = [], torch.nn.functional.rms_norm
    monkeypatch.setattr(R.F, "rms_norm", lambda *a: used.append(a) or original(*a))
    fused = R._rms_norm_torch(x, w, EPS)
    assert bool(used) == (w is None or w.dtype == dtype)
    xf = x.float()
    written = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    written = (written if w is None else written * w.float()).to(dtype)
    assert fused.dtype == dtype
    torch.testing.assert_close(fused, written, rtol=0, atol=0)
