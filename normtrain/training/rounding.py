"""bf16 storage with fp32 compute (``train.param_rounding``): what storing the weights in bf16 does to training,
without also computing in bf16.

``train.param_dtype=bfloat16`` stores the parameters and the optimizer's states in bf16, and on a CPU the forward
and backward then run in bf16 too, so a comparison of storages also compares compute precisions. Here the tensors
stay fp32 and every value is rounded to the storage dtype's precision (round to nearest even) after each optimizer
step and once at the start: each forward, backward and update computes in fp32 from bf16-representable values, and
an update smaller than half a bf16 step of its weight is lost, as it is in bf16 storage. The optimizer's states of
a parameter's shape (AdamW's moments, Muon's momentum) are rounded with it; its step counter is not.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


@torch.no_grad()
def round_storage(params: Iterable[torch.nn.Parameter], optimizer: torch.optim.Optimizer | None,
                  dtype: torch.dtype) -> None:
    """Round every parameter, and every optimizer state of its shape, to ``dtype``'s precision in place."""
    for p in params:
        p.copy_(p.to(dtype).to(p.dtype))
        for value in (optimizer.state.get(p, {}) if optimizer is not None else {}).values():
            if torch.is_tensor(value) and value.is_floating_point() and value.shape == p.shape:
                value.copy_(value.to(dtype).to(value.dtype))
