"""Lines for the user: printed on stderr as always, and kept in the run's log file.

Under Hydra, ``<run dir>/<job name>.log`` (``cli.log`` for ``normtrain``) receives every record of the
``normtrain`` logger: the job-logging preset ``configs/hydra/job_logging/normtrain.yaml`` gives the root logger
that file (with time stamps) and a console handler for warnings only, so a line said here appears once on the
terminal, from the print. Without Hydra (the Python API) the print alone shows it, as it always did.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("normtrain")


def say(message: str) -> None:
    """``message`` on stderr and, at INFO, in the run's log file."""
    print(message, file=sys.stderr, flush=True)
    log.info(message)
