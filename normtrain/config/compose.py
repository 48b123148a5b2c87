"""A config from overrides (``compose``, the same one the CLI builds), and what is read off a composed config:
the model's own plain config (``model_config``), the vocabulary, and the plain values a summary and a
checkpoint record (``to_container``, ``with_defaults``: an older record in today's spelling)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from normtrain.config.schema import MODEL_GROUPS, NormtrainConfig
from normtrain.config.validation import validate
from normtrain.util.errors import ConfigError

if TYPE_CHECKING:  # the model (and torch) load on first validation, not on import: `normtrain --help` stays fast
    from normtrain.model import GPT, GPTConfig


def config_dir() -> str:
    """The shipped configs: inside the package in a wheel, at the repo's top level in a checkout."""
    package = Path(__file__).resolve().parents[1]  # normtrain/
    for candidate in (package / "configs", package.parent / "configs"):
        if (candidate / "config.yaml").is_file():
            return str(candidate)
    raise FileNotFoundError(f"normtrain's configs/ folder was not found next to {package}")


def group_options() -> dict[str, list[str]]:
    """Each shipped config group (a folder of YAML files: ``norm``, ``placement``, ...) and its options; Hydra's
    own groups (``hydra/...``) left out."""
    root = Path(config_dir())
    return {folder.name: sorted(f.stem for f in folder.glob("*.yaml")) for folder in sorted(root.iterdir())
            if folder.is_dir() and folder.name != "hydra"}


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="normtrain_schema", node=NormtrainConfig)


def compose(overrides: list[str], return_hydra_config: bool = False) -> DictConfig:
    """The config the CLI builds for ``overrides`` (no validation: inspect it freely).

    ``return_hydra_config`` keeps the ``hydra`` node (e.g. an experiment's ``hydra.sweeper.params``).
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides),
                             return_hydra_config=return_hydra_config)


def vocab_size(cfg: DictConfig, corpus_vocab: int) -> int:
    """``model.vocab_size`` if set (it may pad the corpus's vocabulary, never cut it), else the corpus's."""
    asked = cfg.model.get("vocab_size")
    if asked is None:
        return corpus_vocab
    if asked < corpus_vocab:
        raise ConfigError(f"model.vocab_size={asked} is smaller than the corpus's vocabulary ({corpus_vocab} tokens): "
                          "use null (the corpus's) or a larger number")
    return asked


def model_config(cfg: DictConfig, vocab: int | None = None) -> GPTConfig:
    """Translate the composed config into the model's own plain config: the keys of ``model`` and ``placement``
    are GPTConfig's, those of ``norm`` NormSpec's, by name (a placement key left null, one that another
    placement's YAML sets, keeps the model's default). The vocabulary: ``vocab``, else ``model.vocab_size``,
    else the corpus's (for token shards, read from their meta.json)."""
    from normtrain.data.shards import vocab_size_of
    from normtrain.model import GPTConfig, NormSpec

    m, n, pl = (OmegaConf.to_container(cfg[group], resolve=True) for group in MODEL_GROUPS)
    name, alpha, beta = pl.pop("name"), pl.pop("alpha"), pl.pop("beta")
    scale = lambda v: None if v in (None, "auto") else float(v)  # noqa: E731
    m["vocab_size"] = vocab or m.get("vocab_size") or vocab_size_of(cfg.data.name, cfg.data.path)
    placed = {key: value for key, value in pl.items() if value is not None}
    return GPTConfig(**m, **placed, norm=NormSpec(**n), placement=name, alpha=scale(alpha), beta=scale(beta))


def build_model(cfg: DictConfig) -> GPT:
    from normtrain.model import GPT

    validate(cfg, training=False)
    return GPT(model_config(cfg))


def with_defaults(config: dict) -> dict:
    """A resolved config recorded by an earlier normtrain, with the keys the schema has gained since at their
    defaults and renamed values in today's spelling (``_canonical``): a key that did not exist then, or a value
    spelt differently, is not a change of the experiment (``normtrain.training.resume``)."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(NormtrainConfig), config)
    except Exception:  # a key since removed or retyped: compared as it is (and reported as a change)
        return _canonical(config)
    return _canonical(OmegaConf.to_container(merged, resolve=True))  # type: ignore[arg-type]


def _canonical(config: dict) -> dict:
    """Values an earlier normtrain spelt another way, in today's spelling: ``model.qk_norm`` was a boolean
    (true = per_head, false = none), so a run recorded with ``qk_norm: true`` is the same experiment as one
    with ``per_head``."""
    from normtrain.model.config import qk_norm_form

    model = config.get("model")
    if isinstance(model, dict) and "qk_norm" in model:
        config = {**config, "model": {**model, "qk_norm": qk_norm_form(model["qk_norm"])}}
    return config


def to_container(cfg: DictConfig) -> dict:
    """The resolved config as plain values, in today's spelling (``model.qk_norm=true`` is recorded as
    ``per_head``), so that a summary, a checkpoint and ``with_defaults`` of an older record compare alike."""
    return _canonical(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
