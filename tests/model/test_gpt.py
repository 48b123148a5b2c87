import pytest
import torch

from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.model.mlp import GeluMLP, SwiGLU
from normtrain.norms import LayerNorm, PRMSNorm, RMSNorm


def tiny(**kw):
    base = dict(n_layers=2, d_model=32, n_heads=4, seq_len=16)
    return GPT(GPTConfig(**{**base, **kw}))


@pytest.mark.parametrize("pos", ["rope", "learned"])
@pytest.mark.parametrize("mlp", ["swiglu", "gelu"])
def test_shapes_and_initial_loss_near_uniform(pos, mlp):
    torch.manual_seed(0)
    model = tiny(pos=pos, mlp=mlp)
    idx = torch.randint(0, 256, (3, 16))
    logits, loss = model(idx, idx)
    assert logits.shape == (3, 16, 256)
    assert 5.0 < loss.item() < 7.0  # ln 256 = 5.55
    assert model(idx)[1] is None


def test_attention_is_causal():
    torch.manual_seed(0)
    model = tiny().eval()
    a = torch.randint(0, 256, (1, 16))
    b = a.clone()
    b[0, 10:] = (b[0, 10:] + 1) % 256
    la, lb = model(a)[0], model(b)[0]
    torch.testing.assert_close(la[:, :10], lb[:, :10])
    assert not torch.allclose(la[:, 10:], lb[:, 10:])


def test_config_choices_build_the_right_modules():
    assert isinstance(tiny(mlp="gelu").blocks[0].mlp, GeluMLP)
    assert isinstance(tiny(mlp="swiglu").blocks[0].mlp, SwiGLU)
    assert tiny(pos="rope").pos_emb is None and tiny(pos="learned").pos_emb is not None
    assert tiny(d_ff=40, mlp="gelu").blocks[0].mlp.up.out_features == 40
    for name, cls in [("layernorm", LayerNorm), ("rmsnorm", RMSNorm), ("prmsnorm", PRMSNorm)]:
        model = tiny(norm=NormSpec(name))
        assert all(isinstance(b.norm1, cls) and isinstance(b.norm2, cls) for b in model.blocks)


def test_no_bias_by_default():
    names = [n for n, _ in tiny(norm=NormSpec("rmsnorm")).named_parameters()]
    assert not any(n.endswith(".bias") for n in names)
    assert any(n.endswith("q_proj.bias") for n, _ in tiny(bias=True).named_parameters())


def test_unknown_placement_lists_allowed():
    with pytest.raises(ValueError,
                       match="allowed: admin, deepnorm, mix, none, peri, post, pre, reorder, rezero, subln"):
        tiny(placement="sandwich")
