"""Every shipped YAML composes; overrides reach the built model; bad input is reported all at once."""

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError

import normtrain
from normtrain.config import config_dir, validate
from normtrain.errors import ConfigError
from normtrain.norms import LayerNorm, RMSNorm

GROUPS = ["model", "norm", "placement", "data", "optim", "logger"]


def shipped_options():
    root = Path(config_dir())
    return [(g, f.stem) for g in GROUPS for f in sorted((root / g).glob("*.yaml"))]


@pytest.mark.parametrize("group,option", shipped_options())
def test_every_shipped_yaml_composes_and_builds(group, option, tmp_path):
    overrides = [f"{group}={option}"]
    if (group, option) == ("data", "local_text"):
        overrides.append(f"data.path={tmp_path}")
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


def test_all_problems_are_reported_together():
    cfg = normtrain.compose([
        "norm.name=groupnorm", "model.n_heads=3", "model.n_layers=0", "optim.lr=-0.1",
        "data=local_text", "data.path=/no/such/corpus", "placement.beta=-1",
    ])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    text = str(err.value)
    assert len(err.value.problems) == 6
    for needle in ["norm.name='groupnorm' is not known; allowed: batchnorm, layernorm, prmsnorm, rmsnorm",
                   "model.n_heads=3 does not divide model.d_model=128", "model.n_layers=0",
                   "optim.lr=-0.1", "/no/such/corpus", "placement.beta"]:
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
