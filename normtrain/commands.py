"""What the small commands (normtrain-prepare, normtrain-export) share: INTERFACE.md's exit codes.

0 done; 2 with a one-paragraph message for the user's errors (bad input, missing or damaged files, a folder the
file system refuses to write); 130 when interrupted; 1 only for a bug, with its traceback.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from normtrain.util.errors import NormtrainError


def run_command(name: str, body: Callable[[], None]) -> NoReturn:
    """Run ``body`` and exit with the code its outcome deserves."""
    from normtrain.training.run_folder import USER_ERRNOS

    try:
        body()
    except NormtrainError as err:
        print(f"{name}: {err}", file=sys.stderr)
        sys.exit(2)
    except OSError as err:
        if err.errno not in USER_ERRNOS:
            raise
        print(f"{name}: could not write {err.filename or 'the output'}: {err.strerror or err}. Every file is "
              "written under a temporary name and moved into place, so nothing is left half-written; free some "
              "space or choose a writable folder, then run the same command again", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print(f"{name}: interrupted; nothing half-written was left in place", file=sys.stderr)
        sys.exit(130)
    sys.exit(0)
