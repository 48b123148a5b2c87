"""Batches of (x, y) windows from a token array: random for training, fixed for evaluation.

A window is ``seq_len + 1`` consecutive tokens; x is all but its last token and y all but its
first, so ``y[:, t]`` is the token that follows ``x[:, :t + 1]``.
"""

from __future__ import annotations

import numpy as np
import torch

from normtrain.util.errors import DataError


class BatchSampler:
    """Random windows of seq_len+1 tokens -> (x, y) int64 tensors (B, T); reproducible from a seed; resumable.

    The starts come from a private CPU ``torch.Generator``, so the sequence of batches depends only
    on the seed and how many batches were drawn, not on the global RNG or the device; its state plus
    that count is the whole state of the sampler.

    Every step draws one global batch of ``batch_size × world_size × accumulation`` windows, whatever the
    number of processes, and each rank keeps its consecutive share (its ``accumulation`` micro-batches of
    ``batch_size``): N ranks see exactly the batches one process with N× the accumulation would, and the state
    does not depend on the world size, so a run resumes on any number of processes.
    """

    def __init__(self, tokens: np.ndarray, batch_size: int, seq_len: int, seed: int, device="cpu",
                 *, name: str = "train", rank: int = 0, world_size: int = 1, accumulation: int = 1):
        _check_length(tokens, seq_len, name)
        self.tokens, self.batch_size, self.seq_len, self.seed = tokens, batch_size, seq_len, seed
        self.device = torch.device(device)
        self.rank, self.share = rank, batch_size * accumulation
        self.global_batch = self.share * world_size
        self.generator = torch.Generator().manual_seed(seed)
        self.batches_drawn = 0  # global batches, skipped ones included

    def _starts(self) -> torch.Tensor:
        n_starts = len(self.tokens) - self.seq_len  # the last window ends on the last token
        self.batches_drawn += 1
        return torch.randint(n_starts, (self.global_batch,), generator=self.generator)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's share of the next global batch: ``accumulation × batch_size`` windows."""
        starts = self._starts()[self.rank * self.share:(self.rank + 1) * self.share]
        return _windows(self.tokens, starts.numpy(), self.seq_len, self.device)

    def skip(self, n: int) -> None:
        """Move past the next ``n`` global batches without reading them (a rollback skips the data that
        diverged)."""
        for _ in range(n):
            self._starts()

    def state_dict(self) -> dict:
        return {
            "generator": self.generator.get_state(),
            "batches_drawn": self.batches_drawn,
            "seed": self.seed,
            "shape": [len(self.tokens), self.global_batch, self.seq_len],
            "global": True,  # shape[1] is the global batch (before: the per-rank batch; see ``per_rank_state``)
        }

    def load_state_dict(self, state: dict) -> None:
        shape = [len(self.tokens), self.global_batch, self.seq_len]
        if list(state["shape"]) != shape:
            raise DataError(
                f"the sampler state was saved for (tokens, global batch, seq_len)={list(state['shape'])} "
                f"but this run has {shape}: resume with the same corpus, global batch (train.global_batch_size, "
                "or train.batch_size × processes) and model.seq_len"
            )
        self.generator.set_state(state["generator"])
        self.batches_drawn, self.seed = state["batches_drawn"], state["seed"]


def global_state(state: dict, world_size: int) -> dict:
    """A sampler state as this version writes it. Before the global batch, states recorded the per-rank batch
    of a run on ``world_size`` processes, which drew ``batch_size × world_size`` windows per step too."""
    if state.get("global"):
        return state
    n_tokens, batch_size, seq_len = state["shape"]
    return {**state, "shape": [n_tokens, batch_size * world_size, seq_len], "global": True}


def eval_starts(n_tokens: int, seq_len: int, n_windows: int) -> np.ndarray:
    """Start offsets of ``n_windows`` fixed windows spread evenly over a split of ``n_tokens`` (first to last).

    Evaluating on the same windows every time makes val losses of one run, and of runs that differ
    only in their normalization, directly comparable.
    """
    return np.linspace(0, n_tokens - seq_len - 1, n_windows).round().astype(np.int64)


def select_starts(n_tokens: int, seq_len: int, n_windows: int, n_select: int) -> np.ndarray:
    """Start offsets of ``n_select`` held-out windows halfway between the judged windows of ``eval_starts``, which
    they never overlap: a score to choose a learning rate by that is not the judged loss (normtrain/study/).
    Raises ValueError saying what fits when the judged windows leave no room between them."""
    judged = eval_starts(n_tokens, seq_len, n_windows)
    gaps = np.diff(judged)
    if n_select > len(gaps):
        raise ValueError(f"train.select_windows={n_select}: at most {len(gaps)} fit between the "
                         f"{n_windows} judged windows (one between each two)")
    if len(gaps) == 0 or gaps.min() < 2 * (seq_len + 1):
        room = (n_tokens - seq_len - 1) // (2 * (seq_len + 1)) + 1
        raise ValueError(f"train.select_windows: the {n_windows} judged windows of {seq_len + 1} tokens over the "
                         f"{n_tokens}-token validation split leave no room between them; use at most {room} judged "
                         "windows (train.eval_windows) or a larger validation split")
    mids = judged[:-1] + gaps // 2
    return mids[np.linspace(0, len(mids) - 1, n_select).round().astype(np.int64)]


def eval_window_count(eval_windows: int, global_batch: int, eval_batches: int, world_size: int) -> int:
    """How many fixed validation windows a run evaluates: ``train.eval_windows``, or the global batch × eval
    batches (so a run resumed on another number of processes keeps its validation set), rounded up to a multiple
    of the ranks so that every rank runs the same number of forward passes."""
    n = eval_windows or global_batch * eval_batches
    return -(-n // world_size) * world_size


def window_batches(tokens: np.ndarray, starts: np.ndarray, seq_len: int, batch_size: int, device="cpu",
                   *, name: str = "val") -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The windows at ``starts`` in batches of at most ``batch_size`` (the last may be smaller)."""
    _check_length(tokens, seq_len, name)
    return [_windows(tokens, starts[i:i + batch_size], seq_len, device) for i in range(0, len(starts), batch_size)]


def _windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int, device) -> tuple[torch.Tensor, ...]:
    rows = torch.from_numpy(np.ascontiguousarray(tokens[starts[:, None] + np.arange(seq_len + 1)]))
    if torch.device(device).type == "cuda":
        # Move the narrow rows (uint8 or the shards' uint16/uint32: 2-8x smaller than int64) from pinned memory,
        # so the copy is async.
        rows = rows.pin_memory().to(device, non_blocking=True)
    x = rows[:, :-1].to(torch.int64, memory_format=torch.contiguous_format)
    y = rows[:, 1:].to(torch.int64, memory_format=torch.contiguous_format)
    return x, y


def _check_length(tokens: np.ndarray, seq_len: int, name: str) -> None:
    if len(tokens) < seq_len + 1:
        more = ("raise data.val_fraction (normtrain-prepare --val-fraction for token shards) or add files"
                if name == "val" else "add files to the corpus")
        raise DataError(
            f"the {name} split has {len(tokens)} tokens, too few for one window of model.seq_len+1="
            f"{seq_len + 1}: lower model.seq_len, or {more}"
        )
