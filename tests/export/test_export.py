"""normtrain-export: Llama and GPT-2 checkpoints that transformers loads with the same logits, normtrain's own
format for the rest, normtrain.load for both, and the tokenizer the run was trained with."""

import json
import os
import subprocess
import sys

import pytest
import torch

import normtrain
from normtrain.export import export_run
from normtrain.util.errors import DataError

pytestmark = pytest.mark.slow
needs_hf = pytest.mark.extras("hf")  # transformers: the from_pretrained checks; the rest exports without it

LLAMA = ["placement=pre", "norm=rmsnorm", "model.mlp=swiglu", "model.pos=rope"]
GPT2 = ["placement=pre", "norm=layernorm", "model.mlp=gelu", "model.pos=learned", "model.bias=true",
        "norm.eps=1e-5"]
ARCHS = {  # normtrain overrides -> the transformers class they are exactly
    "LlamaForCausalLM": [*LLAMA, "norm.eps=1e-5"],
    "GPT2LMHeadModel": GPT2,
    "Qwen3ForCausalLM": [*LLAMA, "model.qk_norm=per_head"],
    "Olmo2ForCausalLM": ["placement=reorder", "norm=rmsnorm", "model.mlp=swiglu", "model.qk_norm=full"],
    "Gemma2ForCausalLM": ["placement=peri", "norm=rmsnorm", "model.mlp=geglu"],
    "Gemma3ForCausalLM": ["placement=peri", "norm=rmsnorm", "model.mlp=geglu", "model.qk_norm=per_head"],
}


def trained(overrides, run_dir):
    normtrain.train(normtrain.compose([*overrides, "train.max_steps=6", "optim.lr=1e-2"]), run_dir=run_dir)
    return normtrain.load(run_dir)


@pytest.fixture
def transformers():
    import transformers

    return transformers


def logits_of(model, tokens):
    with torch.no_grad():
        out = model(tokens)
    return (out.logits if hasattr(out, "logits") else out[0]).float()


def greedy(model, tokens, steps=6):
    """normtrain's greedy continuation, one full forward pass per token (no cache)."""
    with torch.no_grad():
        for _ in range(steps):
            tokens = torch.cat([tokens, model(tokens)[0][:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens


@needs_hf
@pytest.mark.parametrize("hf_class", list(ARCHS))
def test_the_export_loads_in_transformers_with_the_same_logits(hf_class, transformers, tiny, tmp_path):
    ours = trained([*tiny, *ARCHS[hf_class]], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf")
    assert report["format"] == hf_class and report["max_logit_diff"] < 1e-5
    hf, info = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert type(hf).__name__ == hf_class and not hf.config.tie_word_embeddings
    assert not any(info.values()), info  # no weight missing, unexpected or mismatched
    tokens = torch.randint(0, 256, (3, 32), generator=torch.Generator().manual_seed(1))
    diff = (logits_of(hf.eval(), tokens) - logits_of(ours, tokens)).abs().max().item()
    print(f"{hf_class}: max |logit difference| {diff:.2g}")
    assert diff < 1e-5
    prompt = tokens[:1, :8]  # generate() (with its KV cache) continues as normtrain does, greedily
    assert torch.equal(hf.generate(prompt, max_new_tokens=6, do_sample=False), greedy(ours, prompt))
    back = normtrain.load(tmp_path / "hf")  # the Hugging Face names (and values) mapped back
    assert set(back.state_dict()) == set(ours.state_dict())
    for (name, a), b in zip(back.state_dict().items(), ours.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=0, msg=name)  # Gemma's γ − 1 and E/√d: to fp32 rounding
    # the byte-level tokenizer: token i is byte i, whatever the text
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = "naïve\tcode ✓\n"
    assert tokenizer(text)["input_ids"] == list(text.encode())
    assert tokenizer.decode(list(text.encode())) == text


def test_other_architectures_export_in_normtrains_format(tiny, tmp_path):
    ours = trained([*tiny, "placement=post", "norm.affine=false"], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "out")
    assert report["format"] == "normtrain"
    assert "placement=post (needs pre)" in report["why_not_hf"]["LlamaForCausalLM"]
    assert not (tmp_path / "out" / "config.json").exists()
    back = normtrain.load(tmp_path / "out")
    tokens = torch.randint(0, 256, (2, 16))
    assert torch.equal(logits_of(back, tokens), logits_of(ours, tokens))
    assert json.loads((tmp_path / "out" / "normtrain.json").read_text())["model"]["placement"] == "post"


@needs_hf
@pytest.mark.parametrize("hf_class", ["GPT2LMHeadModel", "Gemma3ForCausalLM"])
def test_unit_norms_and_no_biases_map_too(hf_class, tiny, tmp_path):
    """norm.affine=false has no weights to copy (unit gains are written: ones, or Gemma's zeros for 1 + w) and
    model.bias=false no biases (GPT-2's zeros are written): the logits still agree, and normtrain.load drops them
    again."""
    overrides = {"GPT2LMHeadModel": GPT2[:-2], "Gemma3ForCausalLM": ARCHS["Gemma3ForCausalLM"]}[hf_class]
    ours = trained([*tiny, *overrides, "norm.affine=false"], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf")
    assert report["format"] == hf_class and report["max_logit_diff"] < 1e-5
    assert set(normtrain.load(tmp_path / "hf").state_dict()) == set(ours.state_dict())


PEER = ["model.tie_embeddings=true", "model.init=gpt2"]  # the options nanoGPT, GPT-2 and Gemma use


@needs_hf
@pytest.mark.parametrize("hf_class,overrides", [
    ("GPT2LMHeadModel", [*GPT2[:-2], "model.bias=false", "norm.bias=false"]),  # nanoGPT's model
    ("LlamaForCausalLM", ARCHS["LlamaForCausalLM"]), ("Qwen3ForCausalLM", ARCHS["Qwen3ForCausalLM"]),
    ("Gemma2ForCausalLM", ARCHS["Gemma2ForCausalLM"]),
])
def test_a_tied_model_exports_tied_where_the_class_ties(hf_class, overrides, transformers, tiny, tmp_path):
    """tie_word_embeddings: true and no lm_head weight written (GPT-2, Llama, Qwen3): transformers ties its head to
    the embedding, nothing missing or unexpected; Gemma's tie would reuse its stored table (ours / √d), so there the
    head is written apart. Logits as ours; normtrain.load gives the tied model back."""
    from safetensors import safe_open

    ours = trained([*tiny, *overrides, *PEER], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf")
    assert report["format"] == hf_class and report["max_logit_diff"] < 1e-5
    ties = not hf_class.startswith("Gemma")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["tie_word_embeddings"] is ties
    with safe_open(tmp_path / "hf" / "model.safetensors", "pt") as f:
        assert ("lm_head.weight" in set(f.keys())) is not ties
    hf, info = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert not any(info.values()), info
    assert (hf.get_output_embeddings().weight is hf.get_input_embeddings().weight) is ties
    tokens = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
    assert (logits_of(hf.eval(), tokens) - logits_of(ours, tokens)).abs().max().item() < 1e-5
    back = normtrain.load(tmp_path / "hf")
    assert back.lm_head.weight is back.tok_emb.weight
    assert (logits_of(back, tokens) - logits_of(ours, tokens)).abs().max().item() < 1e-5


def test_a_tied_model_in_normtrains_format_stores_the_matrix_once(tiny, tmp_path):
    from safetensors import safe_open

    ours = trained([*tiny, "placement=post", *PEER], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "out")
    assert report["format"] == "normtrain"
    with safe_open(tmp_path / "out" / "model.safetensors", "pt") as f:
        assert "tok_emb.weight" in set(f.keys()) and "lm_head.weight" not in set(f.keys())
    back = normtrain.load(tmp_path / "out")
    assert back.lm_head.weight is back.tok_emb.weight and back.num_params() == ours.num_params()
    tokens = torch.randint(0, 256, (2, 16))
    assert torch.equal(logits_of(back, tokens), logits_of(ours, tokens))


@needs_hf
@pytest.mark.parametrize("hf_class,overrides", [
    ("Gemma2ForCausalLM", ["model.attn_softcap=2", "model.logit_softcap=1.5", "norm.gain=zero_centred"]),
    ("Gemma3ForCausalLM", ["model.logit_softcap=1.5", "norm.gain=zero_centred"]),
])
def test_soft_caps_and_zero_centred_gains_round_trip_through_gemma(hf_class, overrides, transformers, tiny, tmp_path):
    """Caps small enough to bite (the logits pass them): transformers' Gemma computes the capped logits ours do,
    and normtrain.load maps the weights back (Gemma's stored w is our zero-centred w itself)."""
    ours = trained([*tiny, *ARCHS[hf_class], *overrides], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf")
    assert report["format"] == hf_class and report["max_logit_diff"] < 1e-5
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    tokens = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
    mine = logits_of(ours, tokens)
    assert mine.abs().max() < 1.5 and (mine.abs() > 1.0).any()  # the output cap is on, and bites
    assert (logits_of(hf, tokens) - mine).abs().max().item() < 1e-5
    back = normtrain.load(tmp_path / "hf")
    for (name, a), b in zip(back.state_dict().items(), ours.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=name)


@needs_hf
def test_a_bpe_run_exports_its_tokenizer(transformers, text_corpus, tiny, tmp_path):
    from normtrain.prepare import PrepareRequest, prepare

    shards = tmp_path / "shards"
    prepare(PrepareRequest(str(text_corpus), str(shards), tokenizer="bpe", vocab_size=300, progress=False))
    trained([*tiny, *LLAMA, "data=tokens", f"data.path={shards}"], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf")
    assert report["format"] == "LlamaForCausalLM" and "bpe-300" in report["tokenizer"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    ids = tokenizer("def function_1(x):\n")["input_ids"]
    from tokenizers import Tokenizer

    assert ids == Tokenizer.from_file(str(shards / "tokenizer.json")).encode("def function_1(x):\n").ids
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["vocab_size"] == 300 and config["eos_token_id"] == 0 == tokenizer.eos_token_id


@needs_hf
def test_the_command_line(tiny, tmp_path):
    trained([*tiny, *LLAMA], tmp_path / "run")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "normtrain.export", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True, env=env, timeout=300)
    proc = run(tmp_path / "run", tmp_path / "hf")
    assert proc.returncode == 0, proc.stderr
    assert "LlamaForCausalLM" in proc.stdout and "logits match" in proc.stdout and proc.stderr == ""
    missing = run(tmp_path / "nothing", tmp_path / "x")
    assert missing.returncode == 2 and "holds no checkpoint" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "data.csv").write_text("1,2")
    with pytest.raises(DataError, match=r"did not write \(data.csv\)"):
        export_run(tmp_path / "run", tmp_path / "theirs")


@pytest.mark.extras("hf", "tiktoken")
def test_a_tiktoken_run_exports_a_converted_tokenizer(transformers, toy_tiktoken, text_corpus, tiny, tmp_path):
    from normtrain.prepare import PrepareRequest, prepare

    shards = tmp_path / "shards"
    meta = prepare(PrepareRequest(str(text_corpus), str(shards), tokenizer="tiktoken:toy", progress=False))
    assert (meta["vocab_size"], meta["tokenizer"]["eot"], meta["dtype"]) == (259, 258, "uint16")
    trained([*tiny, *LLAMA, "data=tokens", f"data.path={shards}"], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf")
    assert "tiktoken:toy, converted" in report["tokenizer"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert tokenizer("return x")["input_ids"][0] == 257 and tokenizer.eos_token_id == 258


@pytest.mark.parametrize("option", ["model.qk_norm=full", "norm.depth_scaled=true"])
def test_catalog_options_transformers_lacks_fall_back_to_normtrains_format(option, tiny, tmp_path):
    """A Pre-LN RMSNorm SwiGLU RoPE model is a Llama, unless an option Llama does not have is on."""
    ours = trained([*tiny, *LLAMA, option], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "out")
    assert report["format"] == "normtrain"
    assert any(option.split("=")[0].split(".")[-1] in why for why in report["why_not_hf"]["LlamaForCausalLM"])
    tokens = torch.randint(0, 256, (2, 16))
    assert torch.equal(logits_of(normtrain.load(tmp_path / "out"), tokens), logits_of(ours, tokens))


@pytest.mark.parametrize("overrides,nearest", [
    (["placement=hybrid", "placement.first_pre=true"], "the nearest is Qwen3ForCausalLM, 2 differences: "
     "placement=hybrid (needs pre); model.v_norm=true (not in Qwen3ForCausalLM)"),
    (["placement=resi_dual", "placement.gpas=true"], "the nearest is LlamaForCausalLM, 2 differences: "
     "placement=resi_dual (needs pre); placement.gpas=true (not in LlamaForCausalLM)"),
    (["placement=mhc", "placement.streams=3"], "the nearest is LlamaForCausalLM, the one difference: placement=mhc "
     "(needs pre)"),
])
def test_the_2023_2026_placements_export_in_normtrains_format_naming_the_nearest(overrides, nearest, tiny, tmp_path):
    """No transformers class has them: normtrain's format, the nearest class and its differences named, and the
    model back from it computes the same logits (ResiDual's two streams, GPAS's gates, mHC's n included)."""
    from normtrain.export.cli import summary

    ours = trained([*tiny, "norm=rmsnorm", "model.mlp=swiglu", *overrides], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "out")
    assert report["format"] == "normtrain" and nearest in summary(report)
    tokens = torch.randint(0, 256, (2, 16))
    assert torch.equal(logits_of(normtrain.load(tmp_path / "out"), tokens), logits_of(ours, tokens))


def test_ngpt_exports_in_normtrains_format_naming_the_nearest_class(tiny, tmp_path):
    """No transformers class has nGPT's block (nor its s_z, α, s_qk, s_u, s_ν): normtrain's format, with the
    nearest class and what differs; the loaded model computes the same logits."""
    ours = trained([*tiny, "experiment=ngpt"], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "out")
    cls, differences = report["nearest"]
    assert report["format"] == "normtrain" and cls == "LlamaForCausalLM"
    assert any(d.startswith("placement=ngpt") for d in differences) and any(d.startswith("norm=l2")
                                                                           for d in differences)
    tokens = torch.randint(0, 256, (2, 16))
    assert torch.equal(logits_of(normtrain.load(tmp_path / "out"), tokens), logits_of(ours, tokens))
