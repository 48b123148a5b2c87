"""``normtrain`` (and ``python -m normtrain``): the Hydra app that trains one run per job.

Bad input ends with a one-paragraph message and exit code 2, never a traceback; a diverged run is
a result (exit 0) so a multirun goes on to its next job.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from normtrain.config import config_dir, register_configs
from normtrain.errors import NormtrainError

register_configs()


@hydra.main(config_path=config_dir(), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from normtrain.training import train

    try:
        summary = train(cfg)
    except NormtrainError as err:
        print(f"normtrain: {err}", file=sys.stderr)
        sys.exit(2)
    val = summary["final_val_loss"]
    print(f"normtrain: {summary['status']} after {summary['steps']} steps; final val loss "
          f"{'n/a' if val is None else f'{val:.4f}'}; run folder {summary['run_dir']}", file=sys.stderr)
    if summary["status"] == "interrupted":
        sys.exit(130)
    return summary["final_val_loss"]  # for Hydra sweepers that optimize a value


if __name__ == "__main__":
    main()
