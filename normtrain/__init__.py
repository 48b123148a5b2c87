"""normtrain: train decoder-only transformers where the normalization is the experiment.

The entry points below import Hydra, W&B and datasets lazily, so ``import normtrain.model``
stays a torch-only import.
"""

from __future__ import annotations

from normtrain.util import moved
from normtrain.util.version import __version__

moved.install()  # the modules' old names (normtrain.training, normtrain.atomic, ...) stay importable


def compose(overrides: list[str] | None = None):
    """The config the CLI would build for these overrides (a DictConfig)."""
    from normtrain.config import compose as _compose

    return _compose(overrides or [])


def build_model(cfg):
    """The GPT described by ``cfg`` (a composed config), freshly initialized."""
    from normtrain.config import build_model as _build_model

    return _build_model(cfg)


def train(cfg, run_dir: str | None = None) -> dict:
    """Train one run; returns its summary (also written to ``<run_dir>/summary.json``)."""
    from normtrain.training.trainer import train as _train

    return _train(cfg, run_dir=run_dir)


def load(path: str):
    """A trained model (``GPT``, eval mode) from a ``normtrain-export`` folder (either format) or a run folder."""
    from normtrain.export import load as _load

    return _load(path)


__all__ = ["compose", "build_model", "train", "load", "__version__"]
