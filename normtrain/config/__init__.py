"""normtrain's config: typed schemas registered with Hydra's ConfigStore, composition, and validation.

  schema.py ........ one dataclass per group (a typo in a key or a wrong type fails while Hydra composes), the
                     allowed values of the keys whose options are fixed here
  compose.py ....... ``compose`` (the config the CLI builds), ``model_config``, ``build_model``, ``to_container``
  validation.py .... ``validate``: every problem of a config at once, one ConfigError (exit 2)
  model_checks.py .. the model groups' checks (model, norm, placement), alone and against each other
  rules.py ......... the one-key rules the checks share (finite, at least, one of, a positive scale)
  names.py ......... what a misspelt key or an unknown group option probably meant
  sweep.py ......... a multirun's jobs, each composed and validated before the first starts

Every name this package held when it was one module (``normtrain.config``) is still importable from here.
"""

from __future__ import annotations

from normtrain.config.compose import (
    build_model,
    compose,
    config_dir,
    model_config,
    register_configs,
    to_container,
    vocab_size,
    with_defaults,
)
from normtrain.config.model_checks import PLACEMENT_KEYS, QK_MIN_FEATURES
from normtrain.config.names import unknown_key_problem, unknown_option_problem
from normtrain.config.schema import (
    CKPT_FORMATS,
    DEVICES,
    GROUP_SCHEMAS,
    LOGGERS,
    MAX_SEED,
    MODEL_GROUPS,
    ON_DIVERGENCE,
    OPTIMIZERS,
    POSITIONS,
    SCHEDULES,
    WANDB_MODES,
    ZERO_MEANS,
    DataSchema,
    DebugSchema,
    LoggerSchema,
    ModelSchema,
    MonitorSchema,
    NormSchema,
    NormtrainConfig,
    OptimSchema,
    PlacementSchema,
    PrepareSchema,
    RollbackSchema,
    TrainSchema,
    checkpoint_format,
    global_batch,
)
from normtrain.config.validation import problems, validate

__all__ = [
    "CKPT_FORMATS", "DEVICES", "GROUP_SCHEMAS", "LOGGERS", "MAX_SEED", "MODEL_GROUPS", "ON_DIVERGENCE", "OPTIMIZERS",
    "PLACEMENT_KEYS", "POSITIONS", "QK_MIN_FEATURES", "SCHEDULES", "WANDB_MODES", "ZERO_MEANS", "DataSchema",
    "DebugSchema", "LoggerSchema", "ModelSchema", "MonitorSchema", "NormSchema", "NormtrainConfig", "OptimSchema",
    "PlacementSchema", "PrepareSchema", "RollbackSchema", "TrainSchema", "build_model", "checkpoint_format",
    "compose", "config_dir", "global_batch", "model_config", "problems", "register_configs", "to_container",
    "unknown_key_problem", "unknown_option_problem", "validate", "vocab_size", "with_defaults",
]
