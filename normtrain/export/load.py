"""``normtrain.load``: a model back from an export folder (either format) or a run folder."""

from __future__ import annotations

import json
from pathlib import Path

from normtrain.checkpoint import CKPT_NAME, DCP_NAME
from normtrain.export.hf import ARCHITECTURES
from normtrain.export.run import gpt_config, run_model
from normtrain.export.writer import RECORD, WEIGHTS
from normtrain.model import GPT
from normtrain.util.errors import CheckpointError


def load(path: str | Path) -> GPT:
    """The ``GPT`` saved at ``path`` (in eval mode): a normtrain-export folder, a run folder (either checkpoint
    format), a ckpt.pt or a ckpt.dcp folder."""
    path = Path(path).expanduser()
    if (path / CKPT_NAME).is_file() or (path / DCP_NAME).is_dir() or path.suffix == ".pt" or path.name == DCP_NAME:
        return run_model(path)[0]
    try:
        record = json.loads((path / RECORD).read_text())
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path} is neither a normtrain export (no readable {RECORD}: {err}) nor a run "
                              "folder") from None
    from safetensors.torch import load_file

    config = gpt_config(record["model"])
    state = load_file(str(path / WEIGHTS))
    if record["weights"] in ARCHITECTURES:
        state = ARCHITECTURES[record["weights"]].from_hf(state, config)
    model = GPT(config)
    model.load_state_dict(state)
    return model.eval()
