"""``normtrain.train`` end to end on tiny settings: files, keys, learning, divergence."""

import json
import math

import pytest

import normtrain


def read_metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_tiny_run_writes_metrics_and_summary(tiny, tmp_path):
    cfg = normtrain.compose([*tiny, "train.max_steps=40", "optim.lr=3e-3", "placement=post"])
    summary = normtrain.train(cfg, run_dir=tmp_path)
    assert summary["status"] == "completed" and summary["steps"] == 40
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["status"] == "completed" and on_disk["config"]["placement"]["name"] == "post"
    for key in ("diverged_at_step", "final_val_loss", "best_val_loss", "n_params", "alpha", "beta",
                "wall_time_s", "corpus"):
        assert key in on_disk
    assert on_disk["corpus"]["n_bytes"] > 10_000 and len(on_disk["corpus"]["fingerprint"]) >= 16
    assert (tmp_path / "ckpt.pt").is_file()

    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [0, 5, 10, 15, 20, 25, 30, 35, 40]
    first = rows[0]
    for key in ["train/loss", "lr", "grad_norm/total", "val/loss", "val/bpb"]:
        assert key in first
    for i in range(2):
        for prefix in ("grad_norm", "act_mean", "act_std", "resid_norm", "attn_entropy", "update"):
            assert math.isfinite(first[f"{prefix}/layer_{i}"])
    assert first["update/output_change"] == 0.0 and rows[-2]["update/output_change"] > 0
    assert "grad_norm/layer_2" not in first and "grad_norm/layer_00" not in first
    # every training row has a real throughput, the first included (it covers update 1); the final eval row has none
    assert all(r["tokens_per_s"] > 0 for r in rows[:-1]) and rows[-1].get("tokens_per_s") is None
    vals = [r["val/loss"] for r in rows if "val/loss" in r]
    assert len(vals) == 5  # steps 0, 10, 20, 30, 40
    assert vals[-1] < vals[0] - 1.0, vals  # ln 256 ≈ 5.5 at init; a tiny model learns bytes quickly
    assert summary["final_val_loss"] == vals[-1] and summary["best_val_loss"] == min(vals)
    assert summary["final_val_bpb"] == pytest.approx(vals[-1] / math.log(2))


def test_huge_lr_diverges_as_a_result(tiny, tmp_path):
    cfg = normtrain.compose([*tiny, "optim.lr=1e4", "optim.warmup_steps=0", "optim.grad_clip=0",
                             "placement=post", "train.max_steps=60"])
    summary = normtrain.train(cfg, run_dir=tmp_path)
    assert summary["status"] == "diverged"
    assert 0 < summary["diverged_at_step"] < 60 and summary["steps"] < 60
    rows = read_metrics(tmp_path)
    assert rows[-1]["step"] >= summary["diverged_at_step"]
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "diverged"


def test_same_seed_same_losses(tiny, tmp_path):
    a = normtrain.train(normtrain.compose([*tiny, "train.max_steps=10"]), run_dir=tmp_path / "a")
    b = normtrain.train(normtrain.compose([*tiny, "train.max_steps=10"]), run_dir=tmp_path / "b")
    assert a["final_val_loss"] == b["final_val_loss"]
    assert read_metrics(tmp_path / "a")[-2]["train/loss"] == read_metrics(tmp_path / "b")[-2]["train/loss"]


def test_bad_config_raises_before_any_work(tiny, tmp_path):
    from normtrain.errors import ConfigError

    with pytest.raises(ConfigError, match="model.n_layers=0"):
        normtrain.train(normtrain.compose([*tiny, "model.n_layers=0"]), run_dir=tmp_path)
    assert not (tmp_path / "metrics.jsonl").exists()
