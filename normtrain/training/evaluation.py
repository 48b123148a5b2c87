"""What a run is measured on besides its training batches: the fixed validation windows and their loss, the
unigram baseline scored on exactly those windows, and the monitor's probe batch (``OutputProbe``).

The windows' number follows the global batch, not the world size (each rank evaluates every world_size-th one),
so a run resumed on another number of processes keeps its validation set; the probe batch is the same on every
rank.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from omegaconf import DictConfig

from normtrain.data import eval_starts, eval_window_count, select_starts, window_batches
from normtrain.data.unigram import unigram_loss
from normtrain.training.distributed import DistContext

LN2 = math.log(2)
EXIT_EVAL_MAX_S = 5.0  # an interrupted run is evaluated where it stopped when its last evaluation took less


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches, autocast, ctx: DistContext) -> float:
    """Mean validation loss (nats per token) over the fixed windows of every rank, each window weighted alike."""
    model.eval()
    total = torch.zeros(2, device=batches[0][0].device)  # (sum of window losses, windows)
    for x, y in batches:
        with autocast():
            total[0] += model(x, y)[1].float() * len(x)
        total[1] += len(x)
    model.train()
    total = ctx.all_reduce(total, "sum")
    return (total[0] / total[1]).item()


class Evaluation:
    """The fixed validation windows (this rank's share), the monitor's probe batch, and the unigram baseline."""

    def __init__(self, cfg: DictConfig, corpus, ctx: DistContext, global_batch: int):
        t, seq_len, probe_batch = cfg.train, cfg.model.seq_len, cfg.monitor.probe_batch
        self.ctx, self.val_bytes_per_token = ctx, corpus.val_bytes_per_token
        self.n_windows = eval_window_count(t.eval_windows, global_batch, t.eval_batches, ctx.world_size)
        starts = eval_starts(len(corpus.val), seq_len, self.n_windows)
        self.batches = window_batches(corpus.val, starts[ctx.rank::ctx.world_size], seq_len, t.batch_size,
                                      device=ctx.device)
        self.probe_x = window_batches(corpus.val, starts[:probe_batch], seq_len, probe_batch,
                                      device=ctx.device)[0][0]  # the same on every rank
        self.unigram_val_loss = unigram_loss(corpus.counts, corpus.val, starts, seq_len)
        self.select_batches = self.selection_windows(corpus, t, seq_len, ctx) if t.select_windows else None
        self.seconds = math.inf  # how long the last ``loss`` took

    def selection_windows(self, corpus, t: DictConfig, seq_len: int, ctx: DistContext):
        """``train.select_windows`` held-out windows between the judged ones (this rank's share): the loss a study
        chooses a learning rate by, never the one it judges (normtrain/study/decision.py)."""
        from normtrain.util.errors import ConfigError

        try:
            starts = select_starts(len(corpus.val), seq_len, self.n_windows, t.select_windows)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        return window_batches(corpus.val, starts[ctx.rank::ctx.world_size], seq_len, t.batch_size, device=ctx.device,
                              name="val")

    def select_loss(self, model: torch.nn.Module, autocast: Callable[[], AbstractContextManager]) -> float | None:
        """The loss on the selection windows (None without them)."""
        return None if self.select_batches is None else evaluate(model, self.select_batches, autocast, self.ctx)

    def loss(self, model: torch.nn.Module, autocast: Callable[[], AbstractContextManager]) -> float:
        t0 = time.perf_counter()
        loss = evaluate(model, self.batches, autocast, self.ctx)
        self.seconds = time.perf_counter() - t0
        return loss

    def worth_on_exit(self, val_steps: list[int], step: int) -> bool:
        """Whether a run interrupted after ``step`` updates is evaluated on its way out, so that its final loss is
        not a stale one: when its last evaluation is older than ``step`` and took under ``EXIT_EVAL_MAX_S`` (every
        CPU-scale model here; a large model's exit is not held up). The evaluation reads no random number and
        changes no state a resume reads, so the resumed run goes on exactly as it would have."""
        return bool(val_steps) and val_steps[-1] < step and self.seconds < EXIT_EVAL_MAX_S

    def bpb(self, loss: float) -> float:
        """Bits per byte of text from a loss per token, over the validation split's real byte count: tokenizers
        compare (for byte corpora, one byte per token, it is loss / ln 2)."""
        return loss / LN2 / self.val_bytes_per_token


class OutputProbe:
    """F(x, θ) on the fixed probe batch for the model-update metrics (``Monitor``'s ``probe``): the final hidden
    state the LM head reads and, with ``monitor.stream_change``, the residual stream before the final norm
    (unsaturated; for placements without a final norm, the last block's output) and the logits; with
    ``monitor.output_kl``, the output log-probabilities. One forward pass through the wrapper-aware ``model``
    (FSDP gathers the head there); hooks on the plain module ``raw`` take the head's and the final norm's inputs."""

    def __init__(self, model: torch.nn.Module, raw: torch.nn.Module, probe_x: torch.Tensor,
                 autocast: Callable[[], AbstractContextManager], monitor: DictConfig):
        self.model, self.raw, self.x, self.autocast = model, raw, probe_x, autocast
        self.stream_change, self.output_kl = monitor.stream_change, monitor.output_kl

    @torch.no_grad()
    def __call__(self) -> dict[str, torch.Tensor]:
        seen: dict[str, torch.Tensor] = {}
        hooks = [self.raw.lm_head.register_forward_pre_hook(lambda _m, args: seen.update(hidden=args[0]))]
        if self.raw.final_norm is not None:
            hooks.append(self.raw.final_norm.register_forward_pre_hook(lambda _m, args: seen.update(stream=args[0])))
        self.model.eval()
        try:
            with self.autocast():
                logits, _ = self.raw(self.x)
        finally:
            for hook in hooks:
                hook.remove()
            self.model.train()
        out = {"hidden": seen["hidden"].float()}
        if self.stream_change:
            out.update(stream=seen.get("stream", seen["hidden"]).float(), logits=logits.float())
        if self.output_kl:
            out["logp"] = logits.float().log_softmax(-1)
        return out
