"""The keys of the newer placements, norms and stabilizers: they reach the model, nonsense is refused with the
allowed values, and a resume treats them like the rest of their groups."""

import pytest

import normtrain
from normtrain.config import to_container, validate, with_defaults
from normtrain.model.placements import PostNormBlock, PreNormBlock
from normtrain.norms import DepthScaled, DyT
from normtrain.training.resume import config_changes
from normtrain.util.errors import CheckpointError, ConfigError


def test_new_keys_reach_the_model():
    model = normtrain.build_model(normtrain.compose([
        "placement=mix", "placement.post_fraction=0.5", "model.n_layers=4", "norm=dyt", "norm.alpha_init=0.2",
        "norm.depth_scaled=true", "model.qk_norm=true"]))
    assert [type(b) for b in model.blocks] == [PostNormBlock] * 2 + [PreNormBlock] * 2
    assert isinstance(model.blocks[3].norm1, DepthScaled) and model.blocks[3].norm1.layer == 4
    dyt = model.blocks[3].norm1.inner
    assert isinstance(dyt, DyT) and dyt.alpha.item() == pytest.approx(0.2)
    assert isinstance(model.blocks[0].attn.q_norm, DyT) and isinstance(model.final_norm, DyT)
    assert normtrain.compose(["placement=mix"]).placement.post_fraction == 0.25
    default = normtrain.compose([])
    assert (default.model.qk_norm, default.norm.depth_scaled, default.optim.z_loss, default.optim.independent_wd,
            default.placement.post_fraction) == ("none", False, 0.0, False, None)


def test_the_2023_2026_keys_reach_the_model_and_default_to_todays_model():
    from normtrain.model.softcap import soft_cap  # noqa: F401  (importable with torch alone)
    from normtrain.norms import Derf

    model = normtrain.build_model(normtrain.compose([
        "placement=sandwich", "norm=derf", "norm.gain=zero_centred", "model.qk_norm=full",
        "model.qk_norm_at=after_rope", "model.qk_norm_gain=false", "model.v_norm=true", "model.attn_softcap=50",
        "model.logit_softcap=30", "model.attn_gate=head"]))
    block, attn = model.blocks[0], model.blocks[0].attn
    assert type(block).__name__ == "PeriNormBlock" and model.cfg.placement == "peri"
    assert isinstance(block.norm1, Derf) and block.norm1.gain_form == "zero_centred" and block.norm1.weight.sum() == 0
    assert attn.qk_norm_at == "after_rope" and attn.q_norm.weight is None and attn.v_norm.weight is None
    assert (attn.softcap, model.cfg.logit_softcap, attn.gate_proj.out_features) == (50.0, 30.0, 4)
    affine_off = normtrain.build_model(normtrain.compose(["norm.affine=false"])).blocks[0].norm1
    assert affine_off.weight is None and affine_off.gain_form == "none"
    default = normtrain.compose([])
    m = default.model
    assert (m.qk_norm_at, m.qk_norm_gain, m.v_norm, m.attn_softcap, m.logit_softcap, m.attn_gate,
            default.norm.gain) == ("before_rope", True, False, 0.0, 0.0, "none", "vector")
    plain = normtrain.build_model(default).blocks[0]
    assert plain.attn.v_norm is None and plain.attn.gate_proj is None and plain.norm1.weight.shape == (128,)


def test_the_placement_keys_of_2023_2026_reach_the_model_and_default_to_todays_model():
    from normtrain.model.placements import B2TBlock, HybridNormBlock, NormFormerBlock, ResiDualBlock

    star = normtrain.build_model(normtrain.compose(["placement=hybrid", "placement.first_pre=true",
                                                   "model.n_layers=3", "placement.gpas=true"]))
    assert [type(b) for b in star.blocks] == [PreNormBlock, HybridNormBlock, HybridNormBlock]
    assert all(b.attn.q_norm is not None and b.attn.v_norm is not None for b in star.blocks)  # QKV-norm, implied
    assert all(b.gpas_gate.item() == 0.0 for b in star.blocks) and star.cfg.qk_norm == "per_head"
    hybrid = normtrain.build_model(normtrain.compose(["placement=hybrid"]))
    assert {type(b) for b in hybrid.blocks} == {HybridNormBlock} and hybrid.final_norm is not None
    nf = normtrain.build_model(normtrain.compose(["placement=normformer", "placement.head_scale=false",
                                                 "placement.resid_scale=true"])).blocks[0]
    assert isinstance(nf, NormFormerBlock) and nf.attn.head_scale is None and nf.resid_scale.shape == (128,)
    assert nf.mlp.inner_norm is not None  # post_act_norm: the YAML's default
    paper = normtrain.build_model(normtrain.compose(["placement=normformer"])).blocks[0]
    assert paper.attn.head_scale.shape == (4,) and paper.mlp.inner_norm is not None and paper.resid_scale is None
    assert isinstance(normtrain.build_model(normtrain.compose(["placement=b2t"])).blocks[0], B2TBlock)
    dual = normtrain.build_model(normtrain.compose(["placement=resi_dual"]))
    assert isinstance(dual.blocks[0], ResiDualBlock) and dual.final_norm is not None
    default = normtrain.compose([])
    pl = default.placement
    assert (pl.first_pre, pl.head_scale, pl.post_act_norm, pl.resid_scale, pl.gpas) == (None, None, None, None, False)
    plain = normtrain.build_model(default)
    assert plain.blocks[0].gpas_gate is None and plain.blocks[0].attn.head_scale is None
    assert (plain.cfg.qk_norm, plain.cfg.v_norm) == ("none", False)


def test_gpas_is_refused_where_a_placement_has_no_residual_add(monkeypatch):
    """Every placement here adds its sublayers to the stream (``none`` too: x + F(x)); one that interpolates
    instead (nGPT) declares ``residual_add = False`` and GPAS is refused there."""
    from normtrain.model import PLACEMENTS
    from normtrain.model.placements import Block

    assert [name for name, cls in PLACEMENTS.items() if not cls.residual_add] == ["ngpt"]
    monkeypatch.setitem(PLACEMENTS, "interpolated", type("Interpolated", (Block,), {"residual_add": False}))
    cfg = normtrain.compose(["placement.gpas=true"])
    cfg.placement.name = "interpolated"
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert ("placement.gpas=true scales the stream after a residual add, and placement=interpolated has none; "
            "placements with one: admin, b2t") in str(err.value)


def test_the_peer_options_reach_the_model_and_default_to_todays_model():
    model = normtrain.build_model(normtrain.compose(["model.tie_embeddings=true", "model.init=olmo2",
                                                     "model.init_std=0.01", "norm=layernorm", "norm.bias=false",
                                                     "model.qk_norm=per_head"]))
    assert model.lm_head.weight is model.tok_emb.weight and model.init.name == "olmo2" and model.init.sigma == 0.01
    norms = (model.blocks[0].norm1, model.blocks[1].norm2, model.final_norm, model.blocks[0].attn.q_norm)
    assert all(n.bias is None and n.weight is not None for n in norms)  # every norm: γ without β
    default = normtrain.compose([])
    assert (default.model.tie_embeddings, default.model.init, default.model.init_std, default.norm.bias) == (
        False, "xavier", None, None)
    plain = normtrain.build_model(normtrain.compose(["norm=layernorm"]))
    assert plain.lm_head.weight is not plain.tok_emb.weight and plain.blocks[0].norm1.bias.shape == (128,)


def test_emb_proj_reaches_the_model_and_is_off_by_default():
    model = normtrain.build_model(normtrain.compose(["model.emb_proj=true", "model.d_model=32", "model.n_heads=2"]))
    assert model.emb_in.weight.shape == model.emb_out.weight.shape == (32, 32)
    assert model.emb_in.weight is not model.emb_out.weight
    default = normtrain.build_model(normtrain.compose(["model.d_model=32", "model.n_heads=2"]))
    assert default.emb_in is None and default.emb_out is None and not default.cfg.emb_proj
    assert model.num_params() == default.num_params() + 2 * 32 * 32


def test_sandwich_is_peri_by_another_name():
    """One class, one recorded name: a run asked for as placement=sandwich is the experiment placement=peri is."""
    assert normtrain.compose(["placement=sandwich"]) == normtrain.compose(["placement=peri"])


@pytest.mark.parametrize("overrides,needle", [
    (["placement=mix", "placement.post_fraction=1.5"],
     "placement.post_fraction=1.5: the share of Post-LN blocks must lie in [0, 1]"),
    (["placement=mix", "placement.post_fraction=nan"], "placement.post_fraction=nan"),
    (["placement=pre", "placement.post_fraction=0.5"],
     "placement.post_fraction=0.5 applies to placement=mix only, not placement=pre"),
    (["placement=mhc", "placement.streams=0"], "placement.streams=0: must be at least 1 (the number n of residual "
     "streams mHC carries; the paper's is 4, and 1 is one stream with gated input and output)"),
    (["placement=pre", "placement.streams=2"], "placement.streams=2 applies to placement=mhc only, not placement=pre"),
    (["placement=mhc", "placement.alpha=2"], "α scales the shortcut before the norm, which only deepnorm, post"),
    (["norm=batchnorm", "model.qk_norm=true"],
     "model.qk_norm=per_head normalizes each token's query and key, which norm=batchnorm cannot (its statistics "
     "mix positions); allowed: derf, dyt, l2, layernorm, prmsnorm, rmsnorm"),
    (["norm=batchnorm", "model.qk_norm=full"], "model.qk_norm=full normalizes each token's query and key"),
    (["norm=prmsnorm", "model.qk_norm=per_head"],  # head_dim 32: ⌈0.0625·32⌉ = 2 features
     "model.qk_norm=per_head with norm=prmsnorm estimates the rms of each 32-feature head from 2 features "
     "(norm.p=0.0625): too few to bound the attention logits, which is what QK-norm is for; it needs at least 8 "
     "(norm.p ≥ 0.25), or model.qk_norm=full, or another norm type"),
    (["norm=prmsnorm", "model.qk_norm=full", "model.d_model=64", "model.n_heads=2"],  # ⌈0.0625·64⌉ = 4
     "model.qk_norm=full with norm=prmsnorm estimates the rms of each 64-feature projection from 4 features"),
    (["model.qk_norm=both"], "model.qk_norm='both' is not known; allowed: none, per_head, full (true = per_head, "
     "false = none)"),
    (["placement=rezero", "norm.depth_scaled=true"], "norm.depth_scaled=true: placement=rezero holds no norm to "
     "scale; placements with norms: admin, b2t, deepnorm, hybrid, mhc, mix, normformer, peri, post, pre, "
     "reorder, resi_dual, subln"),
    (["norm=dyt", "norm.alpha_init=0"], "norm.alpha_init=0.0: DyT's and Derf's initial α must be a finite number > 0"),
    (["optim.z_loss=-1e-4"], "optim.z_loss=-0.0001: the z-loss coefficient must be a finite number >= 0"),
    (["monitor.spike_window=1"], "monitor.spike_window=1: must be at least 2"),
    (["placement=admin", "placement.alpha=2"], "α scales the shortcut before the norm, which only deepnorm, post"),
    (["norm=dyt", "norm.impl=triton"], "norm.impl=triton is only available for prmsnorm, rmsnorm, not dyt"),
    (["norm.gain=unit"], "norm.gain='unit' is not known; allowed: vector, zero_centred, scalar, none "
     "(norm.affine=false = none)"),
    (["norm.affine=false", "norm.gain=scalar"], "norm.affine=false means norm.gain=none (no γ, no β), which "
     "contradicts norm.gain=scalar; drop one of them"),
    (["norm=batchnorm", "norm.gain=zero_centred"], "norm.gain=zero_centred: norm=batchnorm has only vector and none"),
    (["model.qk_norm_at=middle"], "model.qk_norm_at='middle' is not known; allowed: after_rope, before_rope"),
    (["model.qk_norm_at=after_rope"], "model.qk_norm_at=after_rope places QK-norm, and model.qk_norm=none has none"),
    (["model.qk_norm=per_head", "model.qk_norm_at=after_rope", "model.pos=learned"],
     "model.qk_norm_at=after_rope: model.pos=learned has no RoPE, so before and after are the same model"),
    (["model.qk_norm_gain=false"], "model.qk_norm_gain=false removes the gain of QK-norm (and V-norm), and this "
     "model has neither"),
    (["norm=batchnorm", "model.v_norm=true"], "model.v_norm=true normalizes each token's values, which "
     "norm=batchnorm cannot"),
    (["model.attn_softcap=-1"], "model.attn_softcap=-1.0: the soft-cap c of c·tanh(z/c) must be a finite number >= 0"),
    (["model.logit_softcap=inf"], "model.logit_softcap=inf: the soft-cap c"),
    (["model.attn_gate=channel"], "model.attn_gate='channel' is not known; allowed: elementwise, head, none"),
    (["placement=pre", "placement.first_pre=true"],
     "placement.first_pre=true applies to placement=hybrid only, not placement=pre"),
    (["placement=hybrid", "placement.head_scale=false"],
     "placement.head_scale=false applies to placement=normformer only, not placement=hybrid"),
    (["placement=pre", "placement.resid_scale=true"], "placement.resid_scale=true applies to placement=normformer"),
    (["placement=hybrid", "model.qk_norm=full"], "placement=hybrid normalizes queries, keys and values per head (it "
     "implies model.qk_norm=per_head and model.v_norm=true), which model.qk_norm=full contradicts"),
    (["placement=hybrid", "norm=prmsnorm"], "model.qk_norm=per_head with norm=prmsnorm estimates the rms"),
    (["optim=muon", "optim.adjust_lr_fn=spectral"], "optim.adjust_lr_fn='spectral' is not known; allowed: "
     "match_rms_adamw, original"),
    (["optim=muon", "optim.muon_ns_steps=0"], "optim.muon_ns_steps=0: Newton–Schulz iterations must lie in [1, 99]"),
    (["optim=muon", "optim.muon_momentum=1"], "optim.muon_momentum=1.0: must lie in [0, 1)"),
    (["optim.muon_lr=0.05", "optim.muon_nesterov=false"], "optim.muon_lr=0.05, optim.muon_nesterov=False set Muon, "
     "which optim=adamw does not use; pick optim=muon"),
    (["model.init=normal"], "model.init='normal' is not known; allowed: gpt2, mitchell, olmo2, small, xavier"),
    (["model.init_std=0.01"], "model.init_std=0.01 sets the σ of model.init=gpt2 or olmo2; model.init=xavier has no "
     "base std"),
    (["model.init=mitchell", "model.init_std=0.01"], "model.init=mitchell has no base std"),
    (["model.init=gpt2", "model.init_std=0"], "model.init_std=0.0: the scheme's σ must be a finite number > 0"),
    (["model.init=gpt2", "model.emb_std=0.02"], "model.emb_std=0.02 is the xavier scheme's embedding std; "
     "model.init=gpt2 draws the embeddings itself (set model.init_std)"),
    (["model.tie_embeddings=true", "model.emb_std=0.5"], "model.emb_std=0.5 draws no weight here: the tied matrix is "
     "drawn as the LM head (Xavier-normal) and model.pos=rope has no position embedding"),
    (["norm.bias=true"], "norm.bias=true: norm=rmsnorm has no β to keep (its formula has no shift); norms with one: "
     "batchnorm, batchnorm_causal, derf, dyt, layernorm"),
    (["norm=layernorm", "norm.gain=none", "norm.bias=true"], "norm.bias=true adds β next to γ, and norm.gain=none "
     "has neither"),
    (["norm=batchnorm", "norm.bias=false"], "norm.bias=false: norm=batchnorm's affine part (nn.BatchNorm1d's) is γ "
     "and β together"),
    (["placement=ngpt", "model.tie_embeddings=true"], "model.tie_embeddings=true contradicts placement=ngpt, which "
     "keeps the input embedding and the LM head as two matrices"),
    (["placement=ngpt", "model.init=gpt2"], "model.init=gpt2 does not apply to placement=ngpt"),
])
def test_nonsense_is_refused_with_the_allowed_values(overrides, needle):
    with pytest.raises(ConfigError) as err:
        validate(normtrain.compose(overrides))
    assert len(err.value.problems) == 1 and needle in str(err.value), err.value


@pytest.mark.parametrize("overrides", [
    ["placement=mix", "placement.post_fraction=0"], ["placement=mix", "placement.post_fraction=1"],
    ["placement=none", "norm=dyt", "model.qk_norm=true"], ["norm=dyt", "model.qk_norm=full"],
    ["norm=prmsnorm", "model.qk_norm=full"], ["norm=prmsnorm", "norm.p=0.25", "model.qk_norm=per_head"],
    ["norm=layernorm", "model.qk_norm=per_head"], ["model.qk_norm=false"],
    ["model.mlp=geglu", "placement=subln"], ["model.mlp=geglu", "placement=deepnorm"],
    ["optim.z_loss=1e-4", "optim.independent_wd=true", "optim.weight_decay=1e-4"],
    ["norm=derf", "norm.gain=scalar"], ["norm.affine=false", "norm.gain=none"], ["norm=batchnorm", "norm.gain=none"],
    ["model.v_norm=true", "model.qk_norm_gain=false"], ["model.qk_norm=full", "model.qk_norm_at=after_rope"],
    ["model.attn_softcap=50", "model.logit_softcap=30", "model.attn_gate=elementwise", "placement=sandwich"],
    ["placement=hybrid", "model.qk_norm=per_head", "model.v_norm=true"], ["placement=hybrid", "model.qk_norm=true"],
    ["placement=hybrid", "model.qk_norm_gain=false", "model.qk_norm_at=after_rope", "placement.first_pre=true"],
    ["placement=normformer", "placement.resid_scale=true", "placement.gpas=true"],
    ["placement=b2t", "placement.gpas=true"], ["placement=resi_dual", "placement.gpas=true"],
    ["placement=none", "placement.gpas=true"], ["placement=mix", "placement.gpas=true"],
    ["optim=muon", "optim.adjust_lr_fn=match_rms_adamw", "optim.muon_weight_decay=0.1", "optim.independent_wd=true"],
    ["model.init=gpt2", "model.tie_embeddings=true", "norm=layernorm", "norm.bias=false"],
    ["model.init=olmo2", "model.init_std=0.01", "placement=deepnorm"], ["model.init=mitchell", "placement=admin"],
    ["model.init=small", "placement=none"], ["model.tie_embeddings=true", "model.pos=learned", "model.emb_std=0.5"],
    ["norm=dyt", "norm.bias=false"], ["norm=derf", "norm.bias=false", "norm.gain=zero_centred"],
    ["norm.bias=false"], ["norm=layernorm", "norm.gain=none", "norm.bias=false"], ["norm=batchnorm", "norm.bias=true"],
    ["model.tie_embeddings=true", "optim=muon", "placement=mhc"],
])
def test_sensible_combinations_are_accepted(overrides):
    validate(normtrain.compose(overrides))


def experiment(overrides):
    return {**to_container(normtrain.compose(overrides)), "world_size": 1}


def recorded(overrides, **model):
    """What a resume compares (``Trainer.experiment``): the recorded config through ``with_defaults``."""
    config = to_container(normtrain.compose(overrides))
    return {**with_defaults({**config, "model": {**config["model"], **model}}), "world_size": 1}


@pytest.mark.parametrize("change", ["model.qk_norm=true", "norm.depth_scaled=true", "optim.z_loss=1e-4",
                                    "optim.independent_wd=true", "norm.alpha_init=0.3", "norm.gain=scalar",
                                    "model.attn_softcap=50", "model.attn_gate=head", "model.v_norm=true",
                                    "placement.gpas=true", "optim=muon", "model.emb_proj=true", "optim.qk_clip=100",
                                    "model.tie_embeddings=true", "model.init=gpt2", "norm.bias=false"])
def test_a_resume_refuses_a_changed_new_key(change):
    with pytest.raises(CheckpointError, match=change.split("=")[0]):
        config_changes(experiment([]), experiment([change]), step=5)
    mix = experiment(["placement=mix"])
    with pytest.raises(CheckpointError, match="placement.post_fraction: 0.25 → 0.5"):
        config_changes(mix, experiment(["placement=mix", "placement.post_fraction=0.5"]), step=5)


def test_a_checkpoint_from_before_the_new_keys_resumes_under_their_neutral_values():
    new = recorded([])
    old = {group: dict(values) for group, values in new.items() if isinstance(values, dict)}
    for key in ("model.qk_norm", "norm.alpha_init", "norm.depth_scaled", "placement.post_fraction", "optim.z_loss",
                "optim.independent_wd", "norm.gain", "model.qk_norm_at", "model.qk_norm_gain", "model.v_norm",
                "model.attn_softcap", "model.logit_softcap", "model.attn_gate", "placement.first_pre",
                "placement.head_scale", "placement.post_act_norm", "placement.resid_scale",
                "placement.gpas", "model.tie_embeddings", "model.init", "model.init_std",
                "norm.bias"):  # unknown to an older checkpoint
        group, name = key.split(".")
        del old[group][name]
    from normtrain.study.grid import same_run

    assert same_run(old, to_container(normtrain.compose([])))  # a result of an older normtrain is reused
    old = {**with_defaults(old), "world_size": 1}
    assert config_changes(old, new, step=5) == {}  # not a change: the run is the same experiment
    with pytest.raises(CheckpointError, match=r"model.qk_norm: 'none' → 'per_head'"):  # as the old run was
        config_changes(old, recorded(["model.qk_norm=true"]), step=5)


@pytest.mark.parametrize("before,today", [(True, "per_head"), (False, "none"), ("true", "per_head"),
                                          ("False", "none")])
def test_a_checkpoint_that_recorded_qk_norm_as_a_boolean_resumes_under_its_form(before, today):
    """Before the QK-norm forms, model.qk_norm was a boolean: true was the per-head form."""
    old = recorded([], qk_norm=before)
    assert old["model"]["qk_norm"] == today
    assert config_changes(old, recorded([f"model.qk_norm={today}"]), step=5) == {}
    other = "full" if today == "per_head" else "per_head"
    with pytest.raises(CheckpointError, match=f"model.qk_norm: '{today}' → '{other}'"):
        config_changes(old, recorded([f"model.qk_norm={other}"]), step=5)


def test_records_spell_qk_norm_by_its_form_and_older_runs_are_reused():
    """A run asked for with model.qk_norm=true records per_head; one recorded as true before the forms existed
    is the same run (normtrain-reproduce reuses it)."""
    from normtrain.study.grid import same_run

    new = to_container(normtrain.compose(["model.qk_norm=true"]))
    assert new["model"]["qk_norm"] == "per_head"
    old = {**new, "model": {**new["model"], "qk_norm": True}}
    assert same_run(old, new) and not same_run(old, to_container(normtrain.compose(["model.qk_norm=full"])))
