"""The blocked-rows RMSNorm backward (``NORMTRAIN_RMSNORM_BWD=rows``) against the fp64 reference, under Triton's CPU
interpreter: dx, dW and the residual path with test_rmsnorm.py's bounds, at the widths and row counts QuACK and
Liger-Kernel test; its chunked path (statistics first) forced at small widths; bit-identical gradients run to run;
and how the flag is chosen (the environment, ``set_backward``) and refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from test_rmsnorm import BF16, DEVICE, EPS, F16, F32, SAME, case, check, needs_triton

from normtrain.ops import rms_norm
from normtrain.ops import rmsnorm_triton as T


@pytest.fixture
def rows(monkeypatch):
    """The rows backward for this test only (monkeypatch restores the process's choice)."""
    monkeypatch.setattr(T, "_BACKWARD", ["rows"])


SHAPES = [  # QuACK's and Liger-Kernel's widths (odd multiples of 8, one past 2^17 / 8), 1 and 199 rows
    case((1, 760), BF16, SAME), case((199, 760), F32, F32, residual=True, alpha=2.0),
    case((1, 1128), F16, F32, residual=True), case((199, 1128), BF16, F32, n_stat=71),
    case((1, 3000), F32, None), case((199, 3000), BF16, SAME, residual=True, res_dtype=F32, tag="fp32-stream"),
    case((1, 131072), BF16, F32), case((1, 131072), F32, SAME, residual=True, alpha=0.5, n_stat=4096),
]
CHUNKED = [  # statistics kernel, then column chunks: remainders, several row blocks, every option
    case((9, 65), F32, F32), case((17, 300), BF16, SAME, residual=True, alpha=2.0),
    case((9, 1000), F16, None, n_stat=63), case((33, 200), BF16, F32, n_stat=50, residual=True, use_s=False),
    case((17, 300), F32, F32, values="zero_rows", x_layout="sliced", g_layout="transposed"),
]


@needs_triton
@pytest.mark.parametrize("c", SHAPES)
def test_rows_backward_matches_fp32_reference(c, rows):
    check(c)


@needs_triton
@pytest.mark.parametrize("c", CHUNKED)
def test_rows_chunked_path_matches_fp32_reference(c, rows, monkeypatch):
    monkeypatch.setattr(T, "ROWS_MAX_INLINE_N", 32)
    monkeypatch.setattr(T, "ROWS_CHUNK_N", 64)
    monkeypatch.setattr(T, "ROWS_TILE_ELEMS", 128)  # 2 rows a step
    monkeypatch.setattr(T, "CPU_PROGRAMS", 12)  # several row blocks of several steps, the last one short
    assert not T.rows_config(c["shape"][-1], T._rows_limits())[0]
    check(c)


def grads_twice(shape, residual: bool):
    """(dx, dw[, dr]) of two identical backward passes."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=gen).to(DEVICE).requires_grad_()
    w = torch.rand(shape[-1], generator=gen).to(DEVICE).requires_grad_()
    r = torch.randn(*shape, generator=gen).to(DEVICE).requires_grad_() if residual else None
    runs = []
    for _ in range(2):
        out = rms_norm(x, w, EPS, impl="triton", residual=r)
        y = out[0] if residual else out
        runs.append(torch.autograd.grad(y, [t for t in (x, w, r) if t is not None], torch.ones_like(y)))
    return runs


@needs_triton
def test_rows_results_are_bit_identical_run_to_run(rows, monkeypatch):
    """dW partials summed in a fixed order: the same bits twice, inline and chunked (several row blocks)."""
    monkeypatch.setattr(T, "CPU_PROGRAMS", 6)
    first, second = grads_twice((97, 300), residual=False)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    monkeypatch.setattr(T, "ROWS_MAX_INLINE_N", 64)
    monkeypatch.setattr(T, "ROWS_CHUNK_N", 64)
    first, second = grads_twice((41, 300), residual=True)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def launched(n: int, m: int = 6) -> list[str]:
    """The kernels one backward of an (m, n) input launches (recorded, not run)."""
    names = []
    x = torch.randn(m, n)
    T.backward(x, None, x, torch.rand(n), EPS, 1.0, n, x.dtype, None, True,
               launch=lambda name, *a: names.append(name))
    return names


def test_the_flag_picks_the_backward(monkeypatch):
    """tile by default; rows by the environment or set_backward; the rows kernel alone below its chunk width, its
    statistics kernel first above it; the dW partials reduced by the same kernel either way."""
    monkeypatch.setattr(T, "_BACKWARD", [])
    monkeypatch.delenv(T.BACKWARD_ENV, raising=False)
    assert T.backward_kind() == "tile" and launched(300) == ["rms_bwd_tile", "dw_reduce"]
    monkeypatch.setattr(T, "_BACKWARD", [])
    monkeypatch.setenv(T.BACKWARD_ENV, "rows")
    assert T.backward_kind() == "rows" and launched(300) == ["rms_bwd_rows", "dw_reduce"]
    assert launched(131072) == ["rms_bwd_rows_stats", "rms_bwd_rows", "dw_reduce"]
    T.set_backward("tile")
    assert launched(131072) == ["rms_bwd_loop", "dw_reduce"]


def test_a_bad_flag_names_the_allowed_values(monkeypatch):
    monkeypatch.setattr(T, "_BACKWARD", [])
    monkeypatch.setenv(T.BACKWARD_ENV, "blocked")
    with pytest.raises(ValueError, match=r"NORMTRAIN_RMSNORM_BWD='blocked'.*allowed: tile, rows"):
        T.backward_kind()
    with pytest.raises(ValueError, match=r"'row' is unknown; allowed: tile, rows"):
        T.set_backward("row")


def test_the_public_api_sets_the_backward(monkeypatch):
    from normtrain import ops

    monkeypatch.setattr(T, "_BACKWARD", [])
    ops.set_backward("rows")
    assert ops.backward_kind() == "rows"


def test_a_bad_flag_in_the_environment_fails_the_first_backward_with_its_message():
    """Read when a backward first runs, not at import: the package still imports, the backward says why."""
    code = ("import torch\nfrom normtrain.ops import rmsnorm_triton as T\n"
            "x = torch.randn(2, 8)\n"
            "try:\n    T.backward(x, None, x, None, 1e-6, 1.0, 8, x.dtype, None, False, launch=print)\n"
            "except ValueError as e:\n    print(e)\n")
    env = {**os.environ, T.BACKWARD_ENV: "fast"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert "allowed: tile, rows" in out.stdout


def test_the_rows_host_code_traces_with_symbolic_shapes(rows):
    """As the default's: the width specializes, the rows stay symbolic (torch.compile's traced ops)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    names = []

    def bwd(x, w, dy):
        return T.backward(dy, None, x, w, EPS, 1.0, x.shape[-1], x.dtype, None, True,
                          launch=lambda name, grid, *a: names.append((name, grid)))

    make_fx(bwd, tracing_mode="symbolic")(torch.randn(6, 40), torch.rand(40), torch.randn(6, 40))
    assert [name for name, _ in names] == ["rms_bwd_rows", "dw_reduce"]
    assert isinstance(names[0][1], torch.SymInt)  # the grid follows the (symbolic) rows
