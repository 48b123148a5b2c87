"""What a probe needs from a finished run folder: its trained model, its config, and its own validation windows.

Every refusal is a ``ProbeError`` (exit 2) that says what was missing and what a run folder holds: not a folder
normtrain wrote, no checkpoint (killed before its first one, or removed), a diverged run that kept no finite
checkpoint, a corpus that is no longer there.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from normtrain.checkpoint import CKPT_NAME
from normtrain.model import GPT
from normtrain.util.errors import NormtrainError

RUN_MARKERS = ("summary.json", "metrics.jsonl", CKPT_NAME, ".hydra")


class ProbeError(NormtrainError):
    """A run folder the probe cannot read (exit 2)."""


@dataclass
class ProbeRun:
    """A trained model in eval mode on ``device`` and the fixed windows its run was evaluated on."""

    path: Path
    model: GPT
    config: DictConfig
    step: int
    status: str | None
    summary: dict[str, Any]
    batches: list[tuple[torch.Tensor, torch.Tensor]]  # the run's validation windows, in order
    device: torch.device
    notes: list[str] = field(default_factory=list)

    @property
    def n_windows(self) -> int:
        return sum(len(x) for x, _ in self.batches)

    def autocast(self):
        """bf16 on CUDA when the run trained with it (its val/loss was measured so), else full precision."""
        if self.device.type == "cuda" and self.config.train.autocast:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()


def load_probe_run(run_dir: str | Path, device: str = "auto", batch_size: int | None = None) -> ProbeRun:
    """The run at ``run_dir``, ready to probe: ProbeError for anything that is not a probe-able run folder."""
    from normtrain.training.distributed import pick_device

    path = Path(run_dir).expanduser()
    summary = _summary(path)
    model, step, config = trained_model(path, summary)
    torch_device = pick_device(device)
    if torch_device.type == "cuda" and not torch.cuda.is_available():
        raise ProbeError("--device cuda but no CUDA device is available; use --device auto or cpu")
    run = ProbeRun(path=path, model=model.to(torch_device).eval(), config=config, step=step,
                   status=summary.get("status"), summary=summary, batches=[], device=torch_device)
    run.batches = eval_windows(run, batch_size or config.train.batch_size)
    if summary.get("status") == "diverged":
        run.notes.append(f"the run diverged at step {summary.get('diverged_at_step')}; this is its last finite "
                         f"checkpoint, from step {step}")
    return run


def _summary(path: Path) -> dict[str, Any]:
    """The run's summary.json ({} when the run was killed before writing one); ProbeError if no run is here."""
    if not path.is_dir():
        raise ProbeError(f"{path} is not a folder: give a run folder, the folder a `normtrain` run wrote (it holds "
                         f"summary.json, metrics.jsonl and {CKPT_NAME})")
    if not any((path / name).exists() for name in RUN_MARKERS):
        raise ProbeError(f"{path} is not a run folder: it holds none of {', '.join(RUN_MARKERS)}; give the folder "
                         "of one run, or a folder of run folders (a multirun) to probe each")
    try:
        return json.loads((path / "summary.json").read_text()) if (path / "summary.json").is_file() else {}
    except (OSError, ValueError) as err:
        raise ProbeError(f"{path / 'summary.json'} cannot be read ({err}); was the folder damaged?") from None


def trained_model(path: Path, summary: dict[str, Any]) -> tuple[GPT, int, DictConfig]:
    """(the model of the run's checkpoint, its step, the run's resolved config): the probe's one reader of
    checkpoints (normtrain.export.run.run_model, which verifies the file and builds the model it describes)."""
    from normtrain.config import NormtrainConfig
    from normtrain.export.run import run_model

    if not (path / CKPT_NAME).is_file():
        if summary.get("status") == "diverged":
            raise ProbeError(f"the run in {path} diverged at step {summary.get('diverged_at_step')} and kept no finite "
                             f"checkpoint ({CKPT_NAME}; normtrain never saves non-finite weights): nothing to probe. "
                             "Train it again with train.ckpt_every=N to keep one from before the divergence")
        raise ProbeError(f"{path} holds no checkpoint ({CKPT_NAME}): the run was stopped before its first one, or the "
                         "file was removed. A run writes it at the end and every train.ckpt_every steps")
    model, info = run_model(path)  # CheckpointError (exit 2) for a damaged, foreign or non-finite one
    config = OmegaConf.merge(OmegaConf.structured(NormtrainConfig), info["config"])
    return model, int(info["step"]), config


def eval_windows(run: ProbeRun, batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The validation windows the run was evaluated on, exactly (the same corpus, split and ``eval_starts``), in
    batches of ``batch_size``. A corpus whose fingerprint differs from the run's gives a note, not a refusal."""
    from normtrain.config import global_batch
    from normtrain.data import eval_starts, eval_window_count, load_corpus, window_batches
    from normtrain.util.errors import DataError

    d, t = run.config.data, run.config.train
    try:
        corpus = load_corpus(d.name, d.path, d.val_fraction, d.cache_dir, progress=False)
    except DataError as err:
        where = f"data={d.name}" + (f" data.path={d.path}" if d.path else "")
        raise ProbeError(f"the run's corpus ({where}) cannot be loaded: {err}. The probe evaluates the model on the "
                         "run's own validation windows, so it needs the corpus the run trained on") from None
    recorded = (run.summary.get("corpus") or {}).get("fingerprint")
    if recorded and recorded != corpus.fingerprint:
        run.notes.append(f"the corpus changed since the run (fingerprint {corpus.fingerprint[:12]}, the run's "
                         f"{recorded[:12]}): these are not exactly the windows the run was evaluated on")
    n = run.summary.get("eval_windows") or eval_window_count(
        t.eval_windows, global_batch(t, run.summary.get("world_size", 1)), t.eval_batches,
        run.summary.get("world_size", 1))
    seq_len = run.config.model.seq_len
    return window_batches(corpus.val, eval_starts(len(corpus.val), seq_len, n), seq_len, batch_size,
                          device=run.device)
