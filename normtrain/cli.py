"""``normtrain`` (and ``python -m normtrain``): the Hydra app that trains one run per job.

Bad input ends with a one-paragraph message and exit code 2, never a traceback; a diverged run is
a result (exit 0) so a multirun goes on to its next job.
"""

from __future__ import annotations

import os
import sys
import tempfile

import hydra
from omegaconf import DictConfig

from normtrain.config import config_dir, register_configs
from normtrain.errors import NormtrainError

register_configs()


def _quiet_non_zero_ranks() -> None:
    """Under torchrun, only rank 0 gets a Hydra output folder; the others write nothing there.

    Each rank composes the config itself and would create its own time-stamped folder; the training
    loop then uses rank 0's folder on every rank.
    """
    rank = int(os.environ.get("RANK", "0"))
    if rank > 0:
        scratch = os.path.join(tempfile.gettempdir(), f"normtrain-rank{rank}-{os.getpid()}")
        sys.argv += ["hydra.output_subdir=null", f"hydra.run.dir={scratch}",
                     "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]


@hydra.main(config_path=config_dir(), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from normtrain.training import train

    try:
        summary = train(cfg)
    except NormtrainError as err:
        print(f"normtrain: {err}", file=sys.stderr)
        sys.exit(2)
    val = summary["final_val_loss"]
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"normtrain: {summary['status']} after {summary['steps']} steps; final val loss "
              f"{'n/a' if val is None else f'{val:.4f}'}; run folder {summary['run_dir']}", file=sys.stderr)
    if summary["status"] == "interrupted":
        sys.exit(130)
    return summary["final_val_loss"]  # for Hydra sweepers that optimize a value


def run() -> None:
    """Console-script entry point."""
    _quiet_non_zero_ranks()
    main()


if __name__ == "__main__":
    run()
