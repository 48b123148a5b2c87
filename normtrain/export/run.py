"""A run folder's trained model: its checkpoint (verified, ``weights_only``; either format: ``ckpt.pt`` or the
sharded ``ckpt.dcp``, read in one process without a process group) built back into a ``GPT``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from normtrain.checkpoint import CKPT_NAME, DCP_NAME, find_checkpoint
from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.util.errors import CheckpointError, ConfigError, first_line


def run_model(run_dir: str | Path) -> tuple[GPT, dict[str, Any]]:
    """(the model of the run's checkpoint in eval mode, {"config", "step", "corpus", "status"} of the run)."""
    from normtrain.config import NormtrainConfig, model_config

    run = Path(run_dir).expanduser()
    try:
        ckpt = find_checkpoint(str(run), run)
    except ConfigError:
        raise CheckpointError(f"{run} holds no checkpoint ({CKPT_NAME} or {DCP_NAME}): export a run folder that "
                              "trained to the end or was checkpointed (train.ckpt_every)") from None
    state = ckpt.read()
    try:  # the schema fills keys a checkpoint of an older normtrain lacks
        config = OmegaConf.merge(OmegaConf.structured(NormtrainConfig), state["config"])
        model = GPT(model_config(config, vocab=state.get("vocab_size")))
    except Exception as err:  # a config this normtrain cannot build: not a bug of the export
        raise CheckpointError(f"the checkpoint {ckpt.path} does not build a model here ({first_line(err)}): was "
                              "it written by another normtrain version?") from None
    try:
        ckpt.load_weights(model, state)
    except CheckpointError:
        raise
    except Exception as err:  # weights of another shape
        raise CheckpointError(f"the checkpoint {ckpt.path} does not fit the model its config describes "
                              f"({first_line(err)}): was it written by another normtrain version?") from None
    # the run folder: <run>/ckpt.pt, or <run>/ckpt.dcp/<save>
    folder = ckpt.path.parent.parent if ckpt.path.parent.name == DCP_NAME else ckpt.path.parent
    previous = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").is_file() else {}
    return model.eval(), {"config": state["config"], "step": state["step"], "status": previous.get("status"),
                          "corpus": previous.get("corpus") or {}, "run_dir": str(folder)}


def gpt_config(values: dict[str, Any]) -> GPTConfig:
    """A GPTConfig back from its ``dataclasses.asdict`` (normtrain.json's ``model``)."""
    try:
        return GPTConfig(**{**values, "norm": NormSpec(**values["norm"])})
    except (TypeError, KeyError) as err:
        raise CheckpointError(f"the model description {values} is not one this normtrain can build ({err}): was "
                              "it exported by another version?") from None
