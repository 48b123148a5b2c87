"""The OLMo-2 spike score kept on the device matches a direct rolling computation, and survives a resume."""

import numpy as np
import pytest
import torch

from normtrain.training.spikes import SpikeScore


def explicit(series: np.ndarray, window: int) -> tuple[np.ndarray, int]:
    """Per point: is it ≥ 7σ from the mean of the previous ``window`` finite points (or non-finite)?"""
    flags = []
    for t in range(window, len(series)):
        past = series[t - window:t]
        past = past[np.isfinite(past)]
        dev = abs(series[t] - past.mean())
        flags.append(not np.isfinite(series[t]) or (dev >= 7 * past.std(ddof=1) and dev > 0))
    return np.array(flags), len(flags)


def synthetic(n=260, seed=0):
    rng = np.random.default_rng(seed)
    loss = 3.0 - np.linspace(0, 1, n) + 0.01 * rng.standard_normal(n)
    grad = 1.0 + 0.05 * rng.standard_normal(n)
    loss[[60, 61, 200]] += [0.5, 0.3, 2.0]  # spikes, one right after another
    grad[[90, 200]] *= [4.0, 10.0]
    loss[150] = np.nan  # a non-finite point: a spike, and left out of later windows
    return loss, grad


@pytest.mark.parametrize("window", [20, 50])
def test_spike_score_matches_a_direct_rolling_computation(window):
    loss, grad = synthetic()
    score = SpikeScore(window, torch.device("cpu"))
    for a, b in zip(loss, grad, strict=True):
        score.observe(torch.tensor(a), torch.tensor(b))
    loss_flags, n = explicit(loss, window)
    grad_flags, _ = explicit(grad, window)
    got = score.summary()
    assert got["spike_points"] == n == len(loss) - window
    assert got["spike_score_loss"] == pytest.approx(loss_flags.sum() / n)
    assert got["spike_score_grad_norm"] == pytest.approx(grad_flags.sum() / n)
    assert got["spike_score"] == pytest.approx((loss_flags | grad_flags).sum() / n)
    assert loss_flags.sum() >= 3 and grad_flags.sum() == 2  # the injected spikes are found, the trend is not one


def test_no_score_before_the_window_is_full():
    score = SpikeScore(1000, torch.device("cpu"))
    for v in range(300):
        score.observe(torch.tensor(float(v)), torch.tensor(1.0))
    assert score.summary() == {"spike_score": None, "spike_score_loss": None, "spike_score_grad_norm": None,
                               "spike_points": 0}


def test_a_resume_continues_the_same_windows():
    loss, grad = synthetic()
    whole, first = SpikeScore(40, torch.device("cpu")), SpikeScore(40, torch.device("cpu"))
    for i, (a, b) in enumerate(zip(loss, grad, strict=True)):
        whole.observe(torch.tensor(a), torch.tensor(b))
        if i < 130:
            first.observe(torch.tensor(a), torch.tensor(b))
    resumed = SpikeScore(40, torch.device("cpu"))
    resumed.load_state_dict(first.state_dict())
    for a, b in zip(loss[130:], grad[130:], strict=True):
        resumed.observe(torch.tensor(a), torch.tensor(b))
    assert resumed.summary() == whole.summary()


@pytest.mark.parametrize("new_window", [25, 60])
def test_a_resume_with_another_window_keeps_the_latest_points_in_order(new_window):
    loss, grad = synthetic()
    first = SpikeScore(40, torch.device("cpu"))
    for a, b in zip(loss[:130], grad[:130], strict=True):
        first.observe(torch.tensor(a), torch.tensor(b))
    resumed = SpikeScore(new_window, torch.device("cpu"))
    resumed.load_state_dict(first.state_dict())
    k = min(40, new_window)
    window = resumed.state_dict()["values"]  # oldest first
    expected = torch.tensor(np.stack([loss[130 - k:130], grad[130 - k:130]]), dtype=torch.float32)
    torch.testing.assert_close(window[:, new_window - k:], expected)
    assert window[:, :new_window - k].isnan().all()
    assert resumed.summary() == first.summary()  # the counts so far carry over
