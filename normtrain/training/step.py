"""One optimizer update over the global batch: the learning rate of its step, the forward and backward passes of
this rank's micro-batches, the gradient norm and clipping, the optimizer's step and everything that is part of
the update (the model's weight rule, QK-Clip). The monitor sees the step where it happens, on the device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from omegaconf import DictConfig

from normtrain.data import BatchSampler
from normtrain.training.debug import FaultInjector
from normtrain.training.distributed import grad_sync
from normtrain.training.monitor import Monitor
from normtrain.training.optim import lr_at, set_lr
from normtrain.training.qk_clip import QKClip
from normtrain.training.rollback import RollbackPolicy
from normtrain.training.rounding import round_storage
from normtrain.training.zloss import log_partition, z_loss


class TrainStep:
    """The update and what it touches: ``model`` (wrapped; ``compiled`` its torch.compile'd form, or itself),
    ``raw`` (the plain module), the parameters the optimizer trains."""

    def __init__(self, cfg: DictConfig, model: torch.nn.Module, compiled: torch.nn.Module, raw: torch.nn.Module,
                 params: list[torch.nn.Parameter], optimizer: torch.optim.Optimizer, qk_clip: QKClip | None,
                 sampler: BatchSampler, monitor: Monitor, faults: FaultInjector,
                 autocast: Callable[[], AbstractContextManager]):
        self.cfg, self.model, self.compiled, self.raw, self.params = cfg, model, compiled, raw, params
        self.optimizer, self.qk_clip, self.sampler, self.monitor = optimizer, qk_clip, sampler, monitor
        self.faults, self.autocast = faults, autocast
        rounding = cfg.train.get("param_rounding")
        self.rounding = getattr(torch, rounding) if rounding else None  # bf16 storage, fp32 compute
        self.round_storage()  # the initial weights, as a cast to the storage dtype would leave them

    def set_lr(self, step: int, policy: RollbackPolicy) -> float:
        """The schedule's lr at ``step``, lowered for a while after a rollback (``train.rollback.lr_factor``)."""
        o = self.cfg.optim
        lr = lr_at(step, lr=o.lr, warmup_steps=o.warmup_steps, max_steps=self.cfg.train.max_steps,
                   schedule=o.schedule, min_lr_ratio=o.min_lr_ratio,
                   warmup_overlaps=o.warmup_overlaps, decay_fraction=o.decay_fraction) * policy.lr_scale(step)
        set_lr(self.optimizer, lr, lr * o.muon_lr / o.lr if o.name == "muon" else None)
        return lr

    def run(self, step: int, log_step: bool) -> None:
        """One optimizer update over the global batch; the divergence flag sees its loss and gradient norm on the
        device."""
        self.faults.before_step(step)
        x, y = self.sampler.next_batch()
        loss = self.accumulate(step, log_step, x, y, batch_index=self.sampler.batches_drawn - 1)
        grads = [p.grad for p in self.params if p.grad is not None]
        grad_norm = torch.nn.utils.get_total_norm(grads)  # before clipping; no host sync
        # FSDP2: a DTensor of partial norms; the guard needs the whole one (clipping takes it as it is)
        whole = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        self.monitor.after_backward(step, loss, whole)
        if self.cfg.optim.grad_clip > 0:
            torch.nn.utils.clip_grads_with_norm_(self.params, self.cfg.optim.grad_clip, grad_norm)
        self.optimizer.step()
        self.keep_weight_constraints()
        if self.qk_clip is not None:
            self.qk_clip.apply()  # part of the update: after the step, before the monitor measures it
        self.round_storage()
        self.monitor.after_update(step)
        self.optimizer.zero_grad(set_to_none=True)

    def round_storage(self) -> None:
        """``train.param_rounding``: the stored values rounded to its precision (normtrain/training/rounding.py)."""
        if self.rounding is not None:
            round_storage(self.params, self.optimizer, self.rounding)

    def keep_weight_constraints(self) -> None:
        """The model's own rule for its weights wherever they change outside a forward pass (after each optimizer
        step, a resume, a rollback), if it declares one (``after_optimizer_step``): nGPT puts every matrix back
        on the unit sphere. The loop knows nothing of what the rule is."""
        hook = getattr(self.raw, "after_optimizer_step", None)
        if hook is not None:
            hook()

    def accumulate(self, step: int, log_step: bool, x: torch.Tensor, y: torch.Tensor, batch_index: int) -> torch.Tensor:
        """Forward and backward of this rank's micro-batches of ``train.batch_size``; each loss is divided by their
        number, so the gradients (reduced across ranks once, after the last) are those of the mean loss over the
        global batch. Diagnostics hook the first micro-batch. Returns the mean loss."""
        size = self.cfg.train.batch_size
        micro = list(zip(x.split(size), y.split(size), strict=True))
        forward = self.model if log_step else self.compiled  # diagnostics hook the eager model: no recompiles
        total = None
        for i, (xs, ys) in enumerate(micro):
            with grad_sync(self.model, enabled=i == len(micro) - 1):
                with self.monitor.capture(step) if i == 0 else contextlib.nullcontext(), self.autocast():
                    logits, loss = forward(xs, ys)
                loss = self.faults.poison(loss, batch_index)
                (self.objective(step, logits, loss, observe=i == 0) / len(micro)).backward()
            total = loss.detach() if total is None else total + loss.detach()
        return total / len(micro)

    def objective(self, step: int, logits: torch.Tensor, loss: torch.Tensor, observe: bool = True) -> torch.Tensor:
        """What the step minimizes: the cross-entropy ``loss``, plus optim.z_loss × mean(log² Z) when it is on
        (normtrain/training/zloss.py). ``train/loss`` stays the cross-entropy, so curves compare across z-loss settings;
        the term is logged as ``train/z_loss``. The monitor's output diagnostics (``observe``) reuse log Z."""
        coef = self.cfg.optim.z_loss
        log_z = log_partition(logits) if coef > 0 else None
        z = z_loss(log_z) if log_z is not None else None
        if observe:
            self.monitor.observe_output(step, logits, log_z, z)
        return loss if z is None else loss + coef * z
