"""FLOPs per token on a hand-counted model, device peaks by name, and the MFU arithmetic."""

import pytest
import torch

from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.training.flops import flops_per_token, mfu, model_flops_per_token, peak_flops


def test_formula_is_6n_plus_attention():
    assert flops_per_token(1000, n_layers=2, d_model=8, seq_len=16) == 6 * 1000 + 12 * 2 * 8 * 16


class Wrapper(torch.nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module


def test_model_flops_on_a_hand_counted_model():
    model = GPT(GPTConfig(n_layers=2, d_model=8, n_heads=2, seq_len=16, mlp="gelu", d_ff=32, pos="learned",
                          placement="pre", norm=NormSpec("layernorm", eps=1e-5)))
    # per block: q, k, v, out 4·8·8 = 256; MLP up + down 2·8·32 = 512; two LayerNorms (γ, β) 2·2·8 = 32
    # N = 2 blocks · 800 + final LayerNorm 16 + LM head 8·256 = 3664; the embeddings (256·8, 16·8) do not count
    n = 2 * (256 + 512 + 32) + 16 + 8 * 256
    assert n == model.num_params() - 256 * 8 - 16 * 8
    expected = 6 * n + 12 * 2 * 8 * 16
    assert expected == 25056
    assert model_flops_per_token(model) == expected
    assert model_flops_per_token(torch.compile(model)) == expected  # wrapped models count the same
    assert model_flops_per_token(torch.compile(Wrapper(model))) == expected  # as DDP keeps it, in .module


def test_a_tied_head_is_counted_once_as_the_heads_matmul():
    """model.tie_embeddings: the one matrix is the LM head's d × V matmul (6·V·d per token) and a free lookup, so N
    and the FLOPs are the untied model's, while the parameter count drops by V·d."""
    cfg = dict(n_layers=2, d_model=8, n_heads=2, seq_len=16, mlp="gelu", d_ff=32, pos="learned", placement="pre",
               norm=NormSpec("layernorm", eps=1e-5))
    tied, untied = GPT(GPTConfig(**cfg, tie_embeddings=True)), GPT(GPTConfig(**cfg))
    assert model_flops_per_token(tied) == model_flops_per_token(untied) == 25056
    assert tied.num_params() == untied.num_params() - 256 * 8


def test_model_flops_rejects_other_modules():
    with pytest.raises(TypeError, match="not a normtrain GPT"):
        model_flops_per_token(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("name,peak", [
    ("NVIDIA H100 80GB HBM3", 989e12),
    ("NVIDIA H100 SXM", 989e12),
    ("NVIDIA H100 NVL", 835e12),
    ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H200", 989e12),
    ("NVIDIA H200 NVL", 835e12),
    ("NVIDIA GH200 480GB", 989e12),
    ("NVIDIA A100-SXM4-80GB", 312e12),
    ("NVIDIA A100 80GB PCIe", 312e12),
    ("NVIDIA L40S", 362e12),
    ("NVIDIA L4", 121e12),
    ("NVIDIA A10", 125e12),
    ("NVIDIA A10G", 125e12),
])
def test_peak_by_device_name(name, peak):
    assert peak_flops(name) == peak


@pytest.mark.parametrize("name", ["cpu", "", "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-16GB", "NVIDIA A800",
                                  "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "AMD Instinct MI300X"])
def test_unknown_devices_get_no_peak(name):
    assert peak_flops(name) is None


def test_mfu_arithmetic():
    # 100k tokens/s at 6e9 FLOPs per token = 6e14 FLOP/s; on 2 devices of 1e15 that is 30 %
    assert mfu(1e5, 6e9, 1e15, world_size=2) == pytest.approx(0.3)
    assert mfu(1e5, 6e9, 1e15) == pytest.approx(0.6)
    assert mfu(None, 6e9, 1e15) is None
    assert mfu(1e5, 6e9, None) is None
