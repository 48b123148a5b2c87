"""What the small commands (normtrain-prepare, normtrain-export, normtrain-probe) share: INTERFACE.md's exit codes.

0 done; 2 with a one-paragraph message for the user's errors (bad input, missing or damaged files, a folder the
file system refuses to write); 130 when interrupted; 1 only for a bug, with its traceback.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from normtrain.util.errors import NormtrainError


def run_command(name: str, body: Callable[[], None], checkpoint_advice: str | None = None) -> NoReturn:
    """Run ``body`` and exit with the code its outcome deserves. ``checkpoint_advice``: what to do, in this
    command's terms, about a checkpoint that cannot be used (the checkpoint's message says only what is wrong)."""
    from normtrain.training.run_folder import USER_ERRNOS

    try:
        body()
    except NormtrainError as err:
        print(f"{name}: {_advised(err, checkpoint_advice)}", file=sys.stderr)
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


def _advised(err: NormtrainError, advice: str | None) -> NormtrainError:
    if advice is None:
        return err
    from normtrain.checkpoint import UnusableCheckpoint  # torch: only once a command has failed on a checkpoint

    return err.advised(advice) if isinstance(err, UnusableCheckpoint) else err
