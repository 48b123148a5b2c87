"""Per-layer diagnostics and divergence detection, kept on the device.

Everything is accumulated as tensors during a step and read back with a single host transfer per
log step (``Monitor.read``), so the hot path has no host syncs. The monitor sees the model only
through the block modules, the parameters and the probe function it is handed.

Metrics (i counts blocks from 0):
  grad_norm/total, grad_norm/layer_i   L2 norm of the gradients (before clipping)
  act_mean/layer_i, act_std/layer_i    statistics of block i's output over batch, positions, features
  resid_norm/layer_i                   mean per-token L2 norm of the residual stream entering block i
  act_rms/layer_i, act_absmax/layer_i  rms and largest |value| of the residual stream after block i (its output)
                                       over batch, positions and features: variance growth, massive activations
  block_cos/layer_i                    cosine similarity of block i's input and output streams, per token, averaged
                                       over batch and positions (near 1: the block barely changes the stream)
  attn_entropy/layer_i                 mean attention entropy (nats) on the batch's first sequence
  attn_logit_max/layer_i               max attention logit q·k/√d_head before any cap, over the heads: on that
                                       sequence (same explicit logits), or, when QK-Clip tracks it, over the step's
                                       first micro-batch, the very value QK-Clip reads (normtrain/model/qk_logits.py)
  attn_logit_max/layer_i/head_j        the same for head j alone (the one number per head QK-Clip rescales by;
                                       attn_logit_max/layer_i is their max): which heads grow, not only which blocks
  attn_softcap_saturation/layer_i      share of that sequence's causal attention logits the soft-cap saturates
                                       (|s| > 2c; model.attn_softcap on)
  update/layer_i                       ‖Δθ‖/‖θ‖ of block i's parameters for this step's update
  ngpt_alpha_attn/layer_i,             nGPT only: mean |α_A| and |α_M| of block i (its two update step sizes), as
  ngpt_alpha_mlp/layer_i               the step's forward pass used them (``Block.layer_diagnostics``)
  act_rms/stream_j/layer_i,            mHC only: act_rms and act_absmax of stream j alone (``Block.streams``); the
  act_absmax/stream_j/layer_i          mean H_pre, H_post per stream and H_res's diagonal and gain, as the block
  mhc_*/…/layer_i                      reports them (``MHCBlock.layer_diagnostics``)
  update/output_change                 ‖F(x,θ_t) − F(x,θ_0)‖ per token on a fixed probe batch (DeepNet Fig. 4)
  update/output_kl                     KL(p_θ0 ‖ p_θt) per token of the output distributions on that batch
  update/stream_change                 ‖F_t − F_0‖ / ‖F_0‖ over the probe batch, F the residual stream before the
                                       final norm (unsaturated: DeepNet's ‖ΔF‖ relative to its size)
  update/logit_change                  the same for the logits
  output/log_z, output/logit_max       mean log-partition and max of the output logits over the batch
  output/softcap_saturation            share of the batch's output logits the soft-cap saturates (|z| > 2c;
                                       model.logit_softcap on)
  train/z_loss                         mean(log² Z) of the batch, without its coefficient (when optim.z_loss > 0)
Every step, on the device: the divergence flag and the spike score (normtrain/training/spikes.py, read for the summary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from normtrain.model.softcap import saturated_after_cap
from normtrain.training.distributed import local
from normtrain.training.layer_stats import LayerRecorder, block_cosine, stream_absmax, stream_rms
from normtrain.training.spikes import SpikeScore
from normtrain.training.zloss import log_partition

__all__ = ["SWITCHES", "DivergenceGuard", "LayerRecorder", "Monitor", "block_cosine", "stream_absmax", "stream_rms"]
PREFIXES = {"grad_layer": "grad_norm", "act_mean": "act_mean", "act_std": "act_std", "resid_norm": "resid_norm",
            "attn_entropy": "attn_entropy", "update_layer": "update", "attn_logit_max": "attn_logit_max",
            "act_rms": "act_rms", "act_absmax": "act_absmax", "block_cos": "block_cos",
            "ngpt_alpha_attn": "ngpt_alpha_attn", "ngpt_alpha_mlp": "ngpt_alpha_mlp",
            "attn_cap_sat": "attn_softcap_saturation"}
SCALARS = {"loss": "train/loss", "grad_total": "grad_norm/total", "output_change": "update/output_change",
           "output_kl": "update/output_kl", "stream_change": "update/stream_change",
           "logit_change": "update/logit_change", "log_z": "output/log_z", "logit_max": "output/logit_max",
           "z_loss": "train/z_loss", "output_cap_sat": "output/softcap_saturation"}
HEADS = {"attn_head_logit_max": "attn_logit_max"}  # (block, head) values: <prefix>/layer_i/head_j
# (block, stream) values, a block's parallel streams (mHC): <prefix>/stream_j/layer_i, one per-layer family a stream
STREAMS = {"act_rms_stream": "act_rms", "act_absmax_stream": "act_absmax"}
# reduced across ranks by max; every other value by mean
MAXIMA = ("attn_logit_max", "attn_head_logit_max", "logit_max", "act_absmax", "act_absmax_stream")
# Monitor's on/off keywords, each named as the ``monitor.*`` config key that sets it
SWITCHES = ("grad_norms", "activations", "attn_entropy", "update_ratio", "attn_logit_max", "attn_logit_max_heads",
            "output_log_z", "output_logit_max", "residual_stats", "block_cos", "cap_saturation")


class DivergenceGuard:
    """Flags the first step whose loss or gradient norm is non-finite, or whose loss exceeds ``factor`` ×
    the first loss.

    The check runs on the device every step (no host sync); the host learns of it where it reads anyway: at
    log steps, before a checkpoint and at the end (``Monitor.diverged_at``).
    """

    def __init__(self, factor: float, device: torch.device):
        self.factor = factor
        self.first: torch.Tensor | None = None
        self.diverged_at = torch.full((), -1, dtype=torch.long, device=device)

    def observe(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor | None = None) -> None:
        loss = loss.detach().float()
        if self.first is None:
            self.first = loss.clone()
        bad = ~torch.isfinite(loss) | (loss > self.factor * self.first)
        if grad_norm is not None:
            bad = bad | ~torch.isfinite(grad_norm.detach().float())
        self._flag(step, bad)

    def observe_weights(self, step: int, params: Sequence[torch.Tensor]) -> None:
        """Non-finite weights (before a checkpoint): an update that overflowed though its gradients were finite."""
        finite = torch.stack([torch.isfinite(local(p.detach())).all() for p in params]).all()
        self._flag(step, ~finite)

    def _flag(self, step: int, bad: torch.Tensor) -> None:
        self.diverged_at = torch.where(bad & (self.diverged_at < 0), step, self.diverged_at)


def _squares(tensors: list[torch.Tensor], owners: torch.Tensor, n_layers: int) -> torch.Tensor:
    """Sum of squares of each layer's tensors, then of all tensors: a vector of n_layers + 1.

    ``owners[j]`` is tensor j's layer (-1: none). Sums of squares add up across FSDP shards.
    """
    squares = torch.stack(torch._foreach_norm([local(t) for t in tensors])).float().square()
    kept = torch.where(owners >= 0, squares, torch.zeros_like(squares))
    per_layer = torch.zeros(n_layers, device=squares.device).index_add_(0, owners.clamp(min=0), kept)
    return torch.cat([per_layer, squares.sum().reshape(1)])


class Monitor:
    """Collects the diagnostics above on log steps (every ``every`` steps, and the last step)."""

    def __init__(self, blocks: Sequence[nn.Module], params: Sequence[nn.Parameter], every: int,
                 divergence_factor: float, *, grad_norms: bool = True, activations: bool = True,
                 attn_entropy: bool = True, update_ratio: bool = True,
                 probe: Callable[[], dict[str, torch.Tensor]] | None = None,
                 all_reduce: Callable[[torch.Tensor, str], torch.Tensor] | None = None,
                 attn_logit_max: bool = True, attn_logit_max_heads: bool = True, output_log_z: bool = True,
                 output_logit_max: bool = True, spike_window: int | None = 1000, residual_stats: bool = True,
                 block_cos: bool = True, cap_saturation: bool = True, output_softcap: float = 0.0,
                 last_step: int | None = None):
        self.blocks, self.params, self.every, self.last_step = list(blocks), list(params), every, last_step
        self.grad_norms, self.update_ratio, self.attn_logit_max_heads = grad_norms, update_ratio, attn_logit_max_heads
        self.output_log_z, self.output_logit_max = output_log_z, output_logit_max
        self.cap_saturation, self.output_softcap = cap_saturation, output_softcap
        self.recorder = LayerRecorder(activations=activations, residual_stats=residual_stats, block_cos=block_cos,
                                      attn_entropy=attn_entropy, attn_logit_max=attn_logit_max,
                                      cap_saturation=cap_saturation)
        device = self.params[0].device
        self.guard = DivergenceGuard(divergence_factor, device)
        self.spikes = SpikeScore(spike_window, device) if spike_window else None
        # block index of every parameter (-1: embeddings, head, final norm), for one index_add per read
        owner = {id(p): i for i, b in enumerate(self.blocks) for p in b.parameters()}
        self.layer_of = torch.tensor([owner.get(id(p), -1) for p in self.params], device=device)
        self.probe = probe
        # F(x, θ_0) ("hidden") and, when the probe gives them, log p_θ0 ("logp"): the initial model is not kept
        self.probe_start: dict[str, torch.Tensor] = probe() if probe is not None else {}
        self.all_reduce = all_reduce  # across ranks: mean of the metrics, min of the divergence step
        self.sharded = any(hasattr(p, "to_local") for p in self.params)  # FSDP2: sum squares over shards
        self._values: dict[str, torch.Tensor] = {}
        self._before_update: list[torch.Tensor] | None = None

    def state_dict(self) -> dict:
        """The reference values a resumed run needs: the first loss and F(x, θ_0); the spike score's windows."""
        return {"first_loss": self.guard.first, "probe_start": self.probe_start.get("hidden"),
                "probe_logp_start": self.probe_start.get("logp"), "probe_stream_start": self.probe_start.get("stream"),
                "probe_logits_start": self.probe_start.get("logits"), "diverged_at": self.guard.diverged_at,
                "spikes": self.spikes.state_dict() if self.spikes else None}

    def load_state_dict(self, state: dict) -> None:
        device = self.guard.diverged_at.device
        self.guard.first = None if state["first_loss"] is None else state["first_loss"].to(device)
        self.guard.diverged_at = state["diverged_at"].to(device)
        if self.probe is not None:
            saved = {"hidden": state["probe_start"], "logp": state.get("probe_logp_start"),
                     "stream": state.get("probe_stream_start"), "logits": state.get("probe_logits_start")}
            self.probe_start.update({k: v.to(device) for k, v in saved.items()
                                     if v is not None and k in self.probe_start})
        if self.spikes is not None and state.get("spikes") is not None:  # none in older checkpoints: start afresh
            self.spikes.load_state_dict(state["spikes"])

    def take_reference(self) -> None:
        """F(x, θ_0) again, for a model whose θ_0 changed after the monitor was built (a data-dependent init)."""
        if self.probe is not None:
            self.probe_start = self.probe()

    def spike_summary(self) -> dict[str, float | int | None]:
        """The spike score for the summary (one host transfer); None values when switched off."""
        if self.spikes is None:
            return {"spike_score": None, "spike_score_loss": None, "spike_score_grad_norm": None, "spike_points": None}
        return self.spikes.summary()

    def is_log_step(self, step: int) -> bool:
        """Every ``every``-th step, and the run's last (``last_step``): the curves and per-layer diagnostics end
        where training ends, not up to ``every`` - 1 steps before it."""
        return step % self.every == 0 or step == self.last_step

    @contextmanager
    def capture(self, step: int) -> Iterator[None]:
        """Around the forward pass: on log steps, the probe's output change, then hooks record the per-block
        statistics (``LayerRecorder``)."""
        if self.probe is not None and self.is_log_step(step):
            self._probe_update()
        if not (self.recorder.wanted and self.is_log_step(step)):
            yield
            return
        handles = self.recorder.attach(self.blocks)
        try:
            yield
        finally:
            for h in handles:
                h.remove()
        self._values.update(self.recorder.stacked(len(self.blocks), heads=self.attn_logit_max_heads))

    @torch.no_grad()
    def _probe_update(self) -> None:
        """How far the model's output on the probe batch has moved since step 0 (before the training forward: a
        forward between backward and optimizer step upsets FSDP)."""
        now, start = self.probe(), self.probe_start
        self._values["output_change"] = (now["hidden"] - start["hidden"]).norm(dim=-1).mean().reshape(1)
        if "logp" in now and "logp" in start:
            kl = (start["logp"].exp() * (start["logp"] - now["logp"])).sum(-1).mean()
            self._values["output_kl"] = kl.reshape(1)
        for name, key in (("stream_change", "stream"), ("logit_change", "logits")):
            if key in now and key in start:
                self._values[name] = ((now[key] - start[key]).norm() / start[key].norm().clamp(min=1e-12)).reshape(1)

    def after_backward(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor | None = None) -> None:
        """Divergence check and spike score every step (loss and total gradient norm); on log steps the
        gradients and a parameter snapshot."""
        self.guard.observe(step, loss, grad_norm)
        if self.spikes is not None:
            self.spikes.observe(loss, grad_norm)
        if not self.is_log_step(step):
            return
        self._values["loss"] = loss.detach().float().reshape(1)
        if self.grad_norms:
            with_grad = [i for i, p in enumerate(self.params) if p.grad is not None]
            norms = self._norms([self.params[i].grad for i in with_grad], self.layer_of[with_grad])
            self._values["grad_layer"], self._values["grad_total"] = norms[:-1], norms[-1:]
        if self.update_ratio:
            self._before_update = [local(p.detach()).clone() for p in self.params]
        self._block_statistics()

    @torch.no_grad()
    def _block_statistics(self) -> None:
        """What the blocks report of their own parameters (``layer_diagnostics``: nGPT's α), one vector per name."""
        stats = [b.layer_diagnostics() if hasattr(b, "layer_diagnostics") else {} for b in self.blocks]
        for name in stats[0] if stats else ():
            self._values[name] = torch.stack([s[name].detach().float() for s in stats])

    def observe_output(self, step: int, logits: torch.Tensor, log_z: torch.Tensor | None = None,
                       z_loss: torch.Tensor | None = None) -> None:
        """On log steps: the output logits' mean log-partition and max over the batch, and the z-loss term.
        ``log_z`` (B, T) is reused when the loss already computed it (z-loss on)."""
        if not self.is_log_step(step):
            return
        with torch.no_grad():
            if self.output_log_z:
                log_z = log_partition(logits.detach()) if log_z is None else log_z.detach()
                self._values["log_z"] = log_z.mean().reshape(1)
            if self.output_logit_max:
                self._values["logit_max"] = logits.detach().amax().float().reshape(1)
            if self.cap_saturation and self.output_softcap:
                share = saturated_after_cap(logits.detach(), self.output_softcap).float().mean()
                self._values["output_cap_sat"] = share.reshape(1)
            if z_loss is not None:
                self._values["z_loss"] = z_loss.detach().float().reshape(1)

    def after_update(self, step: int) -> None:
        """On log steps: ‖Δθ‖/‖θ‖ per block for the update just taken."""
        if self._before_update is None:
            return
        before, self._before_update = self._before_update, None
        with torch.no_grad():
            delta = torch._foreach_sub([local(p.detach()) for p in self.params], before)
            ratio = self._norms(delta, self.layer_of) / self._norms(before, self.layer_of).clamp(min=1e-12)
        self._values["update_layer"] = ratio[:-1]

    def _norms(self, tensors: list[torch.Tensor], owners: torch.Tensor) -> torch.Tensor:
        """Per-layer L2 norms, then the total norm (n_layers + 1 values), whole even when sharded."""
        squares = _squares(tensors, owners, len(self.blocks))
        if self.sharded and self.all_reduce is not None:
            squares = self.all_reduce(squares, "sum")
        return squares.sqrt()

    def _first_divergence(self) -> torch.Tensor:
        """The divergence step as a 1-element float tensor (inf: none), the earliest over all ranks."""
        diverged = self.guard.diverged_at.reshape(1).float()
        diverged = torch.where(diverged < 0, float("inf"), diverged)
        return self.all_reduce(diverged, "min") if self.all_reduce is not None else diverged

    def diverged_at(self) -> int | None:
        """The first diverged step (or None): one host transfer, for the points that sync anyway."""
        value = self._first_divergence().item()
        return int(value) if value != float("inf") else None

    def read(self) -> tuple[dict[str, float], int | None]:
        """One host transfer: the metrics of the last log step, and the divergence step (or None)."""
        names = list(self._values)
        n_heads = {n: self._values[n].shape[-1] for n in names if n in HEADS}
        n_streams = {n: self._values[n].shape[-1] for n in names if n not in HEADS and self._values[n].dim() == 2}
        diverged = self._first_divergence()
        if self.all_reduce is not None and names:
            for op in ("mean", "max"):
                group = [n for n in names if (n in MAXIMA) == (op == "max")]
                if group:
                    reduced = self.all_reduce(torch.cat([self._values[n].reshape(-1) for n in group]), op)
                    sizes = [self._values[n].numel() for n in group]
                    self._values.update(zip(group, reduced.split(sizes), strict=True))
        values = torch.cat([self._values[n].reshape(-1) for n in names] + [diverged]).tolist()
        metrics: dict[str, float] = {}
        offset = 0
        for name in names:
            n = self._values[name].numel()
            chunk, offset = values[offset:offset + n], offset + n
            if name in SCALARS:
                metrics[SCALARS[name]] = chunk[0]
            elif name in HEADS:
                h = n_heads[name]
                metrics.update({f"{HEADS[name]}/layer_{i // h}/head_{i % h}": v for i, v in enumerate(chunk)})
            elif name in n_streams:  # (block, stream): the recorder's, or a block's own (layer_diagnostics)
                k, prefix = n_streams[name], STREAMS.get(name, name)
                metrics.update({f"{prefix}/stream_{i % k}/layer_{i // k}": v for i, v in enumerate(chunk)})
            else:  # a block's own diagnostics are named as their prefix
                metrics.update({f"{PREFIXES.get(name, name)}/layer_{i}": v for i, v in enumerate(chunk)})
        self._values.clear()
        return metrics, (int(values[-1]) if values[-1] != float("inf") else None)
