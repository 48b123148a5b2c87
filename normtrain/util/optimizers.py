"""What the config's checks and the checkpoints know of the optimizer without building one: Muon's settings and
their allowed values, and the torch optimizers one optimizer is made of. Building it is normtrain/training/optim.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

ADJUST_LR_FNS = ("original", "match_rms_adamw")  # torch.optim.Muon's adjust_lr_fn


@dataclass(frozen=True)
class MuonSettings:
    """torch.optim.Muon's hyperparameters (``optim=muon``); ``lr`` is Muon's peak learning rate, which the
    schedule scales as it scales AdamW's."""

    lr: float = 0.02
    momentum: float = 0.95
    nesterov: bool = True
    ns_steps: int = 5
    weight_decay: float = 0.0
    adjust_lr_fn: str = "original"

    @classmethod
    def of(cls, optim) -> MuonSettings:
        """From the ``optim`` config group."""
        return cls(lr=optim.muon_lr, momentum=optim.muon_momentum, nesterov=optim.muon_nesterov,
                   ns_steps=optim.muon_ns_steps, weight_decay=optim.muon_weight_decay,
                   adjust_lr_fn=optim.adjust_lr_fn)


def optimizers_of(optimizer) -> tuple[torch.optim.Optimizer, ...]:
    """The torch optimizers ``optimizer`` is made of: the pair of ``MuonWithAdamW``, else itself."""
    return tuple(getattr(optimizer, "optimizers", (optimizer,)))
