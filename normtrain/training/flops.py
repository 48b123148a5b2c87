"""Training FLOPs per token, the devices' dense bf16 peaks, and model FLOPs utilization (MFU).

Plain arithmetic with no torch import, so ``metrics.jsonl`` readers and notebooks can use it too.
MFU counts the FLOPs the *model* needs (Chowdhery et al. 2022, "PaLM", appendix B), not the ones the
hardware happens to run (activation recomputation, padding), so it compares across implementations.
"""

from __future__ import annotations

import re
from typing import Any


def flops_per_token(n_params_nonembedding: int, n_layers: int, d_model: int, seq_len: int) -> float:
    """Training FLOPs per token: 6·N + 12·L·d·T (PaLM, appendix B).

    6·N: every weight of a matrix multiply costs 2 FLOPs (multiply and add) per token in the forward
    pass and twice that in the backward pass (gradients with respect to the input and to the weight).
    N counts every parameter except the token and position embeddings, which are lookups, not matmuls:
    the attention and MLP matrices, the LM head (an ordinary d × V matmul; a head tied to the token
    embedding, ``model.tie_embeddings``, is that one matrix, counted once, as the head) and the norm gains
    (a rounding error). 12·L·d·T: the attention scores QKᵀ and the
    weighted sum of V, 2·T·d FLOPs each per token and layer in the forward pass, × 3 for forward plus
    backward; PaLM does not halve it for the causal mask, and neither do we, so numbers compare.
    """
    return 6.0 * n_params_nonembedding + 12.0 * n_layers * d_model * seq_len


def model_flops_per_token(model: Any) -> float:
    """:func:`flops_per_token` for a normtrain ``GPT``, also when wrapped by DDP or ``torch.compile``.

    N is read from the parameters (global sizes, so FSDP shards count whole); L, d and T from ``model.cfg``.
    """
    from normtrain.checkpoint.state import unwrap  # imports torch: only here, this module stays plain arithmetic

    inner = unwrap(model)
    if not hasattr(inner, "cfg") or not hasattr(inner, "tok_emb"):
        raise TypeError(f"{type(model).__name__} is not a normtrain GPT (no .cfg and .tok_emb)")
    lookups = [m for m in (inner.tok_emb, getattr(inner, "pos_emb", None)) if m is not None]
    head = {id(p) for p in inner.lm_head.parameters()}  # tied: the embedding's matrix is the head's matmul
    skip = {id(p) for m in lookups for p in m.parameters()} - head
    n = sum(p.numel() for p in inner.parameters() if id(p) not in skip)
    cfg = inner.cfg
    return flops_per_token(n, cfg.n_layers, cfg.d_model, cfg.seq_len)


# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's datasheets, which print the 2:4-sparsity
# figure; the dense one is half of it. Patterns are tried in order against torch.cuda.get_device_name().
PEAK_BF16_FLOPS: tuple[tuple[str, float], ...] = (
    (r"\bH100\b.*\bNVL\b", 835e12),  # H100 NVL: 1,671 sparse
    (r"\bH100\b.*\bPCIe\b", 756e12),  # H100 PCIe: 1,513 sparse
    (r"\bH100\b", 989e12),  # H100 SXM ("NVIDIA H100 80GB HBM3"): 1,979 sparse
    (r"\bH200\b.*\bNVL\b", 835e12),  # H200 NVL: 1,671 sparse
    (r"\bG?H200\b", 989e12),  # H200 SXM and GH200: 1,979 sparse
    (r"\bA100\b", 312e12),  # A100 SXM and PCIe: 624 sparse
    (r"\bL40S\b", 362e12),  # L40S: 733 sparse
    (r"\bL40\b", 181e12),  # L40: 362 sparse
    (r"\bL4\b", 121e12),  # L4: 242 sparse
    (r"\bA10G?\b", 125e12),  # A10: 250 sparse; AWS's A10G taken as the A10 (no NVIDIA datasheet of its own)
)


def peak_flops(device_name: str) -> float | None:
    """Dense bf16 peak FLOP/s of a CUDA device by name; None for a CPU, a MIG slice or an unknown device.

    No number is better than a wrong one: an unknown device gets no MFU rather than another card's peak.
    """
    if not device_name or "MIG" in device_name:  # a MIG slice has a fraction of the SMs
        return None
    return next((peak for pattern, peak in PEAK_BF16_FLOPS if re.search(pattern, device_name, re.IGNORECASE)), None)


def mfu(tokens_per_s: float | None, flops_per_token: float, peak: float | None, world_size: int = 1) -> float | None:
    """Model FLOPs utilization in [0, 1]: achieved model FLOP/s over the peak of all ``world_size`` devices.

    ``tokens_per_s`` is the global rate (all ranks together); None when it or the peak is unknown.
    """
    if tokens_per_s is None or not peak or world_size < 1:
        return None
    return tokens_per_s * flops_per_token / (peak * world_size)
