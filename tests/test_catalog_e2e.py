"""The newer placements, norms and stabilizers end to end on CPU: every one trains, they compose in a sweep,
z-loss is logged beside an unchanged cross-entropy, and Admin's data-dependent init runs once, never on resume."""

import json
import math

import pytest
import torch
from test_cli import run_cli

import normtrain
from normtrain.checkpoint import CKPT_NAME, load_checkpoint
from normtrain.config import model_config
from normtrain.data import BatchSampler
from normtrain.model import GPT

pytestmark = pytest.mark.slow

FAST = ["model.d_model=16", "model.seq_len=16", "train.batch_size=2", "train.eval_batches=1", "train.eval_every=0"]


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def trained(overrides, steps, tiny, run_dir):
    """A completed run of ``steps`` steps at lr 3e-3, logged at its start, middle and end: (summary, rows)."""
    cfg = normtrain.compose([*tiny, *FAST, f"train.max_steps={steps}", f"monitor.every={steps // 2}",
                             "optim.lr=3e-3", *overrides])
    summary = normtrain.train(cfg, run_dir=run_dir)
    assert summary["status"] == "completed" and summary["steps"] == steps
    return summary, rows(run_dir)


@pytest.mark.parametrize("overrides", [
    ["placement=peri"], ["placement=reorder"], ["placement=mix", "model.n_layers=4"], ["placement=subln"],
    ["placement=admin"], ["placement=rezero"], ["placement=none"], ["norm=dyt"], ["norm.depth_scaled=true"],
], ids=lambda o: "-".join(x.split("=")[-1] for x in o))
def test_each_new_placement_and_norm_trains_50_steps(overrides, tiny, tmp_path):
    summary, logged = trained(overrides, 50, tiny, tmp_path)
    assert [r["step"] for r in logged] == [0, 25, 49, 50]  # 49: the last step is a log step
    assert summary["final_val_loss"] < math.log(256) - 0.5  # it learns (ln 256: the uniform guess; all end < 4.8)
    for key in ("output/log_z", "output/logit_max", "attn_logit_max/layer_1", "attn_entropy/layer_1"):
        assert math.isfinite(logged[-2][key]), key
    assert summary["spike_points"] == 0 and summary["spike_score"] is None  # 50 steps < the 1000-step window


@pytest.mark.parametrize("overrides", [
    ["norm=derf"], ["norm.gain=zero_centred"], ["norm.gain=scalar"], ["norm.gain=none"], ["placement=sandwich"],
    ["model.qk_norm=per_head", "model.qk_norm_at=after_rope"], ["model.qk_norm=full", "model.qk_norm_gain=false"],
    ["model.v_norm=true"], ["model.attn_softcap=5"], ["model.logit_softcap=5"], ["model.attn_gate=head"],
    ["model.attn_gate=elementwise"], ["placement=hybrid"], ["placement=hybrid", "placement.first_pre=true"],
    ["placement=normformer"], ["placement=normformer", "placement.resid_scale=true"], ["placement=b2t"],
    ["placement=resi_dual"], ["placement.gpas=true"], ["placement=post", "placement.gpas=true"], ["optim=muon"],
    ["optim=muon", "model.emb_proj=true"], ["optim.qk_clip=2", "optim.qk_clip_alpha=0.3"],
    ["model.tie_embeddings=true"], ["model.init=gpt2"], ["model.init=olmo2"], ["model.init=mitchell"],
    ["model.init=small"], ["norm=layernorm", "norm.bias=false"],
], ids=lambda o: "-".join(x.split(".")[-1] for x in o))
def test_each_2023_2026_choice_trains_the_tiny_model(overrides, tiny, tmp_path):
    summary, logged = trained(overrides, 20, tiny, tmp_path)
    first, last = logged[0]["train/loss"], summary["final_val_loss"]
    assert last < first - 0.2, (first, last)  # it learns (Derf, the slowest here, by 0.27 nats)
    assert all(math.isfinite(logged[-2][k]) for k in ("attn_logit_max/layer_1", "attn_entropy/layer_1"))
    if "model.logit_softcap=5" in overrides:
        assert logged[-2]["output/logit_max"] <= 5.0


@pytest.mark.parametrize("optim", ["adamw", "muon"])
def test_ngpt_trains_the_tiny_model_with_its_preset(optim, tiny, tmp_path):
    """nGPT's logits are cosines times s_z (init 1), which open up only as s_z grows: on the tiny model that takes
    a larger lr than the others' 3e-3 (at 3e-2: 5.50 → 4.40 in 20 steps, Muon 4.48; at 3e-3 about 0.1 nats)."""
    summary, logged = trained(["experiment=ngpt", f"optim={optim}", "optim.lr=3e-2"], 20, tiny, tmp_path)
    first, last = logged[0]["train/loss"], summary["final_val_loss"]
    assert last < first - 0.5, (first, last)
    assert all(math.isfinite(logged[-2][f"ngpt_alpha_{part}/layer_1"]) for part in ("attn", "mlp"))


def test_z_loss_is_its_own_term_and_leaves_the_cross_entropy_alone(tiny, tmp_path):
    base = [*tiny, *FAST, "train.max_steps=2", "monitor.every=1"]
    plain = normtrain.train(normtrain.compose(base), run_dir=tmp_path / "plain")
    with_z = normtrain.train(normtrain.compose([*base, "optim.z_loss=0.01", "monitor.spike_window=2"]),
                             run_dir=tmp_path / "z")
    a, b = rows(tmp_path / "plain"), rows(tmp_path / "z")
    assert a[0]["train/loss"] == b[0]["train/loss"] and "train/z_loss" not in a[0]  # step 0: same model, batch
    assert a[1]["train/loss"] != b[1]["train/loss"]  # the z-loss gradient changed the first update
    cfg = normtrain.compose([*base, "optim.z_loss=0.01"])
    torch.manual_seed(cfg.train.seed)
    model = GPT(model_config(cfg))
    from normtrain.data import load_corpus

    corpus = load_corpus("local_text", cfg.data.path, cfg.data.val_fraction, None, progress=False)
    x, y = BatchSampler(corpus.train, 2, 16, cfg.train.seed).next_batch()
    with torch.no_grad():
        logits, loss = model(x, y)
    log_z = torch.log(torch.exp(logits.double()).sum(-1))
    assert b[0]["train/z_loss"] == pytest.approx(log_z.square().mean().item(), rel=1e-5)
    assert b[0]["output/log_z"] == pytest.approx(log_z.mean().item(), rel=1e-5)
    assert b[0]["train/loss"] == pytest.approx(loss.item(), rel=1e-6)
    assert plain["spike_points"] == 0 and with_z["spike_points"] == 0  # 2 steps, window 2: none scored yet


def test_admin_profiles_once_before_step_0_and_never_on_resume(tiny, tmp_path, monkeypatch):
    calls = []
    original = GPT.data_init
    monkeypatch.setattr(GPT, "data_init", lambda self, idx: calls.append(idx.clone()) or original(self, idx))
    overrides = [*tiny, *FAST, "placement=admin", "monitor.every=2"]
    normtrain.train(normtrain.compose([*overrides, "train.max_steps=4"]), run_dir=tmp_path)
    assert len(calls) == 1 and calls[0].shape == (2, 16)
    cfg = normtrain.compose(overrides)
    first = BatchSampler(normtrain.data.load_corpus("local_text", cfg.data.path, 0.05, None, progress=False).train,
                         2, 16, 0).next_batch()[0]
    assert torch.equal(calls[0], first)  # the run's first training batch
    omega = load_checkpoint(tmp_path / CKPT_NAME)["model"]["blocks.1.omega1"]
    assert omega.min() > 1.0  # profiled (> 1 after the first sublayer), then trained
    assert rows(tmp_path)[0]["update/output_change"] == 0.0  # F(x, θ_0) was taken after the profiling
    resumed = normtrain.train(normtrain.compose([*overrides, "train.max_steps=6"]), run_dir=tmp_path)
    assert resumed["resumed_from_step"] == 4 and len(calls) == 1  # ω came from the checkpoint


def test_sweep_composes_placements_norms_qk_norm_and_z_loss(tiny, tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *tiny, *FAST, "train.max_steps=4", "monitor.every=2", "placement=peri,admin,subln",
                    "norm=dyt,layernorm", "model.qk_norm=true", "optim.z_loss=1e-4", "optim.independent_wd=true",
                    f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [j.name.split("_", 1)[1] for j in jobs] == [
        "peri-dyt-L2", "peri-layernorm-L2", "admin-dyt-L2", "admin-layernorm-L2", "subln-dyt-L2",
        "subln-layernorm-L2"]
    for job in jobs:
        summary = json.loads((job / "summary.json").read_text())
        assert summary["status"] == "completed", job.name
        assert summary["config"]["model"]["qk_norm"] == "per_head" and summary["config"]["optim"]["z_loss"] == 1e-4
        first = rows(job)[0]
        assert first["train/z_loss"] > 0 and first["attn_logit_max/layer_1"] <= math.sqrt(8) + 1e-4  # QK-normed
    subln = json.loads((jobs[4] / "summary.json").read_text())
    assert subln["beta"] == pytest.approx(math.sqrt(math.log(4)))


def test_qk_clip_under_muon_holds_each_max_logit_at_tau_and_the_caps_report_their_saturation(tiny, tmp_path):
    """Row 0 is measured before any clip; by row 10 every layer's max logit (the one QK-Clip read) is back near τ
    = 1 (one optimizer update after the last clip). The soft-caps' saturation shares are logged."""
    summary, logged = trained(["optim=muon", "optim.qk_clip=1", "optim.qk_clip_alpha=0.3", "model.attn_softcap=0.5",
                               "model.logit_softcap=2"], 20, tiny, tmp_path)
    first, middle = logged[0], logged[1]
    assert max(first[f"attn_logit_max/layer_{i}"] for i in (0, 1)) > 2
    assert all(middle[f"attn_logit_max/layer_{i}"] < 1.1 for i in (0, 1)), middle
    heads = {k: v for k, v in middle.items() if k.startswith("attn_logit_max/") and "/head_" in k}
    assert len(heads) == 2 * summary["config"]["model"]["n_heads"] and max(heads.values()) < 1.1  # each head clipped
    for row in (first, middle):
        assert 0 <= row["attn_softcap_saturation/layer_1"] <= 1 and 0 <= row["output/softcap_saturation"] <= 1
    assert first["attn_softcap_saturation/layer_1"] > 0  # logits of 2–3 against a cap of 0.5
