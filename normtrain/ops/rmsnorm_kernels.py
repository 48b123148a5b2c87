"""Triton kernels for RMSNorm, forward and backward, with an optional fused residual add.

Imported lazily by ``normtrain.ops.rmsnorm`` so that the package imports without triton. Notation:
x (M, N) rows, s = alpha * r + x when a residual is fused, k = n_stat features feed the statistic
(pRMSNorm; k = N for RMSNorm), rstd = 1 / sqrt(mean(s[:k]^2) + eps), y = s * rstd * w.

Two shapes of kernel per direction:
* *tile*: a [BLOCK_M, BLOCK_N] block holds whole rows in registers (BLOCK_N >= N); small rows are
  packed several to a program so that every program moves enough bytes.
* *loop*: a row walked in BLOCK_N chunks twice (statistic, then output); used where a whole row
  would spill registers (N large), so N = 65536 or 131072 does not collapse.
Forward programs each take a block of rows (tile) or one row (loop). Backward grids are persistent:
G programs (about one wave on the GPU) stride over the rows, host-computed ``iters`` times.

Backward (g = dy * w, c = sum_j g_j s_j over all N features):
    dx_i = rstd * (g_i - [i < k] * s_i * rstd^2 * c / k)     (+ ds_i, the grad of the returned s)
    dr_i = alpha * dx_i,   dw_j = sum_rows dy_j * s_j * rstd
dw is accumulated in fp32 per program over a persistent grid and written as one fp32 partial row
per program; the host sums the partials. No atomics, nothing low-precision in between.
Only long-stable ``tl`` APIs are used, so that triton 3.6 (the GPU image) and 3.9 (CI) both build them.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def rms_fwd_tile(X, R, W, Y, S, RSTD, M, N, n_stat, stride_x, stride_r, eps, alpha,
                 HAS_RES: tl.constexpr, HAS_W: tl.constexpr,
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
    xk = tl.where((cols < n_stat)[None, :], x, 0.0)
    rstd = tl.rsqrt(tl.sum(xk * xk, axis=1) / n_stat + eps)
    tl.store(RSTD + rows, rstd, mask=row_ok)
    y = x * rstd[:, None]
    if HAS_W:
        w = tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)
        y = y * w[None, :]
    tl.store(Y + rows64 * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_fwd_loop(X, R, W, Y, S, RSTD, N, n_stat, stride_x, stride_r, eps, alpha,
                 HAS_RES: tl.constexpr, HAS_W: tl.constexpr, BLOCK_N: tl.constexpr):
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
            acc += tl.where(cols < n_stat, s * s, 0.0)
        tl.debug_barrier()  # pass 2 re-reads s written by other threads of this program
    else:
        # Pass 1 only needs the first n_stat features (pRMSNorm reads a fraction of the row).
        for start in range(0, n_stat, BLOCK_N):
            cols = start + offs
            x = tl.load(X + row64 * stride_x + cols, mask=cols < n_stat, other=0.0).to(tl.float32)
            acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_stat + eps)
    tl.store(RSTD + row, rstd)
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


@triton.jit
def rms_bwd_tile(DY, DS, XS, W, RSTD, DX, DR, DW_PART, M, N, n_stat, stride_dy, stride_ds, stride_xs,
                 alpha, iters, HAS_DS: tl.constexpr, HAS_DR: tl.constexpr, HAS_W: tl.constexpr,
                 NEED_DW: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    in_stat = (cols < n_stat)[None, :]
    if HAS_W:
        w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for i in range(0, iters):  # row blocks pid, pid + G, ...; the last may be past M (all masked)
        rows = (pid + i * tl.num_programs(0)) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < M
        mask = row_ok[:, None] & col_ok[None, :]
        rows64 = rows.to(tl.int64)[:, None]
        x = tl.load(XS + rows64 * stride_xs + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)[:, None]
        g = dy
        if HAS_W:
            g = dy * w
        if NEED_DW:
            dw_acc += dy * (x * rstd)
        coef = rstd * rstd * tl.sum(g * x, axis=1)[:, None] / n_stat
        dx = rstd * (g - tl.where(in_stat, x * coef, 0.0))
        if HAS_DS:
            dx += tl.load(DS + rows64 * stride_ds + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        tl.store(DX + rows64 * N + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        if HAS_DR:
            tl.store(DR + rows64 * N + cols[None, :], (alpha * dx).to(DR.dtype.element_ty), mask=mask)
    if NEED_DW:
        tl.store(DW_PART + pid * N + cols, tl.sum(dw_acc, axis=0), mask=col_ok)


@triton.jit
def rms_bwd_loop(DY, DS, XS, W, RSTD, DX, DR, DW_PART, M, N, n_stat, stride_dy, stride_ds, stride_xs,
                 alpha, iters, HAS_DS: tl.constexpr, HAS_DR: tl.constexpr, HAS_W: tl.constexpr,
                 NEED_DW: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    # DW_PART starts at zero; this program owns row `pid` of it, so read-modify-write needs no atomics.
    part = DW_PART + tl.cast(pid, tl.int64) * N
    for i in range(0, iters):  # rows pid, pid + G, ...; the last may be past M (all masked)
        row = pid + i * tl.num_programs(0)
        row64 = tl.cast(row, tl.int64)
        n_cols = tl.where(row < M, N, 0)  # a row past M (last iteration) loads and stores nothing
        rstd = tl.load(RSTD + tl.minimum(row, M - 1))
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):  # pass 1: c = sum(g * s) over the row
            cols = start + offs
            m = cols < n_cols
            x = tl.load(XS + row64 * stride_xs + cols, mask=m, other=0.0).to(tl.float32)
            g = tl.load(DY + row64 * stride_dy + cols, mask=m, other=0.0).to(tl.float32)
            if HAS_W:
                g = g * tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
            acc += g * x
        coef = rstd * rstd * tl.sum(acc, axis=0) / n_stat
        for start in range(0, N, BLOCK_N):  # pass 2: dx, dr and the dw partial
            cols = start + offs
            m = cols < n_cols
            x = tl.load(XS + row64 * stride_xs + cols, mask=m, other=0.0).to(tl.float32)
            dy = tl.load(DY + row64 * stride_dy + cols, mask=m, other=0.0).to(tl.float32)
            g = dy
            if HAS_W:
                g = dy * tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
            dx = rstd * (g - tl.where(cols < n_stat, x * coef, 0.0))
            if HAS_DS:
                dx += tl.load(DS + row64 * stride_ds + cols, mask=m, other=0.0).to(tl.float32)
            tl.store(DX + row64 * N + cols, dx.to(DX.dtype.element_ty), mask=m)
            if HAS_DR:
                tl.store(DR + row64 * N + cols, (alpha * dx).to(DR.dtype.element_ty), mask=m)
            if NEED_DW:
                p = tl.load(part + cols, mask=m, other=0.0)
                tl.store(part + cols, p + dy * x * rstd, mask=m)
