"""The *blocked-rows* RMSNorm backward (``NORMTRAIN_RMSNORM_BWD=rows``): a candidate for wide rows, behind a flag.

Why another backward: the default one (``rmsnorm_kernels.rms_bwd_tile`` / ``rms_bwd_loop``) walks a row wider than
its tile in chunks and, for each row, reads its program's fp32 dW partial, adds, and writes it back: at N 16384 that
read-modify-write moves as many bytes as the row itself. Here each program owns a contiguous block of rows and one
column chunk of BLOCK_N features (program ``pid`` = row block ``pid // C``, chunk ``pid % C``, C = ceil(N /
BLOCK_N)); it loops over its rows, keeps its dW partial for that chunk in registers, and writes it once. The
partial rows are then summed in a fixed order by ``rmsnorm_kernels.dw_reduce``: no atomics, bit-identical
gradients run to run, as the default.

dx needs two per-row reductions over the whole row (sum s^2 over the first k features, and c = sum_j g_j s_j).
* ``INLINE`` (C = 1, the row fits one chunk): computed from the tile the program holds; x and dy are read once.
* otherwise ``rms_bwd_rows_stats`` computes them first, one fp32 pair a row (``STATS``: rstd at [row],
  coef = rstd^2 c / k at [M + row]); the main kernel reads them and never needs a whole row on chip, so any width
  works (131072 included). The price is a second read of x and dy.

The formula is the default's (rmsnorm_kernels.py): dx = rstd (g - [i < k] s coef) (+ ds), dr = alpha dx,
dw_j = sum_rows dy_j s_j rstd, with g = dy w. Which block sizes and warps are fastest is for a measured sweep
(scripts/bench_rmsnorm.py --sweep-rows); until one shows this kernel faster, the default stays.
"""

from __future__ import annotations

import triton
import triton.language as tl

_VARYING = ["M", "n_stat", "rows_per_prog", "eps", "alpha"]


@triton.jit(do_not_specialize=_VARYING)
def rms_bwd_rows_stats(DY, XS, W, STATS, M, N, n_stat, stride_dy, stride_xs, eps,
                       HAS_W: tl.constexpr, PARTIAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """STATS[row] = rstd, STATS[M + row] = rstd^2 * sum(g * s) / k for BLOCK_M rows, walked in BLOCK_N chunks."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    rows64 = rows.to(tl.int64)[:, None]
    offs = tl.arange(0, BLOCK_N)
    acc_xx = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_gx = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = row_ok[:, None] & (cols < N)[None, :]
        x = tl.load(XS + rows64 * stride_xs + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        g = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_W:
            g = g * tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
        if PARTIAL:
            acc_xx += tl.where((cols < n_stat)[None, :], x * x, 0.0)
        else:
            acc_xx += x * x
        acc_gx += g * x
    rstd = tl.rsqrt(tl.sum(acc_xx, axis=1) / n_stat + eps)
    tl.store(STATS + rows, rstd, mask=row_ok)
    tl.store(STATS + M + rows, rstd * rstd * tl.sum(acc_gx, axis=1) / n_stat, mask=row_ok)


@triton.jit(do_not_specialize=_VARYING)
def rms_bwd_rows(DY, DS, XS, W, STATS, DX, DR, DW_PART, M, N, n_stat, stride_dy, stride_ds, stride_xs,
                 eps, alpha, rows_per_prog, HAS_DS: tl.constexpr, HAS_DR: tl.constexpr, HAS_W: tl.constexpr,
                 NEED_DW: tl.constexpr, PARTIAL: tl.constexpr, INLINE: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr):
    """dx (and dr) for rows [b * rows_per_prog, (b + 1) * rows_per_prog) in column chunk c; DW_PART[b, chunk]."""
    if INLINE:  # one chunk: the columns are known at compile time (keeps registers: 8192 spilled without)
        block = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
    else:
        n_chunks = tl.cdiv(N, BLOCK_N)
        block, chunk = tl.program_id(0) // n_chunks, tl.program_id(0) % n_chunks
        cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    in_stat = (cols < n_stat)[None, :]  # used only with PARTIAL (n_stat < N)
    if HAS_W:
        w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    first = block * rows_per_prog  # the host makes rows_per_prog a multiple of BLOCK_M: blocks never overlap
    for start in range(0, rows_per_prog, BLOCK_M):
        rows = first + start + tl.arange(0, BLOCK_M)
        row_ok = rows < M
        mask = row_ok[:, None] & col_ok[None, :]
        rows64 = rows.to(tl.int64)[:, None]
        x = tl.load(XS + rows64 * stride_xs + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        g = dy
        if HAS_W:
            g = dy * w
        if INLINE:
            xk = tl.where(in_stat, x, 0.0) if PARTIAL else x
            rstd = tl.rsqrt(tl.sum(xk * xk, axis=1) / n_stat + eps)[:, None]
            coef = rstd * rstd * tl.sum(g * x, axis=1)[:, None] / n_stat
        else:
            rstd = tl.load(STATS + rows, mask=row_ok, other=0.0)[:, None]
            coef = tl.load(STATS + M + rows, mask=row_ok, other=0.0)[:, None]
        if NEED_DW:
            dw_acc += dy * (x * rstd)
        if PARTIAL:
            dx = rstd * (g - tl.where(in_stat, x * coef, 0.0))
        else:
            dx = rstd * (g - x * coef)
        if HAS_DS:
            dx += tl.load(DS + rows64 * stride_ds + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        tl.store(DX + rows64 * N + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        if HAS_DR:
            tl.store(DR + rows64 * N + cols[None, :], (alpha * dx).to(DR.dtype.element_ty), mask=mask)
    if NEED_DW:
        tl.store(DW_PART + tl.cast(block, tl.int64) * N + cols, tl.sum(dw_acc, axis=0), mask=col_ok)
