"""The OLMo-2 spike score of a run, kept on the device every step and read once at the end.

OLMo et al. 2024 ("2 OLMo 2 Furious") score training stability as the share of points of a series that lie
at least 7 standard deviations from the rolling mean of the previous 1000 points, for the training loss and for
the gradient norm. Here every step is a point (the batch's loss and the total gradient norm before clipping);
a point is scored once its window holds ``window`` earlier points, so a run shorter than the window has no score
(lower ``monitor.spike_window`` for short runs). A non-finite point counts as a spike and is left out of the
windows that follow.

The windows are a ring buffer on the device, updated with a few small kernels per step and no host sync
(the write position is the host's step count); the counts are read once, for the summary.
"""

from __future__ import annotations

import torch

SIGMAS = 7.0
SERIES = ("loss", "grad_norm")


class SpikeScore:
    def __init__(self, window: int, device: torch.device):
        self.window = window
        self.values = torch.full((len(SERIES), window), float("nan"), device=device)  # NaN: empty slot
        self.spikes = torch.zeros(len(SERIES) + 1, device=device)  # per series, and steps with either
        self.seen = self.scored = 0  # host counts: points observed, points scored

    def observe(self, loss: torch.Tensor, grad_norm: torch.Tensor | None) -> None:
        """One step's point (``grad_norm`` None: not measured, never a spike)."""
        grad = torch.full((), float("nan"), device=self.values.device) if grad_norm is None else grad_norm
        point = torch.stack([loss.detach().float().reshape(()), grad.detach().float().reshape(())])
        if self.seen >= self.window:
            spike = self._is_spike(point)
            if grad_norm is None:
                spike[1] = False
            self.spikes += torch.cat([spike, spike.any().reshape(1)]).float()
            self.scored += 1
        self.values[:, self.seen % self.window] = point.masked_fill(~torch.isfinite(point), float("nan"))
        self.seen += 1

    def _is_spike(self, point: torch.Tensor) -> torch.Tensor:
        """Per series: |point − mean| ≥ 7σ over the window's finite values (sample std), or a non-finite point."""
        finite = torch.isfinite(self.values)
        n = finite.sum(dim=1)
        mean = torch.where(finite, self.values, 0.0).sum(dim=1) / n
        squares = torch.where(finite, (self.values - mean[:, None]).square(), 0.0).sum(dim=1)
        sigma = (squares / (n - 1).clamp(min=1)).sqrt()
        deviation = (point - mean).abs()
        return ~torch.isfinite(point) | ((deviation >= SIGMAS * sigma) & (deviation > 0) & (n >= 2))

    def summary(self) -> dict[str, float | int | None]:
        """``spike_score`` (share of scored steps where the loss or the grad norm spiked), ``spike_score_loss``,
        ``spike_score_grad_norm`` (each series' share), ``spike_points`` (steps scored): one host transfer."""
        shares = (self.spikes / self.scored).tolist() if self.scored else [None] * (len(SERIES) + 1)
        return {"spike_score": shares[-1], "spike_score_loss": shares[0], "spike_score_grad_norm": shares[1],
                "spike_points": self.scored}

    def state_dict(self) -> dict:
        """The window in time order (oldest first), so a resume may change ``window``."""
        return {"values": torch.roll(self.values, -(self.seen % self.window), dims=1), "spikes": self.spikes,
                "seen": self.seen, "scored": self.scored}

    def load_state_dict(self, state: dict) -> None:
        self.seen, self.scored = int(state["seen"]), int(state["scored"])
        self.spikes = state["spikes"].to(self.values.device)
        old = state["values"].to(self.values.device)
        keep = min(old.shape[1], self.window, self.seen)
        self.values.fill_(float("nan"))
        if keep:
            slots = torch.arange(self.seen - keep, self.seen, device=self.values.device) % self.window
            self.values[:, slots] = old[:, old.shape[1] - keep:]
