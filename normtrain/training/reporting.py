"""Where a run reports, besides its summary: its name and folder, its metric sinks (``metrics.jsonl`` and each
``logger`` backend), and its throughput between log steps."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from omegaconf import DictConfig

from normtrain.config import to_container
from normtrain.loggers import CsvLogger, JsonlLogger, Loggers, TensorBoardLogger, WandbLogger
from normtrain.loggers.names import SweepJob, group_name, run_name
from normtrain.training.flops import mfu, peak_flops


def run_label(cfg: DictConfig) -> str:
    """Short name of a run: ``<placement>-<norm>-L<n_layers>``."""
    return f"{cfg.placement.name}-{cfg.norm.name}-L{cfg.model.n_layers}"


def hydra_run_dir() -> Path | None:
    """This job's output folder if Hydra is running us."""
    try:
        from hydra.core.hydra_config import HydraConfig
    except ImportError:
        return None
    return Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else None


def run_folder_path(cfg: DictConfig, run_dir: str | Path | None) -> str:
    """``run_dir`` if given, else Hydra's job folder, else ``outputs/<date>/<time>_<label>`` (as Hydra names it)."""
    default = Path("outputs") / time.strftime("%Y-%m-%d") / f"{time.strftime('%H-%M-%S')}_{run_label(cfg)}"
    return str(run_dir or hydra_run_dir() or default)


def build_loggers(cfg: DictConfig, run_dir: Path, job: SweepJob | None, start_step: int) -> Loggers:
    """metrics.jsonl, and each backend ``logger`` picked (``logger=[wandb,tensorboard]`` picks two)."""
    sinks: list = [JsonlLogger(run_dir / "metrics.jsonl", start_step=start_step)]
    lg = cfg.logger
    picked = [name for name, on in lg.backends.items() if on]
    if "tensorboard" in picked:
        sinks.append(TensorBoardLogger(run_dir, start_step=start_step))
    if "csv" in picked:
        sinks.append(CsvLogger(run_dir / "metrics.csv", start_step=start_step))
    if "wandb" in picked and lg.mode != "disabled":
        label = run_label(cfg)
        sinks.append(WandbLogger(
            run_dir=run_dir, project=lg.project, entity=lg.entity, group=lg.group or (job and group_name(job)),
            name=lg.run_name or (run_name(label, job) if job else label),
            tags=[cfg.norm.name, cfg.placement.name, f"L{cfg.model.n_layers}", *lg.tags],
            job_type=f"{cfg.placement.name}-{cfg.norm.name}", mode=lg.mode, config=to_container(cfg)))
    return Loggers(sinks)


class Throughput:
    """Tokens per second between log steps, evaluation time left out, and the model FLOPs utilization they mean on
    a GPU whose peak is known (normtrain/training/flops.py). ``tick`` takes the number of updates done (row
    ``step = k`` follows update k + 1), so the first row already has a rate."""

    def __init__(self, tokens_per_step: int, step: int, flops_per_token: float = 0.0,
                 device: torch.device | None = None, world_size: int = 1):
        self.tokens_per_step, self.flops_per_token, self.world_size = tokens_per_step, flops_per_token, world_size
        on_gpu = device is not None and device.type == "cuda"
        self.peak = peak_flops(torch.cuda.get_device_name(device)) if on_gpu else None
        self.restart(step)

    def restart(self, step: int) -> None:
        """Count from ``step`` (a rollback went back to it)."""
        self.last_time, self.last_step, self.excluded = time.perf_counter(), step, 0.0

    def exclude(self, seconds: float) -> None:
        self.excluded += seconds

    def tick(self, step: int) -> dict[str, float | None]:
        """``tokens_per_s`` since the last tick (None if no update was made), and ``mfu`` where it is known."""
        now = time.perf_counter()
        elapsed = max(now - self.last_time - self.excluded, 1e-9)
        rate = (step - self.last_step) * self.tokens_per_step / elapsed if step > self.last_step else None
        self.last_time, self.last_step, self.excluded = now, step, 0.0
        if self.peak and rate:
            return {"tokens_per_s": rate, "mfu": mfu(rate, self.flops_per_token, self.peak, self.world_size)}
        return {"tokens_per_s": rate}
