"""One process or many, as far as a layer below the loop needs to know: how many processes torchrun started, the
two ways the model is spread over them (``train.strategy``), and a rank's own part of a sharded tensor. The loop's
side of it (the process group, the model wrapper) is normtrain/training/distributed.py."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

STRATEGIES = ("ddp", "fsdp")


def env_world_size() -> int:
    """The number of processes torchrun started (1 outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (FSDP2 parameters, gradients and state dicts); a plain tensor as it is."""
    return t.to_local() if hasattr(t, "to_local") else t
