"""``normtrain.train`` end to end on tiny settings: files, keys, learning, divergence."""

import json
import math

import pytest
import torch

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
    assert [r["step"] for r in rows] == [0, 5, 10, 15, 20, 25, 30, 35, 39, 40]  # 39: the last step is a log step
    first = rows[0]
    for key in ["train/loss", "lr", "grad_norm/total", "val/loss", "val/bpb"]:
        assert key in first
    for i in range(2):
        for prefix in ("grad_norm", "act_mean", "act_std", "resid_norm", "attn_entropy", "update", "act_rms",
                       "act_absmax", "block_cos"):
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


def test_the_last_step_is_a_log_step_whatever_monitor_every_is(tiny, tmp_path):
    """80 steps logged every 10 used to end the train curve and every per-layer value at step 70."""
    normtrain.train(normtrain.compose([*tiny, "train.max_steps=23", "monitor.every=10", "train.eval_every=0"]),
                    run_dir=tmp_path)
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [0, 10, 20, 22, 23]  # 23: the final evaluation
    last = rows[3]
    for key in ("train/loss", "grad_norm/total", "grad_norm/layer_1", "act_rms/layer_1", "update/layer_1",
                "attn_entropy/layer_1", "update/output_change", "output/log_z", "tokens_per_s"):
        assert math.isfinite(last[key]), key


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
    from normtrain.util.errors import ConfigError

    with pytest.raises(ConfigError, match="model.n_layers=0"):
        normtrain.train(normtrain.compose([*tiny, "model.n_layers=0"]), run_dir=tmp_path)
    assert not (tmp_path / "metrics.jsonl").exists()


def test_summary_records_the_unigram_baseline_the_labels_and_how_the_run_executed(tiny, tmp_path):
    from normtrain.data import eval_starts, load_corpus
    from normtrain.data.unigram import unigram_loss

    cfg = normtrain.compose([*tiny, "train.max_steps=80", "optim.lr=1e-2", "train.eval_windows=24"])
    summary = normtrain.train(cfg, run_dir=tmp_path / "learns")
    corpus = load_corpus("local_text", cfg.data.path)
    expected = unigram_loss(corpus.counts, corpus.val, eval_starts(len(corpus.val), 32, 24), 32)
    assert summary["unigram_val_loss"] == pytest.approx(expected) and summary["eval_windows"] == 24
    assert summary["final_val_loss"] < summary["unigram_val_loss"] - 0.05
    assert not (summary["collapsed"] or summary["above_line"] or summary["plateaued"])
    execution = summary["execution"]  # what a rerun that moves a number is compared against
    assert execution["threads"] == torch.get_num_threads() and execution["device"] == "cpu"
    assert {"deterministic_algorithms", "cudnn_deterministic", "device_name", "torch"} <= set(execution)
    # subnormal CPU floats are flushed (a 192-layer Post-LN run ran 6× slower on them), and the record says so
    assert execution["flush_denormal"] is True and (torch.tensor([1e-39]) * 1.0).item() == 0.0
    # a learning rate of ~0 leaves the model at the uniform distribution, above the unigram line: above_line, never
    # collapsed; with only the final evaluation there is no last quarter to read, so undertrained is unknown
    short = normtrain.train(normtrain.compose([*tiny, "train.max_steps=10", "optim.lr=1e-9", "train.eval_every=0"]),
                            run_dir=tmp_path / "s")
    assert short["final_val_loss"] > short["unigram_val_loss"] + 0.05
    assert (short["above_line"], short["collapsed"], short["undertrained"], short["labels"]) == (True, False, None,
                                                                                                 ["above_line"])
    # evaluated every 5 of 40 steps: the validation curve's last quarter (steps 30 to 40) is read, and it is flat
    flat = normtrain.train(normtrain.compose([*tiny, "train.max_steps=40", "optim.lr=1e-9", "train.eval_every=5"]),
                           run_dir=tmp_path / "flat")
    assert flat["val_trend"]["window"] == [30, 40] and flat["undertrained"] is False
    record = json.loads((tmp_path / "flat" / "summary.json").read_text())
    assert record["above_line"] is True and record["val_trend"]["drop"] == pytest.approx(0.0, abs=1e-4)


def test_eval_windows_fix_one_val_set_across_batch_sizes(tiny, tmp_path):
    runs = {b: normtrain.train(normtrain.compose([*tiny, "train.max_steps=1", f"train.batch_size={b}",
                                                  "train.eval_windows=12", "optim.lr=1e-9"]), run_dir=tmp_path / str(b))
            for b in (1, 5)}  # 12 windows: 12 batches of 1, or 5 + 5 + 2
    assert runs[1]["unigram_val_loss"] == runs[5]["unigram_val_loss"]
    assert runs[1]["final_val_loss"] == pytest.approx(runs[5]["final_val_loss"], abs=1e-5)  # the same windows


def test_output_kl_is_the_kl_of_the_output_distributions_since_step_0(tiny, tmp_path):
    cfg = normtrain.compose([*tiny, "train.max_steps=10", "monitor.every=1", "monitor.output_kl=true",
                             "optim.lr=3e-3"])
    normtrain.train(cfg, run_dir=tmp_path)
    kl = [r["update/output_kl"] for r in read_metrics(tmp_path) if "update/output_kl" in r]
    assert len(kl) == 10 and kl[0] == 0.0 and all(v > 0 for v in kl[1:]) and kl[-1] > kl[1]
