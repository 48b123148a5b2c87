"""AdamW, plain SGD, or Muon for the hidden matrices with AdamW for the rest; weight decay on matrices only; the
learning-rate schedules (warm-up included)."""

from __future__ import annotations

import math

import torch
from torch import nn

from normtrain.util.optimizers import ADJUST_LR_FNS, MuonSettings, optimizers_of  # noqa: F401 (moved to util/, still importable here)


class MuonWithAdamW:
    """Muon for the hidden matrices and AdamW for every other parameter, stepped together: to the loop one
    optimizer (``step``, ``zero_grad``, ``param_groups``, ``state_dict``). ``optimizers`` is the pair, for
    torch.distributed.checkpoint, which keys the state of both by parameter name."""

    def __init__(self, muon: torch.optim.Muon, adamw: torch.optim.AdamW):
        self.muon, self.adamw = muon, adamw
        self.optimizers = (muon, adamw)

    @property
    def param_groups(self) -> list[dict]:
        return [group for opt in self.optimizers for group in opt.param_groups]

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if set(state) != {"muon", "adamw"}:
            raise ValueError(f"not the state of Muon with AdamW (keys {sorted(state)[:4]}): another optimizer's")
        self.muon.load_state_dict(state["muon"])
        self.adamw.load_state_dict(state["adamw"])


def muon_split(model: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(the hidden matrices, for Muon; every other trainable parameter, for AdamW).

    Muon orthogonalizes a matrix's update, which suits a map between hidden spaces; the embeddings and the LM head
    map tokens in and out (one row per token, updated by how often it occurs), and gains, biases and scalars are
    not matrices: Muon's authors, torch's documentation and every Muon recipe leave them to AdamW. The model names
    its input/output parameters (``GPT.io_parameters``); a tied LM head is the embedding itself, so it goes with
    it. Matched by identity, so any wrapper that keeps the parameters (DDP, FSDP2) splits the same way.
    """
    io = {id(p) for p in model.io_parameters()}
    params = [p for p in model.parameters() if p.requires_grad]
    hidden = [p for p in params if p.dim() == 2 and id(p) not in io]
    chosen = {id(p) for p in hidden}
    return hidden, [p for p in params if id(p) not in chosen]


def _decay_groups(params: list[nn.Parameter], lr: float, weight_decay: float, independent_wd: bool) -> list[dict]:
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay / lr if independent_wd
         else weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, lr: float, betas, eps: float, weight_decay: float,
                    independent_wd: bool = False, name: str = "adamw", momentum: float = 0.0,
                    muon: MuonSettings | None = None):
    """Decay 2-D weights (linear and embedding matrices); never norm gains, biases or other vectors.

    AdamW multiplies each decayed weight by (1 − lr_t · wd) per step, so the decay grows with the learning rate.
    ``independent_wd`` decouples it (Loshchilov & Hutter 2019; Wortsman et al. 2023, §3.2.2): the per-step
    factor is (1 − wd · lr_t / lr), where lr is the peak learning rate — the decay follows the schedule's shape
    but not the size of lr, so ``weight_decay`` is the per-step decay at the peak (Wortsman et al.: 1e-4).
    Implemented by handing AdamW wd / lr as its coefficient.

    ``name="sgd"``: plain stochastic gradient descent (``momentum`` 0 by default), whose step is the gradient
    times the learning rate: the setting of DeepNet's model-update bounds (Thm. 4.1–4.2), where Adam's first
    steps, sized by the learning rate alone, are not. Its weight decay is the coupled L2 term of ``torch.optim.SGD``.

    ``name="muon"``: ``torch.optim.Muon`` (``muon``'s settings) on the hidden matrices (``muon_split``), AdamW
    (``lr``, ``betas``, ``eps``, ``weight_decay``) on the rest, as one ``MuonWithAdamW``.
    """
    if name == "muon":
        hidden, rest = muon_split(model)
        m = muon or MuonSettings()
        return MuonWithAdamW(
            torch.optim.Muon(hidden, lr=m.lr, weight_decay=m.weight_decay, momentum=m.momentum, nesterov=m.nesterov,
                             ns_steps=m.ns_steps, adjust_lr_fn=m.adjust_lr_fn),
            _adamw(_decay_groups(rest, lr, weight_decay, independent_wd), lr, betas, eps))
    params = [p for p in model.parameters() if p.requires_grad]
    groups = _decay_groups(params, lr, weight_decay, independent_wd)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum)
    return _adamw(groups, lr, betas, eps)


def _adamw(groups: list[dict], lr: float, betas, eps: float) -> torch.optim.AdamW:
    fused = all(p.is_cuda for g in groups for p in g["params"])  # one kernel per step on GPU; on CPU torch's
    # default is its per-tensor loop (foreach=None means foreach only on GPUs): ~3 ms of a 68 ms tiny-model step
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, fused=fused or None)


def set_lr(optimizer, lr: float, muon_lr: float | None = None) -> None:
    """Muon's groups at ``muon_lr``, every other group at ``lr``: the schedule's values at this step (the loop
    scales Muon's peak by the schedule's factor, so both follow one shape)."""
    for opt in optimizers_of(optimizer):
        for group in opt.param_groups:
            group["lr"] = muon_lr if isinstance(opt, torch.optim.Muon) else lr


def lr_at(step: int, *, lr: float, warmup_steps: int, max_steps: int, schedule: str,
          min_lr_ratio: float = 0.1, warmup_overlaps: bool = False, decay_fraction: float = 0.2) -> float:
    """Linear warm-up over ``warmup_steps`` (step 0 gets lr/warmup), then the schedule.

    cosine: from lr down to lr·min_lr_ratio at ``max_steps``; constant: lr;
    inverse_sqrt: lr·√(warmup/step) after warm-up (Vaswani et al. 2017; Xiong et al. 2020);
    wsd (warm-up, stable, decay): lr until the last ``decay_fraction`` of the run, then linearly down to
    lr·min_lr_ratio at ``max_steps`` (Hu et al. 2024, MiniCPM). The loss at the end of the stable phase reads how far
    training got before any annealing gain, which a cosine mixes into every step of its second half.
    ``warmup_overlaps``: the ramp multiplies the schedule instead of preceding it, and the schedule is counted from
    step 0 as if there were no warm-up; two runs that differ in their warm-up then differ in the ramp alone (a
    warm-up experiment's control), not in the decay after it.
    """
    if warmup_overlaps:
        ramp = min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
        return ramp * lr_at(step, lr=lr, warmup_steps=0, max_steps=max_steps, schedule=schedule,
                            min_lr_ratio=min_lr_ratio, decay_fraction=decay_fraction)
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
    if schedule == "wsd":
        start = max(warmup_steps, max_steps - round(decay_fraction * max_steps))
        progress = min(max(step - start, 0) / max(max_steps - start, 1), 1.0)
        return lr * (1 - (1 - min_lr_ratio) * progress)
    raise ValueError(f"unknown schedule {schedule!r}; allowed: cosine, constant, inverse_sqrt, wsd")


def schedule_warnings(o, max_steps: int) -> list[str]:
    """A warm-up at least as long as the run (``optim``'s keys ``o``): the learning rate never reaches ``optim.lr``
    before the last step and the decay never starts, so the run trains at a fraction of the lr it names, a silent
    confound when runs are compared (e.g. Post-LN against Pre-LN at 30 steps under the default 50-step warm-up)."""
    if not 0 < max_steps <= o.warmup_steps:
        return []
    peak = max(lr_at(s, lr=o.lr, warmup_steps=o.warmup_steps, max_steps=max_steps, schedule=o.schedule,
                     min_lr_ratio=o.min_lr_ratio, warmup_overlaps=o.warmup_overlaps,
                     decay_fraction=o.decay_fraction) for s in range(max_steps))
    after = "" if o.schedule == "constant" or o.warmup_overlaps else f" and the {o.schedule} decay never starts"
    return [f"train.max_steps={max_steps} is not longer than optim.warmup_steps={o.warmup_steps}: the whole run is "
            f"warm-up: the learning rate reaches {peak:.3g} at most (optim.lr={o.lr:g}){after}. Use "
            f"fewer warm-up steps (e.g. optim.warmup_steps={max(max_steps // 10, 1)}, a tenth of the run) or more "
            "train.max_steps"]
