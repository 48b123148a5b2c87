"""A run folder's trained model: its checkpoint (verified, ``weights_only``) built back into a ``GPT``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from normtrain.checkpoint import CKPT_NAME, load_checkpoint
from normtrain.errors import CheckpointError
from normtrain.model import GPT, GPTConfig, NormSpec


def run_model(run_dir: str | Path) -> tuple[GPT, dict[str, Any]]:
    """(the model of the run's checkpoint in eval mode, {"config", "step", "corpus", "status"} of the run)."""
    from normtrain.config import NormtrainConfig, model_config

    run = Path(run_dir).expanduser()
    path = run / CKPT_NAME if run.is_dir() else run
    if not path.is_file():
        raise CheckpointError(f"{run} holds no checkpoint ({CKPT_NAME}): export a run folder that trained to the "
                              "end or was checkpointed (train.ckpt_every)")
    state = load_checkpoint(path)
    try:  # the schema fills keys a checkpoint of an older normtrain lacks
        config = OmegaConf.merge(OmegaConf.structured(NormtrainConfig), state["config"])
        model = GPT(model_config(config, vocab=state.get("vocab_size")))
        model.load_state_dict(state["model"])
    except Exception as err:  # a config or weights this normtrain cannot build: not a bug of the export
        raise CheckpointError(f"the checkpoint {path} does not build a model here ({type(err).__name__}: "
                              f"{str(err).strip().splitlines()[0][:200]}): was it written by another normtrain "
                              "version?") from None
    summary = run / "summary.json" if run.is_dir() else path.parent / "summary.json"
    previous = json.loads(summary.read_text()) if summary.is_file() else {}
    return model.eval(), {"config": state["config"], "step": state["step"], "status": previous.get("status"),
                          "corpus": previous.get("corpus") or {}, "run_dir": str(path.parent)}


def gpt_config(values: dict[str, Any]) -> GPTConfig:
    """A GPTConfig back from its ``dataclasses.asdict`` (normtrain.json's ``model``)."""
    try:
        return GPTConfig(**{**values, "norm": NormSpec(**values["norm"])})
    except (TypeError, KeyError) as err:
        raise CheckpointError(f"the model description {values} is not one this normtrain can build ({err}): was "
                              "it exported by another version?") from None
