"""Per-layer diagnostics and divergence detection, kept on the device.

Everything is accumulated as tensors during a step and read back with a single host transfer per
log step (``Monitor.read``), so the hot path has no host syncs. The monitor sees the model only
through the block modules and parameters it is handed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn


class DivergenceGuard:
    """Flags the first step whose loss is non-finite or above ``factor`` × the first loss.

    The check runs on the device every step; the host learns of it at the next read.
    """

    def __init__(self, factor: float, device: torch.device):
        self.factor = factor
        self.first: torch.Tensor | None = None
        self.diverged_at = torch.full((), -1, dtype=torch.long, device=device)

    def observe(self, step: int, loss: torch.Tensor) -> None:
        loss = loss.detach().float()
        if self.first is None:
            self.first = loss.clone()
        bad = ~torch.isfinite(loss) | (loss > self.factor * self.first)
        self.diverged_at = torch.where(bad & (self.diverged_at < 0), step, self.diverged_at)


class Monitor:
    """Collects ``grad_norm/*`` and ``act_{mean,std}/*`` on log steps, ``train/loss`` every log step."""

    def __init__(self, blocks: Sequence[nn.Module], params: Sequence[nn.Parameter], every: int,
                 divergence_factor: float, grad_norms: bool = True, activations: bool = True):
        self.blocks, self.params, self.every = list(blocks), list(params), every
        self.grad_norms, self.activations = grad_norms, activations
        device = self.params[0].device
        self.guard = DivergenceGuard(divergence_factor, device)
        # block index of every parameter (-1: embeddings, head, final norm), for one index_add per read
        owner = {id(p): i for i, b in enumerate(self.blocks) for p in b.parameters()}
        self.layer_of = torch.tensor([owner.get(id(p), -1) for p in self.params], device=device)
        self._values: dict[str, torch.Tensor] = {}

    def is_log_step(self, step: int) -> bool:
        return step % self.every == 0

    @contextmanager
    def capture(self, step: int) -> Iterator[None]:
        """Around the forward pass: on log steps, hooks record each block's output mean and std."""
        if not (self.activations and self.is_log_step(step)):
            yield
            return
        means: list[torch.Tensor] = []
        stds: list[torch.Tensor] = []

        def record(_module, _inputs, out):
            out = out.detach().float()
            means.append(out.mean())
            stds.append(out.std())

        handles = [b.register_forward_hook(record) for b in self.blocks]
        try:
            yield
        finally:
            for h in handles:
                h.remove()
        if len(means) == len(self.blocks):
            self._values["act_mean"] = torch.stack(means)
            self._values["act_std"] = torch.stack(stds)

    def after_backward(self, step: int, loss: torch.Tensor) -> None:
        """Divergence check every step; gradient norms (before clipping) on log steps."""
        self.guard.observe(step, loss)
        if not self.is_log_step(step):
            return
        self._values["loss"] = loss.detach().float().reshape(1)
        if not self.grad_norms:
            return
        with_grad = [i for i, p in enumerate(self.params) if p.grad is not None]
        norms = torch.stack(torch._foreach_norm([self.params[i].grad for i in with_grad])).float()
        squares, owners = norms.square(), self.layer_of[with_grad]
        per_layer = torch.zeros(len(self.blocks), device=norms.device).index_add_(
            0, owners.clamp(min=0), torch.where(owners >= 0, squares, torch.zeros_like(squares)))
        self._values["grad_total"] = squares.sum().sqrt().reshape(1)
        self._values["grad_layer"] = per_layer.sqrt()

    def read(self) -> tuple[dict[str, float], int | None]:
        """One host transfer: the metrics of the last log step, and the divergence step (or None)."""
        names = list(self._values)
        flat = torch.cat([self._values[n].reshape(-1) for n in names] + [self.guard.diverged_at.reshape(1).float()])
        values = flat.tolist()
        metrics: dict[str, float] = {}
        offset = 0
        for name in names:
            n = self._values[name].numel()
            chunk, offset = values[offset:offset + n], offset + n
            if name == "loss":
                metrics["train/loss"] = chunk[0]
            elif name == "grad_total":
                metrics["grad_norm/total"] = chunk[0]
            else:
                prefix = {"grad_layer": "grad_norm", "act_mean": "act_mean", "act_std": "act_std"}[name]
                metrics.update({f"{prefix}/layer_{i}": v for i, v in enumerate(chunk)})
        self._values.clear()
        diverged_at = int(values[-1])
        return metrics, (diverged_at if diverged_at >= 0 else None)
