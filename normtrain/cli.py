"""``normtrain`` (and ``python -m normtrain``): the Hydra app that trains one run per job.

Exit codes (INTERFACE.md): 0 for a completed or diverged run (divergence is a result, so a multirun goes on
to its next job); 2 with a one-paragraph message for every user error, never a traceback; 130 when
interrupted; 1 only for a bug, with its traceback. User errors surface in two places:

  in a job .......... ``main`` prints a NormtrainError (a bad value, missing data, a held run folder), exits 2
  before any job .... Hydra composing the command line: an unknown option (``placement=sandwich``), a key the
                      schema lacks (``model.n_layer=3``), bad override syntax, also in a ``-m`` sweep (Hydra
                      composes every job of the sweep before it launches the first), or a run folder
                      Hydra cannot write. ``run`` has Hydra raise rather than print, shows the message and
                      exits 2 when the error did not come out of a job (``hydra_user_error``): the same
                      exception classes raised inside ``main`` are a bug (traceback, exit 1).

Hydra and torch are imported inside ``run``, so that Ctrl-C during start-up ends with one line and 130.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import traceback
from types import CodeType
from typing import TYPE_CHECKING, NoReturn

from normtrain.util.errors import NormtrainError
from normtrain.util.numbers import number
from normtrain.util.runlog import say

if TYPE_CHECKING:
    from omegaconf import DictConfig


def main(cfg: DictConfig) -> float | None:
    """Hydra's task function: one job, one run."""
    if StartUp.interrupted:  # a Ctrl-C that a library's start-up code swallowed (see StartUp)
        raise KeyboardInterrupt
    from normtrain.training.trainer import train

    _warn_if_restarts_cannot_resume()
    try:
        summary = train(cfg)
    except NormtrainError as err:
        say(f"normtrain: {err}")
        sys.exit(2)
    if int(os.environ.get("RANK", "0")) == 0:
        say(f"normtrain: {summary['status']} after {summary['steps']} steps; final val loss "
            f"{number(summary['final_val_loss'], 4, missing='n/a')}; run folder {summary['run_dir']}")
    if summary["status"] == "interrupted":
        sys.exit(130)
    return summary["final_val_loss"]  # for Hydra sweepers that optimize a value


def _warn_if_restarts_cannot_resume() -> None:
    """Under ``torchrun --max-restarts=K`` a restarted group resumes the run folder's checkpoint, but only a folder
    given with hydra.run.dir is found again: the default one is named by the time of the start."""
    from hydra.core.hydra_config import HydraConfig

    if int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0) < 1 or int(os.environ.get("RANK", "0")) > 0:
        return
    if not any(o.startswith("hydra.run.dir=") for o in HydraConfig.get().overrides.hydra):
        say("normtrain: warning: torchrun --max-restarts without hydra.run.dir=PATH: a restarted group would start a "
            "new folder (the default one is named by the time) instead of resuming this one; give hydra.run.dir")


def run() -> None:
    """Console-script entry point: Hydra's app, with its exit codes mapped onto ours (see the module doc)."""
    full_error_asked = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises instead of printing: we decide how each error is shown
    StartUp.watch()
    try:
        _quiet_non_zero_ranks()
        _hydra_app()()
    except KeyboardInterrupt as err:  # the training loop handles its own; this is before it (or between jobs)
        _interrupted(err)
    except Exception as err:
        if StartUp.interrupted or _caused_by_interrupt(err):  # e.g. OmegaConf failing half-way through a node
            _interrupted(KeyboardInterrupt())
        if not hydra_user_error(err):
            raise  # a bug: its whole traceback, exit 1
        if full_error_asked:
            traceback.print_exc()
        elif not _unwritable(err):
            print(err, file=sys.stderr)  # Hydra's own message (the allowed options, ...)
            if err.__cause__ is not None and "omegaconf" in type(err.__cause__).__module__:
                print(err.__cause__, file=sys.stderr)
        _add_to_hydras_message(err)
        sys.exit(2)


class StartUp:
    """Ctrl-C before the training loop. Python raises KeyboardInterrupt wherever the main thread is, and during
    start-up that can be inside Hydra's or OmegaConf's own set-up, which then fails with another error (an
    AttributeError from a half-built config node) or, where it imports plugins under ``except Exception``,
    swallows it and goes on to train. The handler remembers the signal, so each of those ends in one line, 130."""

    interrupted = False

    @classmethod
    def watch(cls) -> None:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not if the caller ignores Ctrl-C
            signal.signal(signal.SIGINT, cls._handle)

    @classmethod
    def _handle(cls, signum: int, frame) -> None:
        cls.interrupted = True
        raise KeyboardInterrupt


def _caused_by_interrupt(err: BaseException | None) -> bool:
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _hydra_app():
    """``main`` as a Hydra app reading the shipped configs."""
    import hydra

    from normtrain.config import config_dir, register_configs

    register_configs()
    return hydra.main(config_path=config_dir(), config_name="config", version_base="1.3")(main)


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


def hydra_user_error(err: BaseException | None) -> bool:
    """Whether Hydra failed on the command line or the config files rather than in a job.

    What Hydra raises while composing (a HydraException: an unknown option, bad override syntax; an OmegaConf
    error: a key the schema lacks, a wrong type) or while checking its own flags (a ValueError from Hydra's
    code, e.g. ``--cfg`` with ``-m``) is the user's to fix, and so is a folder it cannot write (``.hydra/``). The
    same classes raised in a job are a bug.
    """
    if err is None or _passed_through(err, main.__code__):
        return False
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(err, (HydraException, OmegaConfBaseException)):
        return True
    if _unwritable(err):
        return True  # Hydra writing .hydra/ into a read-only folder, or onto a full disk
    return isinstance(err, ValueError) and _raised_in_module(err).startswith("hydra.")


def _add_to_hydras_message(err: BaseException) -> None:
    """What Hydra's message leaves out. It answers ``model.n_layer=3`` with "To append to your config use
    +model.n_layer=3", which would train the default depth (``validate`` refuses it): name the key that was
    probably meant. It reports bad syntax without the override it is in: name that."""
    from hydra.errors import OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    from normtrain.config import unknown_key_problem
    from normtrain.training.run_folder import write_error

    cause = err.__cause__
    if _unwritable(err):
        print(f"normtrain: {write_error(err, err.filename or 'the run folder')}", file=sys.stderr)
    elif isinstance(err, OverrideParseException):
        print(f"normtrain: cannot parse the override {err.override!r}", file=sys.stderr)
    elif isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and cause.full_key:
        if problem := unknown_key_problem(cause.full_key):
            print(f"normtrain: {problem}", file=sys.stderr)


def _unwritable(err: BaseException) -> bool:
    """A folder or disk that refused a write (Hydra's MissingConfigException is an OSError too, with no errno)."""
    from normtrain.training.run_folder import USER_ERRNOS

    return isinstance(err, OSError) and err.errno in USER_ERRNOS


def _passed_through(err: BaseException, code: CodeType) -> bool:
    return any(frame.f_code is code for frame, _ in traceback.walk_tb(err.__traceback__))


def _raised_in_module(err: BaseException) -> str:
    frames = [frame for frame, _ in traceback.walk_tb(err.__traceback__)]
    return str(frames[-1].f_globals.get("__name__", "")) if frames else ""


def _interrupted(err: KeyboardInterrupt) -> NoReturn:
    """Ctrl-C before the training loop installed its own handling: one line, exit 130."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while we exit must not add a traceback
    where = "while setting up the run" if _passed_through(err, main.__code__) else "during start-up"
    print(f"normtrain: interrupted {where}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: an interrupt that landed in an import can leave Python's "unhandled KeyboardInterrupt" mark,
    # and the interpreter then ends itself by SIGINT (status -2) instead of 130. Nothing is open that needs closing.
    os._exit(130)


if __name__ == "__main__":
    run()
