"""The parts of manifold-constrained hyper-connections (mHC; Xie et al. 2025, "mHC: Manifold-Constrained
Hyper-Connections", arXiv:2512.24880) that live outside the block: the Sinkhorn-Knopp projection onto the doubly
stochastic matrices, and the per-token mappings H_pre, H_post, H_res of one sublayer (eq. 7–9).

The block itself is ``normtrain.model.placements.mhc``. x_l is a token's n × d matrix of streams; vec(x_l) its
n·d row (how the model carries it: one (B, T, n·d) tensor, stream j in features j·d … (j+1)·d − 1).

Everything here runs in fp32 (fp64 when the model is fp64) with autocast off, as the paper's kernels do (eq. 10–19:
φ, α, b and every coefficient in float32): the coefficients are sums over n·d features and 20 alternating
normalizations, and the streams they mix are the residual stream itself.
"""

from __future__ import annotations

import torch
from torch import nn

SINKHORN_ITERS = 20  # t_max (§4.2; the reference code's default too)
ALPHA_INIT = 0.01  # α_pre, α_post, α_res at init: "Gating Factor Init α" (Table 5; Megatron-LM's default)
EPS = 1e-6  # the reference code's floor: on each Sinkhorn entry and denominator, and on H_pre (the paper has none)
RMS_EPS = 1e-6  # ε of the RMSNorm of vec(x_l), inside the root (transformers' DeepseekV4HyperConnection)


def wide(t: torch.Tensor) -> torch.Tensor:
    """``t`` in fp32 at least (fp64 stays fp64)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def sinkhorn(logits: torch.Tensor, iters: int = SINKHORN_ITERS, eps: float = EPS) -> torch.Tensor:
    """Sinkhorn-Knopp(H̃) over the last two dimensions (eq. 9): M⁽⁰⁾ = exp(H̃), M⁽ᵗ⁾ = T_r(T_c(M⁽ᵗ⁻¹⁾)),
    H = M⁽ᵗᵐᵃˣ⁾. T_c divides each column by its sum, T_r each row; ending on T_r, the rows sum to 1 (up to ε)
    and the columns approach 1 as t grows (the paper: 20 iterations leave the backward gain, the column sums,
    slightly off 1).

    exp followed by T_c is a softmax over each column: it subtracts the column's max first, so a large logit
    does not overflow. ε as the reference code (Megatron-LM, transformers' DeepSeek-V4): added to every entry
    after that softmax (no entry underflows to 0) and to every denominator (no division by 0).

    The gradient is that of the 20 iterations (not of their limit), as autograd would take it through the loop;
    ``_SinkhornKnopp`` only computes it in fewer passes.
    """
    m = _SinkhornKnopp.apply(logits.movedim((-2, -1), (0, 1)).contiguous(), iters, eps)
    return m.movedim((0, 1), (-2, -1)).contiguous()  # as bmm wants it (a strided batch goes matrix by matrix)


class _SinkhornKnopp(torch.autograd.Function):
    """``sinkhorn`` on the matrices' entries moved to the front, (n, n, …): each normalization then sweeps
    contiguous rows of tokens (several times faster on a CPU than n × n blocks token by token).

    A normalization y = m·r, r = 1/(Σ m + ε) summed along one axis, has the gradient r·(g − Σ g⊙y) along that
    axis: two passes over the entries where autograd's division takes five. The forward keeps each y and r.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, iters: int, eps: float) -> torch.Tensor:
        soft = torch.softmax(logits, dim=0)  # T_c(exp(H̃))
        m, saved, dims = soft + eps, [soft], []
        for t in range(iters):
            for dim in (0, 1) if t else (1,):  # T_c, T_r (the first T_c is the softmax's)
                r = (m.sum(dim, keepdim=True) + eps).reciprocal_()
                m = m * r
                saved += [m, r]
                dims.append(dim)
        ctx.save_for_backward(*saved)
        ctx.dims = dims
        return m

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g: torch.Tensor):
        soft, *steps = ctx.saved_tensors
        g = g.contiguous()  # it arrives in the caller's (…, n, n) order
        for dim, y, r in zip(reversed(ctx.dims), reversed(steps[0::2]), reversed(steps[1::2]), strict=True):
            g = (g - (g * y).sum(dim, keepdim=True)) * r
        return soft * (g - (g * soft).sum(0, keepdim=True)), None, None


class StreamMappings(nn.Module):
    """The mappings of one sublayer from the token's streams x_l (eq. 7–8):

        x̃ = RMSNorm(vec x_l)                    (no gain: the paper folds it into φ, §4.3.1)
        H̃_pre  = α_pre · (x̃ φ_pre)  + b_pre       H_pre  = σ(H̃_pre)          (1 × n)
        H̃_post = α_post · (x̃ φ_post) + b_post      H_post = 2σ(H̃_post)        (1 × n)
        H̃_res  = α_res · mat(x̃ φ_res) + b_res      H_res  = Sinkhorn-Knopp(H̃_res)  (n × n)

    φ = [φ_pre, φ_post, φ_res] is one (n² + 2n) × n·d matrix (``phi``, an ``nn.Linear``: row k gives output k),
    b = [b_pre, b_post, vec b_res] one vector (``bias``), α = (α_pre, α_post, α_res) (``alpha``). mat(·) fills
    H̃_res row by row: H_res[i, j] is what stream j gives output stream i (x_{l+1} = H_res x_l). The reference
    codes store the transpose (they apply comb.T); same matrices, laid out the other way.

    The RMS divides x φ after the product (the paper's reordering, eq. 14–16): the same value, without an
    n·d-wide normalized copy. ``seen`` keeps the last forward's (H_pre, H_post, H_res), detached, for the
    block's diagnostics.
    """

    def __init__(self, n: int, d: int):
        super().__init__()
        self.n = n
        self.phi = nn.Linear(n * d, n * n + 2 * n, bias=False)
        self.alpha = nn.Parameter(torch.full((3,), ALPHA_INIT))
        self.bias = nn.Parameter(torch.zeros(n * n + 2 * n))
        self.seen: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """φ Xavier-uniform, b = 0, α = 0.01 (Megatron-LM's HyperConnectionModule; the paper gives α only). With
        b = 0 and a small α every token starts near H_pre = ½, H_post = 1 and H_res = 1/n in every entry."""
        nn.init.xavier_uniform_(self.phi.weight)
        nn.init.zeros_(self.bias)
        nn.init.constant_(self.alpha, ALPHA_INIT)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(H_pre, H_post, H_res) of each token of the streams ``x`` (…, n·d): (…, n), (…, n), (…, n, n)."""
        n = self.n
        with torch.autocast(x.device.type, enabled=False):
            x = wide(x)
            mean_square = torch.linalg.vecdot(x, x).unsqueeze(-1) / x.shape[-1]  # x·x/(n·d), in one pass
            h = self.phi(x) * torch.rsqrt(mean_square + RMS_EPS)  # x̃ φ
            h_pre, h_post, h_res = h.split([n, n, n * n], dim=-1)
            b_pre, b_post, b_res = self.bias.split([n, n, n * n])
            a_pre, a_post, a_res = self.alpha
            pre = torch.sigmoid(a_pre * h_pre + b_pre) + EPS
            post = 2 * torch.sigmoid(a_post * h_post + b_post)
            res = sinkhorn((a_res * h_res + b_res).unflatten(-1, (n, n)))
        self.seen = (pre.detach(), post.detach(), res.detach())
        return pre, post, res


def read(pre: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """H_pre x_l: the sublayer's input (…, d), a weighted sum of the streams (…, n, d)."""
    with torch.autocast(streams.device.type, enabled=False):
        return (pre.unsqueeze(-2) @ wide(streams)).squeeze(-2)


def write(res: torch.Tensor, streams: torch.Tensor, post: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """H_res x_l + H_postᵀ F: the streams mixed, plus the sublayer's output ``out`` (…, d) written into each
    stream with its weight; (…, n, d) in the streams' precision (under autocast F comes back bf16)."""
    with torch.autocast(streams.device.type, enabled=False):
        streams = wide(streams)
        return res @ streams + post.unsqueeze(-1) * out.to(streams.dtype).unsqueeze(-2)
