"""placement=ngpt in the training loop and the config: the weight rule holds after every step and after a resume
(whatever the checkpoint holds), α is logged per layer, and the choices that contradict nGPT exit 2 with why."""

import json
import math

import pytest
import torch
from test_cli import run_cli

import normtrain
from normtrain.checkpoint import CKPT_NAME, Checkpointer, FullCheckpoint, load_checkpoint, unwrap
from normtrain.checkpoint.state import digest
from normtrain.config import validate
from normtrain.model.ngpt_rules import ngpt_warnings
from normtrain.util.errors import ConfigError

FAST = ["model.d_model=16", "model.seq_len=16", "train.batch_size=2", "train.eval_batches=1", "train.eval_every=0",
        "monitor.every=5"]
UNIT_DIM = {"out_proj": 0, "down": 0}  # the two matrices that write the stream; every other is normalized along dim 1


def off_the_sphere(state: dict[str, torch.Tensor]) -> list[str]:
    """Matrices of a state dict with a vector along d_model of norm ≠ 1 (rows; columns of W_o and W_down)."""
    bad = []
    for name, t in state.items():
        if t.ndim == 2:
            norms = t.double().norm(dim=UNIT_DIM.get(name.split(".")[-2], 1))
            if not torch.allclose(norms, torch.ones_like(norms), atol=1e-5):
                bad.append(name)
    return bad


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_ngpt_trains_on_the_sphere_logs_alpha_and_resumes_back_onto_it(tiny, tmp_path):
    """10 steps; the checkpoint's matrices are unit vectors along d_model and α is in the metrics. Then the
    checkpoint is knocked off the sphere and resumed: the resumed run's first rule is to put it back."""
    overrides = [*tiny, *FAST, "experiment=ngpt", "optim.lr=1e-2"]
    summary = normtrain.train(normtrain.compose([*overrides, "train.max_steps=10"]), run_dir=tmp_path)
    assert summary["status"] == "completed"
    ckpt = load_checkpoint(tmp_path / CKPT_NAME)
    assert off_the_sphere(ckpt["model"]) == []
    logged = rows(tmp_path)
    alphas = [logged[-2][f"ngpt_alpha_{part}/layer_{i}"] for part in ("attn", "mlp") for i in range(2)]
    assert all(math.isfinite(a) and a > 0 for a in alphas) and logged[0]["ngpt_alpha_attn/layer_0"] == \
        pytest.approx(0.05)  # the paper's α_init at step 0, trained away from it by step 5
    assert alphas != pytest.approx([0.05] * 4)
    state = ckpt["model"]
    state["blocks.0.attn.q_proj.weight"] *= 3.0
    state["blocks.1.mlp.down.weight"] *= 0.5
    ckpt["digest"] = digest({k: v for k, v in ckpt.items() if k != "digest"})  # a valid checkpoint, off the sphere
    torch.save(ckpt, tmp_path / CKPT_NAME)
    assert off_the_sphere(load_checkpoint(tmp_path / CKPT_NAME)["model"]) == ["blocks.0.attn.q_proj.weight",
                                                                              "blocks.1.mlp.down.weight"]
    resumed = normtrain.train(normtrain.compose([*overrides, "train.max_steps=10"]), run_dir=tmp_path)
    assert resumed["resumed_from_step"] == 10 and resumed["steps"] == 10  # no step taken: the resume alone
    assert off_the_sphere(load_checkpoint(tmp_path / CKPT_NAME)["model"]) == []


def test_muon_trains_ngpt_on_the_sphere(tiny, tmp_path):
    """optim=muon (Muon on the hidden matrices, AdamW on the rest) with the preset: after the run's steps every
    matrix, Muon's and AdamW's, is a set of unit vectors along d_model."""
    summary = normtrain.train(normtrain.compose([*tiny, *FAST, "experiment=ngpt", "optim=muon",
                                                 "train.max_steps=6"]), run_dir=tmp_path)
    assert summary["status"] == "completed" and summary["config"]["optim"]["weight_decay"] == 0.0
    state = load_checkpoint(tmp_path / CKPT_NAME)
    assert set(state["optimizer"]) == {"muon", "adamw"} and off_the_sphere(state["model"]) == []


def test_the_weight_rule_holds_right_after_a_rollback(tiny, tmp_path, monkeypatch):
    """A NaN at step 9 rolls the run back to its step-8 checkpoint, whose restored weights are knocked off the
    sphere here; the checkpoint the rollback writes at once must already be back on it, as every later one."""
    restore, save, saved = FullCheckpoint.restore, Checkpointer.save, []

    def restore_off_the_sphere(self, model, *args):
        restore(self, model, *args)
        with torch.no_grad():
            unwrap(model).blocks[0].attn.q_proj.weight.mul_(3.0)

    def record(self, model, optimizer, state):
        saved.append((state["step"], off_the_sphere(unwrap(model).state_dict())))
        save(self, model, optimizer, state)

    monkeypatch.setattr(FullCheckpoint, "restore", restore_off_the_sphere)
    monkeypatch.setattr(Checkpointer, "save", record)
    summary = normtrain.train(normtrain.compose([*tiny, *FAST, "experiment=ngpt", "train.on_divergence=rollback",
                                                 "train.ckpt_every=4", "debug.inject_nan_at_step=9"]),
                              run_dir=tmp_path)
    assert [r["restored_step"] for r in summary["rollbacks"]] == [8]
    assert [step for step, _ in saved] == [0, 4, 8, 8, 12, 16, 20, 20]  # the rollback's own save: the second 8
    assert all(bad == [] for _, bad in saved), saved


@pytest.mark.parametrize("override,needles", [
    (["norm=rmsnorm"], ["norm=rmsnorm contradicts placement=ngpt", "norm=l2"]),
    (["norm.gain=vector"], ["norm.gain=vector contradicts placement=ngpt", "norm.gain=none"]),
    (["model.qk_norm=per_head"], ["model.qk_norm=per_head contradicts placement=ngpt", "s_qk"]),
    (["model.attn_gate=head"], ["model.attn_gate=head contradicts placement=ngpt"]),
    (["model.mlp=gelu"], ["model.mlp=gelu has no gate ν", "swiglu"]),
    (["model.pos=learned"], ["model.pos=learned contradicts placement=ngpt", "RoPE"]),
    (["model.bias=true"], ["model.bias=true contradicts placement=ngpt"]),
    (["placement.beta=0.5"], ["placement.beta=0.5 does not apply to placement=ngpt"]),
    (["placement.alpha=2"], ["placement.alpha=2"]),
    (["norm.depth_scaled=true"], ["placement=ngpt holds no norm to scale"]),
    (["train.strategy=fsdp"], ["train.strategy=fsdp with placement=ngpt", "ddp"]),
])
def test_choices_that_contradict_ngpt_are_refused(override, needles):
    with pytest.raises(ConfigError) as err:
        validate(normtrain.compose(["placement=ngpt", *override]))
    assert len(err.value.problems) == 1, err.value.problems
    assert all(n in str(err.value) for n in needles), str(err.value)


def test_ngpt_selects_its_norm_and_the_preset_the_paper_optimizer():
    cfg = normtrain.compose(["placement=ngpt"])
    assert (cfg.norm.name, cfg.norm.gain) == ("l2", "none")
    validate(cfg)  # softcaps and V-norm combine with it
    validate(normtrain.compose(["placement=ngpt", "model.logit_softcap=15", "model.attn_softcap=50",
                                "model.v_norm=true", "model.mlp=geglu"]))
    assert [w.split(" ")[0] for w in ngpt_warnings(cfg)] == ["optim.weight_decay=0.1", "optim.warmup_steps=50"]
    preset = normtrain.compose(["experiment=ngpt"])
    o = preset.optim
    assert (preset.placement.name, preset.norm.name) == ("ngpt", "l2")
    assert (o.name, o.lr, list(o.betas), o.weight_decay, o.warmup_steps, o.min_lr_ratio) == (
        "adamw", 1.5e-3, [0.9, 0.95], 0.0, 0, 0.0)
    assert ngpt_warnings(preset) == [] and ngpt_warnings(normtrain.compose([])) == []


@pytest.mark.slow
def test_the_cli_refuses_a_norm_against_ngpt_and_warns_of_weight_decay(tiny, tmp_path):
    proc = run_cli(["placement=ngpt", "norm=layernorm", *tiny], cwd=tmp_path)
    assert proc.returncode == 2 and "norm=layernorm contradicts placement=ngpt" in proc.stderr, proc.stderr
    proc = run_cli(["placement=ngpt", *tiny, *FAST, "train.max_steps=2", f"hydra.run.dir={tmp_path / 'run'}"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "warning: optim.weight_decay=0.1 with placement=ngpt" in proc.stderr


def test_ngpt_runs_under_bf16_autocast_with_its_stream_in_fp32():
    """Under autocast (a GPU run's bf16) each sublayer returns bf16 while the stream stays fp32: the block's
    update must take both (found on an H100: torch.lerp refused the mix), and it equals the fp32 update of the
    bf16 output."""
    model = normtrain.build_model(normtrain.compose(["experiment=ngpt", "model.n_layers=2", *FAST[:2]]))
    tokens = torch.randint(0, 256, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model(tokens, tokens)
    assert logits.shape == (2, 16, 256) and torch.isfinite(loss)
    loss.backward()
    block = model.blocks[0]
    h = torch.nn.functional.normalize(torch.randn(2, 16, 16), dim=-1)
    out = torch.randn(2, 16, 16, dtype=torch.bfloat16)
    alpha = torch.full((16,), 0.3)
    expected = torch.nn.functional.normalize(h + 0.3 * (torch.nn.functional.normalize(out.float(), dim=-1) - h), dim=-1)
    torch.testing.assert_close(block.update(h, out, alpha), expected, atol=1e-5, rtol=1e-5)
