"""Which blocks does the trained model use? The eval loss with each block skipped, and the residual stream's
anatomy per block (input/output cosine, rms, max |x|) over the run's validation windows.

Skipping block i replaces it by the identity: the stream that enters it leaves it unchanged, x_{i+1} = x_i. In
Pre-LN, Peri-LN and the other placements whose stream is never normed, that removes exactly the block's
contribution x + F(x) → x. In Post-LN (and DeepNorm, Admin, Mix-LN's Post-LN blocks) the block ends in a norm of
the stream, N(x + F(x)); skipping it removes that norm too, so the next block receives an un-normed stream: the
block is replaced by the identity there as well, not by N(x).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import torch
from torch import nn

from normtrain.probe.inputs import ProbeRun
from normtrain.training.monitor import block_cosine, stream_absmax, stream_rms


@contextmanager
def skipped(model: nn.Module, layer: int) -> Iterator[None]:
    """Block ``layer`` replaced by the identity while the context lasts."""
    block = model.blocks[layer]
    model.blocks[layer] = nn.Identity()
    try:
        yield
    finally:
        model.blocks[layer] = block


class StreamStats:
    """Per-block sums over every evaluated window, kept on the device and read back once (``result``): the
    stream's rms over all elements, its max |x|, and the per-token cosine of the block's input and output,
    averaged over tokens (the monitor's statistics, pooled exactly over batches of any size)."""

    def __init__(self, n_blocks: int, device: torch.device):
        self.squares, self.elements, self.cos_sum, self.tokens, self.absmax = (
            torch.zeros(n_blocks, dtype=torch.float64, device=device) for _ in range(5))

    @torch.no_grad()
    def observe(self, layer: int, _module, args, out: torch.Tensor) -> None:
        n_tokens = out.numel() // out.shape[-1]
        self.squares[layer] += stream_rms(out).double().square() * out.numel()
        self.elements[layer] += out.numel()
        self.absmax[layer] = torch.maximum(self.absmax[layer], stream_absmax(out).double())
        self.cos_sum[layer] += block_cosine(args[0], out).double() * n_tokens
        self.tokens[layer] += n_tokens

    def result(self) -> dict[str, list[float]]:
        rms = (self.squares / self.elements).sqrt()
        values = torch.stack([self.cos_sum / self.tokens, rms, self.absmax]).tolist()
        return dict(zip(("block_cos", "act_rms", "act_absmax"), values, strict=True))


def eval_loss(run: ProbeRun) -> float:
    """Mean loss per token over the run's validation windows: the training loop's own evaluation."""
    from normtrain.training.distributed import DistContext
    from normtrain.training.trainer import evaluate

    loss = evaluate(run.model, run.batches, run.autocast, DistContext(device=run.device))
    run.model.eval()  # evaluate hands the model back in training mode
    return loss


def anatomy(run: ProbeRun) -> tuple[float, dict[str, list[float]]]:
    """(the full model's eval loss, the per-block stream statistics of ``StreamStats`` on the same windows)."""
    blocks = run.model.blocks
    stats = StreamStats(len(blocks), run.device)
    handles = [b.register_forward_hook(partial(stats.observe, i)) for i, b in enumerate(blocks)]
    try:
        loss = eval_loss(run)
    finally:
        for h in handles:
            h.remove()
    return loss, stats.result()


def skip_losses(run: ProbeRun) -> list[float]:
    """The eval loss with each block skipped in turn (the others intact)."""
    losses = []
    for layer in range(len(run.model.blocks)):
        with skipped(run.model, layer):
            losses.append(eval_loss(run))
    return losses
