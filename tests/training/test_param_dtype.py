"""``train.param_dtype``: bf16 parameter storage (NVIDIA's nGPT baseline's setting) builds a bf16 model whose
optimizer states are bf16 too, trains on a CPU (Pre-LN and nGPT), and an unknown value fails at start-up."""

import pytest
import torch

import normtrain
from normtrain.config import validate
from normtrain.training.components import optimizer_for, stored_dtype
from normtrain.training.distributed import DistContext
from normtrain.util.errors import ConfigError

FAST = ["model.d_model=16", "model.seq_len=16", "train.batch_size=2", "train.eval_batches=1", "train.eval_every=0",
        "monitor.every=2"]


def test_bf16_storage_builds_bf16_parameters_and_optimizer_states(tiny):
    cfg = normtrain.compose([*tiny, *FAST, "train.param_dtype=bfloat16"])
    assert stored_dtype(cfg) is torch.bfloat16
    model = normtrain.build_model(cfg).to(dtype=stored_dtype(cfg))
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    optimizer, _ = optimizer_for(model, cfg, DistContext(torch.device("cpu")))
    x = torch.randint(0, 256, (2, 16))
    _, loss = model(x, x)
    loss.backward()
    optimizer.step()
    states = [t for s in optimizer.state.values() for k, t in s.items() if k != "step"]
    assert states and {t.dtype for t in states} == {torch.bfloat16}  # AdamW's moments, no fp32 master copy
    assert stored_dtype(normtrain.compose([*tiny, *FAST])) is torch.float32  # the default


@pytest.mark.parametrize("arm", [["placement=pre"], ["experiment=ngpt", "optim.lr=1e-2"]], ids=["pre", "ngpt"])
def test_a_short_bf16_run_trains_and_its_loss_falls(tiny, tmp_path, arm):
    cfg = normtrain.compose([*tiny, *FAST, *arm, "train.param_dtype=bfloat16", "train.max_steps=8",
                             "optim.warmup_steps=0"])
    summary = normtrain.train(cfg, run_dir=tmp_path)
    assert summary["status"] == "completed"
    assert summary["final_val_loss"] < 5.5  # below ln 256 = 5.55, a uniform guess: it learned in 8 steps


def test_an_unknown_param_dtype_fails_at_start_up_with_the_allowed_values(tiny):
    with pytest.raises(ConfigError, match=r"train.param_dtype='float16' is not known; allowed: bfloat16, float32"):
        validate(normtrain.compose([*tiny, *FAST, "train.param_dtype=float16"]))
