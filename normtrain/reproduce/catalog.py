"""The experiments by name, in the order ``normtrain-reproduce all`` runs them."""

from __future__ import annotations

from normtrain.reproduce.batchnorm_leak import BatchNormLeak
from normtrain.reproduce.curse_of_depth import CurseOfDepth
from normtrain.reproduce.depth import Depth
from normtrain.reproduce.dyt import DyT
from normtrain.reproduce.dyt_tokens import DyTTokens
from normtrain.reproduce.grad_init import GradInit
from normtrain.reproduce.hybrid_depth import HybridDepth
from normtrain.reproduce.lr_sensitivity import LRSensitivity
from normtrain.reproduce.model_update import ModelUpdate
from normtrain.reproduce.ngpt_storage import NgptStorage
from normtrain.reproduce.norm_types import NormTypes
from normtrain.reproduce.output_change import OutputChange
from normtrain.reproduce.peri_variance import PeriVariance
from normtrain.reproduce.runner import Experiment
from normtrain.reproduce.softcap_vs_qknorm import SoftcapVsQKNorm
from normtrain.reproduce.warmup import Warmup

EXPERIMENTS: dict[str, type[Experiment]] = {
    cls.name: cls for cls in (GradInit, Warmup, ModelUpdate, Depth, OutputChange, NormTypes, BatchNormLeak,
                               LRSensitivity, PeriVariance, CurseOfDepth, DyT, HybridDepth, DyTTokens,
                               NgptStorage, SoftcapVsQKNorm)
}
