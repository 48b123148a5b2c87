"""``train.param_rounding=bfloat16``: bf16 storage with fp32 compute. The tensors stay fp32; every parameter and
optimizer moment holds a bf16-representable value after each step (the step counter does not), an update below half
a bf16 step of its weight is lost as in bf16 storage, and it conflicts with ``train.param_dtype=bfloat16``."""

import pytest
import torch

import normtrain
from normtrain.checkpoint import load_checkpoint
from normtrain.config import validate
from normtrain.training.rounding import round_storage
from normtrain.util.errors import ConfigError

FAST = ["model.d_model=16", "model.seq_len=16", "train.batch_size=2", "train.eval_batches=1", "train.eval_every=0",
        "monitor.every=2", "optim.warmup_steps=0"]


def representable(t: torch.Tensor) -> bool:
    return bool(torch.equal(t, t.to(torch.bfloat16).to(t.dtype)))


def test_rounding_leaves_bf16_values_in_fp32_tensors_and_the_step_count_alone():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(8, 8))
    opt = torch.optim.AdamW([w], lr=1e-3)
    w.grad = torch.randn(8, 8)
    for _ in range(300):  # 300 steps: a bf16 counter could not hold it (256 is its last exact run of integers)
        opt.step()
    assert not representable(w) and not representable(opt.state[w]["exp_avg"])
    round_storage([w], opt, torch.bfloat16)
    assert w.dtype is torch.float32 and representable(w)
    assert representable(opt.state[w]["exp_avg"]) and representable(opt.state[w]["exp_avg_sq"])
    assert float(opt.state[w]["step"]) == 300.0


def test_a_rounded_run_stores_bf16_values_and_loses_updates_below_half_a_bf16_step(tiny, tmp_path):
    base = [*tiny, *FAST, "train.max_steps=4", "train.param_rounding=bfloat16"]
    normtrain.train(normtrain.compose([*base, "optim.lr=1e-2"]), run_dir=tmp_path / "trains")
    state = load_checkpoint(tmp_path / "trains" / "ckpt.pt")["model"]
    floats = [t for t in state.values() if t.is_floating_point()]
    assert {t.dtype for t in floats} == {torch.float32} and all(representable(t) for t in floats)
    # an lr so small that every update is below half a bf16 step: the weights stay the rounded init
    normtrain.train(normtrain.compose([*base, "optim.lr=1e-9", "optim.weight_decay=0.0"]), run_dir=tmp_path / "a")
    normtrain.train(normtrain.compose([*base, "optim.lr=1e-9", "optim.weight_decay=0.0", "train.max_steps=1"]),
                    run_dir=tmp_path / "b")
    four, one = (load_checkpoint(tmp_path / r / "ckpt.pt")["model"] for r in ("a", "b"))
    assert all(torch.equal(four[k], one[k]) for k in four if four[k].is_floating_point())


def test_rounding_and_bf16_storage_together_are_refused_with_why(tiny):
    with pytest.raises(ConfigError, match="stored that way already"):
        validate(normtrain.compose([*tiny, *FAST, "train.param_rounding=bfloat16", "train.param_dtype=bfloat16"]))
    with pytest.raises(ConfigError, match=r"train.param_rounding='float16' is not known; allowed: bfloat16, null"):
        validate(normtrain.compose([*tiny, *FAST, "train.param_rounding=float16"]))
