"""Every shipped YAML composes; overrides reach the built model; bad input is reported all at once."""

from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError

import normtrain
from normtrain.config import GROUP_SCHEMAS, compose, config_dir, validate
from normtrain.norms import LayerNorm, RMSNorm
from normtrain.util.errors import ConfigError

GROUPS = ["model", "norm", "placement", "data", "optim", "logger"]


def shipped_options():
    root = Path(config_dir())
    return [(g, f.stem) for g in GROUPS for f in sorted((root / g).glob("*.yaml"))]


@pytest.mark.parametrize("group,option", shipped_options())
def test_every_shipped_yaml_composes_and_builds(group, option, tmp_path):
    overrides = [f"{group}={option}"]
    if (group, option) == ("data", "local_text"):
        overrides.append(f"data.path={tmp_path}")
    if group == "data" and normtrain.compose(overrides).data.name == "tokens":
        overrides.append("model.vocab_size=512")  # token shards (not prepared here) would say it
    cfg = normtrain.compose(overrides)
    assert cfg[group] is not None
    model = normtrain.build_model(cfg)
    assert model.num_params() > 0


def test_every_experiment_composes():
    for f in sorted((Path(config_dir()) / "experiment").glob("*.yaml")):
        normtrain.build_model(normtrain.compose([f"experiment={f.stem}"]))


def test_defaults():
    cfg = normtrain.compose([])
    assert (cfg.norm.name, cfg.placement.name, cfg.data.name, cfg.logger.name) == (
        "rmsnorm", "pre", "python_stdlib", "wandb")
    assert (cfg.model.mlp, cfg.model.pos, cfg.model.bias) == ("swiglu", "rope", False)
    assert cfg.norm.eps == 1e-6 and normtrain.compose(["norm=layernorm"]).norm.eps == 1e-5
    assert normtrain.compose(["norm=prmsnorm"]).norm.p == 0.0625
    validate(cfg)


def test_overrides_reach_the_model():
    model = normtrain.build_model(normtrain.compose(["norm=layernorm", "placement=deepnorm", "model.n_layers=24"]))
    assert len(model.blocks) == 24 and isinstance(model.blocks[0].norm1, LayerNorm)
    assert (model.alpha, model.beta) == (pytest.approx(48 ** 0.25), pytest.approx(192 ** -0.25))
    model = normtrain.build_model(normtrain.compose(["placement=deepnorm", "placement.alpha=1.5",
                                                    "placement.beta=0.5", "model.n_layers=2"]))
    assert isinstance(model.blocks[0].norm1, RMSNorm) and (model.alpha, model.beta) == (1.5, 0.5)


def test_typo_in_a_key_fails_at_compose():
    with pytest.raises((ConfigCompositionException, ConfigKeyError)):
        normtrain.compose(["model.n_layer=3"])


def test_unknown_group_option_lists_the_available_ones():
    with pytest.raises(ConfigCompositionException) as err:
        normtrain.compose(["norm=groupnorm"])
    assert "layernorm" in str(err.value.__cause__ or err.value) or "layernorm" in str(err.value)


def test_a_misspelt_key_or_an_unknown_option_gets_one_sentence_with_a_suggestion():
    from normtrain.config.compose import group_options
    from normtrain.config.names import composition_problem, override_problems

    with pytest.raises(ConfigCompositionException) as err:
        normtrain.compose(["norm=groupnorm"])
    assert composition_problem(err.value) == (
        "norm=groupnorm is not an option of norm; did you mean norm=rmsnorm? allowed, closest first: rmsnorm, "
        "prmsnorm, layernorm, batchnorm, batchnorm_causal, derf, dyt, l2")
    with pytest.raises((ConfigCompositionException, ConfigKeyError)) as err:
        normtrain.compose(["model.n_layer=3"])
    assert composition_problem(err.value).startswith("model.n_layer is not a key of model; did you mean "
                                                     "model.n_layers? allowed: n_layers, d_model")
    with pytest.raises(ConfigCompositionException) as err:
        normtrain.compose(["model.n_layers=abc"])
    assert composition_problem(err.value) is None  # a wrong type: Hydra's message says it
    # Hydra stops at the first; every one is named at once, with none for what is right or not the user's to spell
    overrides = ["placement=pre,pre_post", "logger=[wandb,csvv]", "model.n_layer=3", "model=tiny", "+model.foo=1",
                 "hydra/launcher=slurm", "hydra.run.dir=x", "optim.lr=1", "train.rollback.lr_factor=0.5"]
    found = override_problems(overrides, group_options())
    assert [p.split(" is not")[0] for p in found] == ["placement=pre_post", "logger=csvv", "model.n_layer"]
    assert found[0].startswith("placement=pre_post is not an option of placement; did you mean placement=post? "
                               "allowed, closest first: post, pre, ")
    assert override_problems(["model.n_layers=["], group_options()) == []  # bad syntax: Hydra's to report


def test_all_problems_are_reported_together():
    cfg = normtrain.compose([
        "norm.name=groupnorm", "model.n_heads=3", "model.n_layers=0", "optim.lr=-0.1",
        "data=local_text", "data.path=/no/such/corpus", "placement.beta=-1",
    ])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    text = str(err.value)
    assert len(err.value.problems) == 6
    for needle in ["norm.name='groupnorm' is not known; allowed: batchnorm, batchnorm_causal, derf, dyt, l2, "
                   "layernorm, prmsnorm, rmsnorm", "model.n_heads=3 does not divide model.d_model=128",
                   "model.n_layers=0", "optim.lr=-0.1", "/no/such/corpus", "placement.beta"]:
        assert needle in text


@pytest.mark.parametrize("override,needle", [
    ("norm.p=0", "norm.p=0.0"), ("norm.p=1.5", "(0, 1]"), ("norm.impl=cuda", "norm.impl"),
    ("placement.alpha=2", "only"), ("optim.schedule=linear", "cosine"), ("train.device=tpu", "train.device"),
    ("model.mlp=relu", "swiglu"), ("model.pos=alibi", "rope"),
])
def test_single_bad_values_name_the_key(override, needle):
    overrides = [override] if "norm.p" not in override else ["norm=prmsnorm", override]
    with pytest.raises(ConfigError, match=None) as err:
        validate(normtrain.compose(overrides))
    assert needle in str(err.value)


def test_triton_impl_only_for_rms_norms():
    with pytest.raises(ConfigError, match="only available for prmsnorm, rmsnorm"):
        validate(normtrain.compose(["norm=layernorm", "norm.impl=triton"]))


def test_local_text_needs_a_path():
    with pytest.raises(ConfigError, match="data.path"):
        validate(normtrain.compose(["data=local_text", "data.path=null"]))


def shipped_config_overrides(tmp_path) -> list[tuple[str, list[str]]]:
    """(file, the overrides that compose it) for every YAML under configs/."""
    root = Path(config_dir())
    out = []
    for f in sorted(root.rglob("*.yaml")):
        group = f.parent.relative_to(root).as_posix()
        overrides = [] if group == "." else [f"{group}={f.stem}"]
        if (group, f.stem) == ("data", "local_text"):
            overrides.append(f"data.path={tmp_path}")
        if group == "data" and "name: tokens" in f.read_text():  # token shards: validation looks for meta.json
            (tmp_path / "shards").mkdir(exist_ok=True)
            (tmp_path / "shards" / "meta.json").write_text("{}")
            overrides.append(f"data.path={tmp_path / 'shards'}")
        out.append((f.relative_to(root).as_posix(), overrides))
    return out


def test_every_shipped_config_validates(tmp_path):
    """Group options, experiments (``experiment=NAME``, which override the groups) and launcher presets: every
    file composes and validates, with no key that the schema lacks (``validate`` reports those)."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    shipped = shipped_config_overrides(tmp_path)
    assert {"config.yaml", "experiment/deepnet_depth.yaml", "hydra/launcher/slurm.yaml"} <= {f for f, _ in shipped}
    for f, overrides in shipped:
        validate(compose(overrides, return_hydra_config=f.startswith("hydra/")))


@pytest.mark.parametrize("override,needles", [
    ("+model.n_layer=3", ["model.n_layer is not a key of model; did you mean model.n_layers? allowed: n_layers, "
                          "d_model"]),
    ("+n_layers=3", ["n_layers is not a key of the config; did you mean model.n_layers?"]),
    ("+model.lr=1", ["model.lr is not a key of model; did you mean optim.lr?"]),
    ("+train.sed=1", ["train.sed", "did you mean train.seed?"]),
    ("+logger.colour=red", ["logger.colour is not a key of logger; allowed: name, backends, project"]),
    ("+monitor.extra.deep=1", ["monitor.extra is not a key of monitor"]),
])
def test_keys_forced_in_with_plus_are_reported(override, needles):
    """``+key=value`` (Hydra's own suggestion for a misspelt key) adds keys past the typed schema."""
    with pytest.raises(ConfigError) as err:
        validate(normtrain.compose([override]))
    assert len(err.value.problems) == 1
    for needle in needles:
        assert needle in str(err.value)


def test_forced_keys_are_reported_with_every_other_problem():
    cfg = normtrain.compose(["+model.n_layer=3", "+optim.lr_max=1", "model.emb_std=-1"])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert len(err.value.problems) == 3 and "3 problems" in str(err.value)
    with pytest.raises(ConfigError) as err:  # building a model checks the model's groups only
        normtrain.build_model(cfg)
    assert [p.split(" ")[0] for p in err.value.problems] == ["model.n_layer", "model.emb_std=-1.0:"]
    validate(compose([], return_hydra_config=True))  # the hydra node is not a stray key


def float_keys() -> list[str]:
    return [f"{group}.{f.name}" for group, schema in GROUP_SCHEMAS.items() for f in fields(schema)
            if get_type_hints(schema)[f.name] is float]


def test_the_float_keys_are_known():
    assert {"model.emb_std", "norm.eps", "norm.p", "optim.lr", "optim.eps", "optim.weight_decay",
            "optim.min_lr_ratio", "optim.grad_clip", "monitor.divergence_factor", "data.val_fraction",
            "norm.alpha_init", "optim.z_loss", "optim.momentum", "model.attn_softcap", "model.logit_softcap",
            "train.progress_every_s", "optim.muon_lr", "optim.muon_momentum", "optim.muon_weight_decay",
            "optim.qk_clip", "optim.qk_clip_alpha", "optim.decay_fraction"} == set(
        float_keys())


@pytest.mark.parametrize("key", float_keys())
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_every_float_key_must_be_finite(key, value):
    with pytest.raises(ConfigError) as err:
        validate(normtrain.compose([f"{key}={value}"]))
    assert [p.split(":")[0] for p in err.value.problems] == [f"{key}={value}"]


@pytest.mark.parametrize("override,needle", [
    ("model.emb_std=-1", "model.emb_std=-1.0: the embedding init std must be a finite number > 0"),
    ("model.emb_std=0", "model.emb_std=0.0"),
    ("optim.eps=-1", "optim.eps=-1.0: Adam's epsilon must be a finite number > 0"),
    ("optim.eps=0", "optim.eps=0.0"),
    ("norm.eps=0", "norm.eps=0.0"),
    ("optim.weight_decay=-0.1", "optim.weight_decay=-0.1"),
    ("optim.grad_clip=-1", "optim.grad_clip=-1.0"),
    ("optim.min_lr_ratio=1.5", "optim.min_lr_ratio=1.5"),
    ("optim.decay_fraction=0", "optim.decay_fraction=0.0: must lie in (0, 1]"),
    ("optim.betas=[0.9,1.0]", "optim.betas=[0.9, 1.0]"),
    ("monitor.divergence_factor=1", "monitor.divergence_factor=1.0"),
    ("data.val_fraction=0", "data.val_fraction=0.0"),
    ("train.seed=-1", "train.seed=-1: must lie in [0, 2**32 - 1]"),
    (f"train.seed={2**32}", f"train.seed={2**32}"),
    ("optim.name=lion", "optim.name='lion' is not known; allowed: adamw, muon, sgd"),
    ("optim.momentum=0.9", "optim.momentum=0.9 applies to optim=sgd only"),
    ("placement.beta=inf", "placement.beta"),
])
def test_values_out_of_range_name_the_key(override, needle):
    with pytest.raises(ConfigError) as err:
        validate(normtrain.compose([override]))
    assert len(err.value.problems) == 1 and needle in str(err.value), err.value


def test_boundary_values_are_accepted():
    validate(normtrain.compose(["optim.weight_decay=0", "optim.grad_clip=0", "optim.min_lr_ratio=0",
                                "optim.schedule=wsd", "optim.decay_fraction=1",
                                "optim.betas=[0,0.999]", f"train.seed={2**32 - 1}",
                                "norm=prmsnorm", "norm.p=1"]))


@pytest.mark.parametrize("overrides,needle", [
    (["train.on_divergence=rollback"], "train.on_divergence=rollback needs train.ckpt_every > 0"),
    (["train.on_divergence=retry"], "train.on_divergence='retry' is not known; allowed: rollback, stop"),
    (["train.rollback.max_retries=0"], "train.rollback.max_retries=0: must be at least 1"),
    (["train.rollback.lr_factor=2"], "train.rollback.lr_factor=2.0: must lie in (0, 1]"),
    (["train.rollback.skip_batches=-1"], "train.rollback.skip_batches=-1"),
    (["train.ckpt_format=zarr"], "train.ckpt_format='zarr' is not known; allowed: auto, dcp, full"),
    (["train.async_ckpt=true"], "train.async_ckpt=true needs sharded checkpoints (train.ckpt_format=dcp); this run "
                                "writes train.ckpt_format=full"),
    (["train.global_batch_size=12", "train.batch_size=8"],
     "train.global_batch_size=12 is not a multiple of train.batch_size × world size = 8 × 1 = 8 (gradient "
     "accumulation makes up whole micro-batches); allowed: 8, 16, 24, ..., or a train.batch_size that divides it "
     "on 1 process: 1, 2, 3, 4, 6, 12"),
    (["debug.nan_rank=1"], "debug.nan_rank=1: this run has ranks 0 to 0"),
    (["debug.inject_nan_at_step=-2"], "debug.inject_nan_at_step=-2: must be at least 0"),
])
def test_rollback_checkpoint_and_batch_keys_are_checked(overrides, needle):
    with pytest.raises(ConfigError) as err:
        validate(normtrain.compose(overrides))
    assert len(err.value.problems) == 1 and needle in str(err.value), err.value


def test_the_global_batch_is_checked_against_the_world_size(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ConfigError, match=r"4 × 4 = 16 .* allowed: 16, 32, 48, ..., or a train.batch_size that "
                                          r"divides it on 4 processes: 1, 2, 3, 6"):
        validate(normtrain.compose(["train.global_batch_size=24", "train.batch_size=4"]))
    validate(normtrain.compose(["train.global_batch_size=24", "train.batch_size=3", "train.async_ckpt=true"]))
