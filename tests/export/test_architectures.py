"""Which transformers class a model is (exactly one, or none with the nearest named), and the config.json each
class gets: every key its config class declares, with Gemma's soft-caps and sliding windows off."""

import dataclasses

import pytest

from normtrain.export.cli import summary
from normtrain.export.hf import ARCHITECTURES, choose, nearest
from normtrain.model.config import GPTConfig
from normtrain.norms import NormSpec

RMS = NormSpec("rmsnorm", eps=1e-5)
MODELS = {  # the GPTConfig each class expresses
    "LlamaForCausalLM": dict(placement="pre", mlp="swiglu", norm=RMS),
    "GPT2LMHeadModel": dict(placement="pre", mlp="gelu", pos="learned", norm=NormSpec("layernorm"), bias=True),
    "Qwen3ForCausalLM": dict(placement="pre", mlp="swiglu", norm=RMS, qk_norm="per_head"),
    "Olmo2ForCausalLM": dict(placement="reorder", mlp="swiglu", norm=RMS, qk_norm="full"),
    "Gemma2ForCausalLM": dict(placement="peri", mlp="geglu", norm=RMS),
    "Gemma3ForCausalLM": dict(placement="peri", mlp="geglu", norm=RMS, qk_norm="per_head"),
}


def config(**kw) -> GPTConfig:
    return GPTConfig(n_layers=3, d_model=64, n_heads=4, seq_len=48, **kw)


@pytest.mark.parametrize("hf_class", list(MODELS))
def test_each_class_is_chosen_for_exactly_its_architecture(hf_class):
    arch, reasons = choose(config(**MODELS[hf_class]))
    assert arch is not None and arch.hf_class == hf_class
    assert [cls for cls, why in reasons.items() if not why] == [hf_class]  # no other class claims it


@pytest.mark.parametrize("model,hf_class,difference", [
    (dict(placement="reorder", mlp="swiglu", norm=RMS), "Olmo2ForCausalLM", "model.qk_norm=none (needs full)"),
    (dict(placement="peri", mlp="swiglu", norm=RMS), "Gemma2ForCausalLM", "model.mlp=swiglu (needs geglu)"),
    (dict(placement="pre", mlp="swiglu", norm=RMS, qk_norm="per_head", bias=True), "Qwen3ForCausalLM",
     "model.bias=true (needs false)"),
    (dict(placement="post", mlp="swiglu", norm=RMS), "LlamaForCausalLM", "placement=post (needs pre)"),
    (dict(placement="pre", mlp="swiglu", norm=NormSpec("rmsnorm", depth_scaled=True)), "LlamaForCausalLM",
     "norm.depth_scaled=true (not in LlamaForCausalLM)"),
    (dict(placement="pre", mlp="swiglu", norm=NormSpec("rmsnorm", gain="scalar")), "LlamaForCausalLM",
     "norm.gain=scalar (not in LlamaForCausalLM)"),
    (dict(placement="pre", mlp="swiglu", norm=RMS, attn_gate="head"), "LlamaForCausalLM",
     "model.attn_gate=head (not in LlamaForCausalLM)"),
    (dict(placement="pre", mlp="swiglu", norm=RMS, emb_proj=True), "LlamaForCausalLM",
     "model.emb_proj=true (not in LlamaForCausalLM)"),
    (dict(placement="pre", mlp="swiglu", norm=RMS, logit_softcap=30.0), "LlamaForCausalLM",
     "model.logit_softcap=30.0 (not in LlamaForCausalLM)"),
    (dict(placement="pre", mlp="swiglu", norm=RMS, qk_norm="per_head", qk_norm_at="after_rope"), "Qwen3ForCausalLM",
     "model.qk_norm_at=after_rope (not in Qwen3ForCausalLM)"),
    (dict(placement="pre", mlp="swiglu", norm=RMS, qk_norm="per_head", qk_norm_gain=False), "Qwen3ForCausalLM",
     "model.qk_norm_gain=false (not in Qwen3ForCausalLM)"),
    (dict(placement="pre", mlp="swiglu", norm=RMS, v_norm=True), "LlamaForCausalLM",
     "model.v_norm=true (not in LlamaForCausalLM)"),
    (dict(placement="peri", mlp="geglu", norm=RMS, qk_norm="per_head", attn_softcap=50.0), "Gemma3ForCausalLM",
     "model.attn_softcap=50.0 (not in Gemma3ForCausalLM)"),  # transformers' Gemma 3 attention reads no cap
    (dict(placement="normformer", mlp="swiglu", norm=RMS), "LlamaForCausalLM", "placement=normformer (needs pre)"),
    (dict(placement="b2t", mlp="swiglu", norm=RMS), "LlamaForCausalLM", "placement=b2t (needs pre)"),
    (dict(placement="resi_dual", mlp="geglu", norm=RMS), "Gemma2ForCausalLM", "placement=resi_dual (needs peri)"),
    (dict(placement="mhc", mlp="swiglu", norm=RMS, streams=2), "LlamaForCausalLM", "placement=mhc (needs pre)"),
    (dict(placement="pre", mlp="swiglu", norm=RMS, gpas=True), "LlamaForCausalLM",
     "placement.gpas=true (not in LlamaForCausalLM)"),
])
def test_a_model_no_class_expresses_names_the_nearest_and_the_one_difference(model, hf_class, difference):
    arch, reasons = choose(config(**model))
    assert arch is None and nearest(reasons) == (hf_class, [difference])
    report = {"out_dir": "out", "step": 6, "format": "normtrain", "why_not_hf": reasons,
              "nearest": nearest(reasons), "tokenizer": "byte-level"}
    assert f"the nearest is {hf_class}, the one difference: {difference}" in summary(report)


@pytest.mark.parametrize("hf_class", list(MODELS))
def test_the_peer_options_keep_the_class_and_a_tie_is_written_where_the_class_ties(hf_class):
    """model.init (how the weights started) and model.tie_embeddings map onto every class; norm.bias=false onto
    GPT-2 (zero biases written); a tied model is tie_word_embeddings: true, but in Gemma, whose tied head would be
    its stored table (ours / √d): there the head is written as its own matrix."""
    norm = MODELS[hf_class]["norm"]
    peer = {**MODELS[hf_class], "tie_embeddings": True, "init": "gpt2",
            "norm": dataclasses.replace(norm, bias=False)}
    arch, reasons = choose(config(**peer))
    assert arch is not None and arch.hf_class == hf_class, reasons
    assert arch.config(config(**peer), eot=None)["tie_word_embeddings"] is (not hf_class.startswith("Gemma"))
    assert arch.config(config(**MODELS[hf_class]), eot=None)["tie_word_embeddings"] is False


def test_hybrid_norm_is_nearest_qwen3_with_its_placement_and_its_v_norm():
    """The model export sees is the built one, whose config carries the QKV-norm HybridNorm implies."""
    from normtrain.model.placements import HybridNormBlock

    arch, reasons = choose(HybridNormBlock.configured(config(placement="hybrid", mlp="swiglu", norm=RMS)))
    assert arch is None and nearest(reasons) == ("Qwen3ForCausalLM", ["placement=hybrid (needs pre)",
                                                                      "model.v_norm=true (not in Qwen3ForCausalLM)"])


@pytest.mark.extras("hf")
@pytest.mark.parametrize("hf_class", list(MODELS))
def test_config_json_sets_every_key_its_transformers_class_declares(hf_class):
    """Each key of the class's config (beyond PreTrainedConfig's own) is written, so none is left at a default
    that would change the model (Gemma 2's soft-caps and sliding windows, Gemma 3's θ = 10⁶)."""
    import transformers

    c = config(**MODELS[hf_class])
    arch = next(a for a in ARCHITECTURES.values() if a.hf_class == hf_class)
    written = arch.config(c, eot=None)
    config_class = transformers.CONFIG_MAPPING[written["model_type"]]
    try:
        declared = {f.name for f in dataclasses.fields(config_class)}
        base = {f.name for f in dataclasses.fields(transformers.PreTrainedConfig)}
    except TypeError:
        pytest.skip("this transformers' config classes are no dataclasses (transformers < 5)")
    assert declared - base - set(written) == set()
    hf = config_class(**{k: v for k, v in written.items() if k not in ("architectures", "model_type")})
    assert hf.tie_word_embeddings is False  # our LM head is its own matrix
    if hf_class == "GPT2LMHeadModel":
        assert (hf.n_embd, hf.n_head, hf.activation_function) == (64, 4, "gelu")  # exact GELU, not gelu_new
        return
    assert (hf.hidden_size, hf.num_attention_heads, hf.num_key_value_heads, hf.rms_norm_eps) == (64, 4, 4, 1e-5)
    rope = hf.rope_parameters  # Gemma 3: one per layer type
    assert all(p["rope_theta"] == 10000.0 for p in (rope.values() if "full_attention" in rope else [rope]))
    if hf_class.startswith("Gemma"):
        assert hf.final_logit_softcapping is None and hf.attn_logit_softcapping is None
        assert hf.query_pre_attn_scalar == 16 and hf.layer_types == ["full_attention"] * 3
        assert hf.hidden_activation == "gelu_pytorch_tanh"


@pytest.mark.parametrize("hf_class,model", [
    ("Gemma2ForCausalLM", dict(placement="peri", mlp="geglu", norm=RMS, attn_softcap=50.0, logit_softcap=30.0)),
    ("Gemma3ForCausalLM", dict(placement="peri", mlp="geglu", norm=NormSpec("rmsnorm", gain="zero_centred"),
                               qk_norm="per_head", logit_softcap=15.0)),
    ("LlamaForCausalLM", dict(placement="pre", mlp="swiglu", norm=NormSpec("rmsnorm", gain="zero_centred"))),
])
def test_soft_caps_and_zero_centred_gains_map_where_the_class_has_them(hf_class, model):
    arch, _ = choose(config(**model))
    assert arch is not None and arch.hf_class == hf_class
    written = arch.config(config(**model), eot=None)
    if hf_class.startswith("Gemma"):
        assert written["attn_logit_softcapping"] == model.get("attn_softcap")
        assert written["final_logit_softcapping"] == model.get("logit_softcap")


def test_an_export_recorded_before_the_qk_norm_forms_loads_with_its_form():
    """normtrain.json of an earlier export recorded ``qk_norm`` as a boolean: true was the per-head form."""
    from dataclasses import asdict

    from normtrain.export.run import gpt_config

    for recorded, form in ((True, "per_head"), (False, "none")):
        assert gpt_config({**asdict(config()), "qk_norm": recorded}).qk_norm == form
