"""The experiments by name, in the order ``normtrain-reproduce all`` runs them."""

from __future__ import annotations

from normtrain.reproduce.admin_output_change import OutputChange
from normtrain.reproduce.batchnorm_leak import BatchNormLeak
from normtrain.reproduce.curse_of_depth import CurseOfDepth
from normtrain.reproduce.deepnet_depth import Depth
from normtrain.reproduce.deepnet_update import ModelUpdate
from normtrain.reproduce.dyt import DyT
from normtrain.reproduce.dyt_tokens import DyTTokens
from normtrain.reproduce.hybrid_depth import HybridDepth
from normtrain.reproduce.lr_sensitivity import LRSensitivity
from normtrain.reproduce.ngpt_storage import NgptStorage
from normtrain.reproduce.norm_types import NormTypes
from normtrain.reproduce.peri_variance import PeriVariance
from normtrain.reproduce.runner import Experiment
from normtrain.reproduce.softcap_vs_qknorm import SoftcapVsQKNorm
from normtrain.reproduce.xiong_grad_init import GradInit
from normtrain.reproduce.xiong_warmup import Warmup

EXPERIMENTS: dict[str, type[Experiment]] = {
    cls.name: cls for cls in (GradInit, Warmup, ModelUpdate, Depth, OutputChange, NormTypes, BatchNormLeak,
                               LRSensitivity, PeriVariance, CurseOfDepth, DyT, HybridDepth, DyTTokens,
                               NgptStorage, SoftcapVsQKNorm)
}
