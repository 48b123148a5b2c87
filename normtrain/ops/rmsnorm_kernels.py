"""Triton kernels for RMSNorm, forward and backward, with an optional fused residual add.

Imported lazily by ``normtrain.ops.rmsnorm_triton`` so that the package imports without triton. Notation:
x (M, N) rows, s = alpha * r + x when a residual is fused, k = n_stat features feed the statistic
(pRMSNorm; k = N for RMSNorm), rstd = 1 / sqrt(mean(s[:k]^2) + eps), y = s * rstd * w.

Two shapes of kernel per direction:
* *tile*: a [BLOCK_M, BLOCK_N] block holds whole rows in registers (BLOCK_N >= N); small rows are
  packed several to a program so that every program moves enough bytes.
* *loop*: a row walked in BLOCK_N chunks twice (statistic, then output); used where a whole row
  would spill registers (N large), so N = 65536 or 131072 does not collapse. The second pass re-reads
  the row while it is still in L2.
Forward programs each take a block of rows (tile) or one row (loop). Backward grids are persistent:
G programs (a few per SM) stride over the rows, host-computed ``iters`` times.

``PARTIAL`` (n_stat < N, pRMSNorm) compiles the masks that restrict the statistic; RMSNorm's variants go without
them, which keeps registers for the rows. The forward stores nothing but y (and s): the backward recomputes rstd
from the row it reads anyway, which saves the host an allocation per call and the custom op a third output.

Backward (g = dy * w, c = sum_j g_j s_j over all N features):
    dx_i = rstd * (g_i - [i < k] * s_i * rstd^2 * c / k)     (+ ds_i, the grad of the returned s)
    dr_i = alpha * dx_i,   dw_j = sum_rows dy_j * s_j * rstd
dw is accumulated in fp32 per program and written as one fp32 partial row per program; ``dw_reduce`` sums the
partial rows in a fixed order and casts once to the weight's dtype. No atomics, so every run sums in the same
order: bit-identical gradients run to run.

Specialization: triton compiles a variant per value class of each int argument (1, a multiple of 16, other)
unless told not to. Strides and N keep it (a row start aligned to 16 elements lets the loads vectorize); the row
count, n_stat and the persistent loop count vary call to call and are never specialized, so a new batch size
does not compile a new variant. Only long-stable ``tl`` APIs are used, so that triton 3.6 (the GPU image) and
3.9 (CI) both build them.
"""

from __future__ import annotations

import triton
import triton.language as tl

_VARYING = ["M", "n_stat", "iters", "eps", "alpha"]


@triton.jit(do_not_specialize=_VARYING)
def rms_fwd_tile(X, R, W, Y, S, M, N, n_stat, stride_x, stride_r, eps, alpha,
                 HAS_RES: tl.constexpr, HAS_W: tl.constexpr, PARTIAL: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    mask = row_ok[:, None] & (cols < N)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_RES:
        r = tl.load(R + rows64 * stride_r + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        s = (x + alpha * r).to(S.dtype.element_ty)  # round once, then normalize what is returned
        tl.store(S + rows64 * N + cols[None, :], s, mask=mask)
        x = s.to(tl.float32)
    xk = tl.where((cols < n_stat)[None, :], x, 0.0) if PARTIAL else x
    rstd = tl.rsqrt(tl.sum(xk * xk, axis=1) / n_stat + eps)
    y = x * rstd[:, None]
    if HAS_W:
        w = tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)
        y = y * w[None, :]
    tl.store(Y + rows64 * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=_VARYING)
def rms_fwd_loop(X, R, W, Y, S, N, n_stat, stride_x, stride_r, eps, alpha,
                 HAS_RES: tl.constexpr, HAS_W: tl.constexpr, PARTIAL: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    row64 = tl.cast(row, tl.int64)
    offs = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    if HAS_RES:
        # Pass 1 forms s over the whole row (it is an output) and accumulates the statistic.
        for start in range(0, N, BLOCK_N):
            cols = start + offs
            m = cols < N
            x = tl.load(X + row64 * stride_x + cols, mask=m, other=0.0).to(tl.float32)
            r = tl.load(R + row64 * stride_r + cols, mask=m, other=0.0).to(tl.float32)
            s = (x + alpha * r).to(S.dtype.element_ty)
            tl.store(S + row64 * N + cols, s, mask=m)
            s = s.to(tl.float32)
            if PARTIAL:
                acc += tl.where(cols < n_stat, s * s, 0.0)
            else:
                acc += s * s
        tl.debug_barrier()  # pass 2 re-reads s written by other threads of this program
    else:
        # Pass 1 only needs the first n_stat features (pRMSNorm reads a fraction of the row).
        for start in range(0, n_stat, BLOCK_N):
            cols = start + offs
            x = tl.load(X + row64 * stride_x + cols, mask=cols < n_stat, other=0.0).to(tl.float32)
            acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_stat + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        m = cols < N
        if HAS_RES:
            x = tl.load(S + row64 * N + cols, mask=m, other=0.0).to(tl.float32)
        else:
            x = tl.load(X + row64 * stride_x + cols, mask=m, other=0.0).to(tl.float32)
        y = x * rstd
        if HAS_W:
            y = y * tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(Y + row64 * N + cols, y.to(Y.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=_VARYING)
def rms_bwd_tile(DY, DS, XS, W, DX, DR, DW_PART, M, N, n_stat, stride_dy, stride_ds, stride_xs,
                 eps, alpha, iters, HAS_DS: tl.constexpr, HAS_DR: tl.constexpr, HAS_W: tl.constexpr,
                 NEED_DW: tl.constexpr, PARTIAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    in_stat = (cols < n_stat)[None, :]  # used only with PARTIAL (n_stat < N): RMSNorm keeps the registers
    if HAS_W:
        w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for i in range(0, iters):  # row blocks pid, pid + G, ...; the last may be past M (all masked)
        rows = (pid + i * tl.num_programs(0)) * BLOCK_M + tl.arange(0, BLOCK_M)
        mask = (rows < M)[:, None] & col_ok[None, :]
        rows64 = rows.to(tl.int64)[:, None]
        x = tl.load(XS + rows64 * stride_xs + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if PARTIAL:
            xk = tl.where(in_stat, x, 0.0)
            rstd = tl.rsqrt(tl.sum(xk * xk, axis=1) / n_stat + eps)[:, None]
        else:
            rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_stat + eps)[:, None]
        g = dy
        if HAS_W:
            g = dy * w
        if NEED_DW:
            dw_acc += dy * (x * rstd)
        coef = rstd * rstd * tl.sum(g * x, axis=1)[:, None] / n_stat
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
        tl.store(DW_PART + pid * N + cols, tl.sum(dw_acc, axis=0), mask=col_ok)


@triton.jit(do_not_specialize=_VARYING)
def rms_bwd_loop(DY, DS, XS, W, DX, DR, DW_PART, M, N, n_stat, stride_dy, stride_ds, stride_xs,
                 eps, alpha, iters, HAS_DS: tl.constexpr, HAS_DR: tl.constexpr, HAS_W: tl.constexpr,
                 NEED_DW: tl.constexpr, PARTIAL: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    # This program owns row `pid` of DW_PART; its first row (i == 0, always < M: G <= M) starts the sum there.
    part = DW_PART + tl.cast(pid, tl.int64) * N
    for i in range(0, iters):  # rows pid, pid + G, ...; the last may be past M (all masked)
        row = pid + i * tl.num_programs(0)
        row64 = tl.cast(row, tl.int64)
        n_cols = tl.where(row < M, N, 0)  # a row past M (last iteration) loads and stores nothing
        acc_xx = tl.zeros([BLOCK_N], dtype=tl.float32)
        acc_gx = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):  # pass 1: sum(s^2) over the first k features and c = sum(g * s)
            cols = start + offs
            m = cols < n_cols
            x = tl.load(XS + row64 * stride_xs + cols, mask=m, other=0.0).to(tl.float32)
            g = tl.load(DY + row64 * stride_dy + cols, mask=m, other=0.0).to(tl.float32)
            if HAS_W:
                g = g * tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
            if PARTIAL:
                acc_xx += tl.where(cols < n_stat, x * x, 0.0)
            else:
                acc_xx += x * x
            acc_gx += g * x
        rstd = tl.rsqrt(tl.sum(acc_xx, axis=0) / n_stat + eps)
        coef = rstd * rstd * tl.sum(acc_gx, axis=0) / n_stat
        for start in range(0, N, BLOCK_N):  # pass 2 (the row is still in L2): dx, dr and the dw partial
            cols = start + offs
            m = cols < n_cols
            x = tl.load(XS + row64 * stride_xs + cols, mask=m, other=0.0).to(tl.float32)
            dy = tl.load(DY + row64 * stride_dy + cols, mask=m, other=0.0).to(tl.float32)
            g = dy
            if HAS_W:
                g = dy * tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
            if PARTIAL:
                dx = rstd * (g - tl.where(cols < n_stat, x * coef, 0.0))
            else:
                dx = rstd * (g - x * coef)
            if HAS_DS:
                dx += tl.load(DS + row64 * stride_ds + cols, mask=m, other=0.0).to(tl.float32)
            tl.store(DX + row64 * N + cols, dx.to(DX.dtype.element_ty), mask=m)
            if HAS_DR:
                tl.store(DR + row64 * N + cols, (alpha * dx).to(DR.dtype.element_ty), mask=m)
            if NEED_DW:
                # i == 0 starts the partial row: no zero-filled buffer, no launch to clear one
                p = tl.load(part + cols, mask=m & (i > 0), other=0.0)
                tl.store(part + cols, p + dy * x * rstd, mask=m)


@triton.jit(do_not_specialize=["P"])
def dw_reduce(PART, DW, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    """DW[j] = sum over the P partial rows of PART[:, j], in a fixed order, cast once to DW's dtype."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows < P)[:, None] & col_ok[None, :]
        acc += tl.load(PART + rows.to(tl.int64)[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(DW + cols, tl.sum(acc, axis=0).to(DW.dtype.element_ty), mask=col_ok)
