"""AdamW (or plain SGD) with weight decay on matrices only, and the learning-rate schedules (warm-up included)."""

from __future__ import annotations

import math

import torch
from torch import nn


def build_optimizer(model: nn.Module, lr: float, betas, eps: float, weight_decay: float,
                    independent_wd: bool = False, name: str = "adamw", momentum: float = 0.0) -> torch.optim.Optimizer:
    """Decay 2-D weights (linear and embedding matrices); never norm gains, biases or other vectors.

    AdamW multiplies each decayed weight by (1 − lr_t · wd) per step, so the decay grows with the learning rate.
    ``independent_wd`` decouples it (Loshchilov & Hutter 2019; Wortsman et al. 2023, §3.2.2): the per-step
    factor is (1 − wd · lr_t / lr), where lr is the peak learning rate — the decay follows the schedule's shape
    but not the size of lr, so ``weight_decay`` is the per-step decay at the peak (Wortsman et al.: 1e-4).
    Implemented by handing AdamW wd / lr as its coefficient.

    ``name="sgd"``: plain stochastic gradient descent (``momentum`` 0 by default), whose step is the gradient
    times the learning rate: the setting of DeepNet's model-update bounds (Thm. 4.1–4.2), where Adam's first
    steps, sized by the learning rate alone, are not. Its weight decay is the coupled L2 term of ``torch.optim.SGD``.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay / lr if independent_wd
         else weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum)
    fused = all(p.is_cuda for p in params)  # one kernel per step on GPU; the foreach path elsewhere
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, fused=fused or None)


def lr_at(step: int, *, lr: float, warmup_steps: int, max_steps: int, schedule: str,
          min_lr_ratio: float = 0.1, warmup_overlaps: bool = False) -> float:
    """Linear warm-up over ``warmup_steps`` (step 0 gets lr/warmup), then the schedule.

    cosine: from lr down to lr·min_lr_ratio at ``max_steps``; constant: lr;
    inverse_sqrt: lr·√(warmup/step) after warm-up (Vaswani et al. 2017; Xiong et al. 2020).
    ``warmup_overlaps``: the ramp multiplies the schedule instead of preceding it, and the schedule is counted from
    step 0 as if there were no warm-up; two runs that differ in their warm-up then differ in the ramp alone (a
    warm-up experiment's control), not in the decay after it.
    """
    if warmup_overlaps:
        ramp = min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
        return ramp * lr_at(step, lr=lr, warmup_steps=0, max_steps=max_steps, schedule=schedule,
                            min_lr_ratio=min_lr_ratio)
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return lr
    if schedule == "inverse_sqrt":
        return lr * math.sqrt(max(warmup_steps, 1) / (step + 1))
    if schedule == "cosine":
        span = max(max_steps - warmup_steps, 1)
        progress = min((step - warmup_steps) / span, 1.0)
        return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
    raise ValueError(f"unknown schedule {schedule!r}; allowed: cosine, constant, inverse_sqrt")
