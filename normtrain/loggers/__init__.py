"""Metric sinks, one class per backend behind one interface (``log(metrics, step)``, ``finish(summary)``).

``metrics.jsonl`` is always written (the run's own record, what normtrain-compare reads); ``logger=...`` adds
backends, several at once with ``logger=[wandb,tensorboard]``: ``wandb`` (Weights & Biases), ``tensorboard``
(event files, tensorboardX) and ``csv`` (``metrics.csv``). Each backend imports its library on first use.
"""

from normtrain.loggers.base import Logger, Loggers
from normtrain.loggers.csv import CsvLogger
from normtrain.loggers.jsonl import JsonlLogger
from normtrain.loggers.tensorboard import TensorBoardLogger
from normtrain.loggers.wandb import WandbLogger, wandb_mode

BACKENDS = ("wandb", "tensorboard", "csv")

__all__ = ["BACKENDS", "CsvLogger", "JsonlLogger", "Logger", "Loggers", "TensorBoardLogger", "WandbLogger",
           "wandb_mode"]
