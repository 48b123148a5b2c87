import pytest
import torch

from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.model.mlp import GeGLU, GeluMLP, SwiGLU
from normtrain.norms import LayerNorm, PRMSNorm, RMSNorm


def tiny(**kw):
    base = dict(n_layers=2, d_model=32, n_heads=4, seq_len=16)
    return GPT(GPTConfig(**{**base, **kw}))


@pytest.mark.parametrize("pos", ["rope", "learned"])
@pytest.mark.parametrize("mlp", ["swiglu", "gelu", "geglu"])
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
    assert type(tiny(mlp="geglu").blocks[0].mlp) is GeGLU and tiny(mlp="geglu").blocks[0].mlp.up.out_features == 88
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
                       match="allowed: admin, b2t, deepnorm, hybrid, mhc, mix, ngpt, none, normformer, peri, post, "
                             "pre, reorder, resi_dual, rezero, subln"):
        tiny(placement="sandwich")


def test_qk_norm_forms_and_their_boolean_aliases():
    assert [GPTConfig(qk_norm=v).qk_norm for v in (True, False, "true", "False", "per_head", "full", "none")] == \
        ["per_head", "none", "per_head", "none", "per_head", "full", "none"]
    with pytest.raises(ValueError, match="unknown QK-norm form 'both'; allowed: none, per_head, full"):
        tiny(qk_norm="both")
    assert tiny(qk_norm="full").blocks[0].attn.q_norm.weight.shape == (32,)
    assert tiny(qk_norm="per_head").blocks[0].attn.q_norm.weight.shape == (8,)
    assert tiny().blocks[0].attn.q_norm is None
