"""BatchSampler and the fixed eval windows (eval_starts, window_batches): window shapes, the x/y shift,
reproducibility and resuming."""

import numpy as np
import pytest
import torch

from normtrain.data import BatchSampler, eval_starts, window_batches
from normtrain.data.batches import global_state
from normtrain.util.errors import DataError

TOKENS = np.random.default_rng(0).integers(0, 256, 5_000, dtype=np.uint8)


def _is_window(row: torch.Tensor, tokens: np.ndarray) -> bool:
    row = row.numpy()
    starts = np.flatnonzero(tokens[: len(tokens) - len(row) + 1] == row[0])
    return any(np.array_equal(tokens[s : s + len(row)], row) for s in starts)


def test_batches_are_shifted_windows():
    x, y = BatchSampler(TOKENS, batch_size=6, seq_len=33, seed=1).next_batch()
    assert x.shape == y.shape == (6, 33) and x.dtype == y.dtype == torch.int64
    assert x.is_contiguous() and y.is_contiguous()
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert all(_is_window(torch.cat([x[i], y[i, -1:]]), TOKENS) for i in range(6))


def test_same_seed_same_batches_other_seed_other_batches():
    a, b, c = (BatchSampler(TOKENS, 4, 16, seed) for seed in (7, 7, 8))
    for _ in range(3):
        (xa, ya), (xb, yb), (xc, _) = a.next_batch(), b.next_batch(), c.next_batch()
        assert torch.equal(xa, xb) and torch.equal(ya, yb) and not torch.equal(xa, xc)


def test_state_dict_resumes_the_exact_sequence(tmp_path):
    sampler = BatchSampler(TOKENS, 4, 16, seed=3)
    for _ in range(5):
        sampler.next_batch()
    torch.save(sampler.state_dict(), tmp_path / "sampler.pt")
    expected = [sampler.next_batch() for _ in range(4)]

    restarted = BatchSampler(TOKENS, 4, 16, seed=3)
    restarted.load_state_dict(torch.load(tmp_path / "sampler.pt", weights_only=True))
    for (x, y), (ex, ey) in zip([restarted.next_batch() for _ in range(4)], expected, strict=True):
        assert torch.equal(x, ex) and torch.equal(y, ey)
    assert restarted.state_dict()["batches_drawn"] == 9


def test_state_from_another_setup_is_refused():
    state = BatchSampler(TOKENS, 4, 16, seed=3).state_dict()
    with pytest.raises(DataError, match="batch_size"):
        BatchSampler(TOKENS, 8, 16, seed=3).load_state_dict(state)


def eval_batches(tokens, batch_size, seq_len, n_batches, device="cpu"):
    """``n_batches`` batches of ``batch_size`` fixed windows, as training builds its validation set."""
    return window_batches(tokens, eval_starts(len(tokens), seq_len, batch_size * n_batches), seq_len, batch_size,
                          device=device)


def test_eval_batches_are_fixed_and_span_the_split():
    batches = eval_batches(TOKENS, batch_size=3, seq_len=20, n_batches=4)
    assert len(batches) == 4 and all(x.shape == y.shape == (3, 20) for x, y in batches)
    again = eval_batches(TOKENS, batch_size=3, seq_len=20, n_batches=4)
    for (x, y), (x2, y2) in zip(batches, again, strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2)
    (first, _), (_, last) = batches[0], batches[-1]
    assert np.array_equal(first[0].numpy(), TOKENS[:20])  # the first window starts at the first token
    assert np.array_equal(last[-1].numpy(), TOKENS[-20:])  # the last one ends on the last token


def test_read_only_memory_map_works(tmp_path):
    np.save(tmp_path / "t.npy", TOKENS)
    tokens = np.load(tmp_path / "t.npy", mmap_mode="r")
    x, _ = BatchSampler(tokens, 2, 8, seed=0).next_batch()
    assert eval_batches(tokens, 2, 8, 1)[0][0].shape == x.shape == (2, 8)


@pytest.mark.parametrize("make, says", [
    (lambda t: BatchSampler(t, 2, 64, seed=0), "train split has 64 tokens"),
    (lambda t: eval_batches(t, 2, 64, 1), "raise data.val_fraction"),
])
def test_a_split_shorter_than_a_window_says_what_to_do(make, says):
    with pytest.raises(DataError, match="lower model.seq_len") as err:
        make(TOKENS[:64])
    assert says in str(err.value)
    make(TOKENS[:65])  # exactly one window fits


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batches_match_cpu():
    x, y = BatchSampler(TOKENS, 4, 16, seed=5, device="cuda").next_batch()
    cx, cy = BatchSampler(TOKENS, 4, 16, seed=5).next_batch()
    assert x.is_cuda and torch.equal(x.cpu(), cx) and torch.equal(y.cpu(), cy)
    ex, _ = eval_batches(TOKENS, 2, 16, 1, device="cuda")[0]
    assert ex.is_cuda and ex.dtype == torch.int64


def test_the_global_batch_is_the_same_on_any_number_of_ranks():
    """2 ranks × 4 windows and 1 process × 2 micro-batches × 4 draw one sequence of global batches, and the state
    (saved by either) resumes the other: it does not depend on the world size."""
    ranks = [BatchSampler(TOKENS, 4, 16, seed=2, rank=r, world_size=2) for r in (0, 1)]
    one = BatchSampler(TOKENS, 4, 16, seed=2, accumulation=2)
    for _ in range(3):
        x, y = one.next_batch()
        assert x.shape == (8, 16)
        assert torch.equal(x, torch.cat([r.next_batch()[0] for r in ranks]))
    assert one.state_dict()["shape"] == ranks[0].state_dict()["shape"] == [len(TOKENS), 8, 16]
    four = BatchSampler(TOKENS, 2, 16, seed=2, rank=3, world_size=4)
    four.load_state_dict(ranks[1].state_dict())
    assert torch.equal(four.next_batch()[0], one.next_batch()[0][6:])


def test_skip_moves_past_batches_without_reading_them():
    skipping, drawing = BatchSampler(TOKENS, 4, 16, seed=4), BatchSampler(TOKENS, 4, 16, seed=4)
    skipping.skip(3)
    for _ in range(3):
        drawing.next_batch()
    assert torch.equal(skipping.next_batch()[0], drawing.next_batch()[0]) and skipping.batches_drawn == 4


def test_a_state_of_the_per_rank_era_reads_as_global():
    old = {**BatchSampler(TOKENS, 4, 16, seed=1).state_dict(), "shape": [len(TOKENS), 2, 16]}
    del old["global"]  # written by 2 ranks of 2 windows, before the global batch
    sampler = BatchSampler(TOKENS, 4, 16, seed=1)
    sampler.load_state_dict(global_state(old, world_size=2))
    assert sampler.state_dict()["shape"] == [len(TOKENS), 4, 16]
