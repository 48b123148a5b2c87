"""``normtrain`` (and ``python -m normtrain``): the Hydra app that trains one run per job.

Exit codes (INTERFACE.md): 0 for a completed or diverged run (divergence is a result, so a multirun goes on
to its next job); 2 with a one-paragraph message for every user error, never a traceback; 130 when
interrupted; 1 only for a bug, with its traceback. User errors surface in three places:

  in a job .......... ``main`` prints a NormtrainError (a bad value, missing data, a held run folder), exits 2
  before any job .... Hydra composing the command line: an unknown option (``placement=sandwich``), a key the
                      schema lacks (``model.n_layer=3``), bad override syntax, or a run folder Hydra cannot
                      write. ``run`` has Hydra raise rather than print, shows normtrain's message (every
                      misspelt key and unknown option at once, each with a suggestion) or else Hydra's, and
                      exits 2 when the error did not come out of a job (``hydra_user_error``): the same
                      exception classes raised inside ``main`` are a bug (traceback, exit 1).
  before a sweep .... ``-m``: every job composed and validated before the first starts, whatever the launcher
                      (normtrain.config.sweep, a Hydra callback); a refusal lists each bad job, exits 2.

Under torchrun every rank composes and validates the same config: rank 0 alone says what is wrong with it, and
every rank exits 2 (torchrun then reports the failed workers and exits 1 itself, as it does for any failure).

Hydra and torch are imported inside ``run``, so that Ctrl-C during start-up ends with one line and 130.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
import traceback
from types import CodeType
from typing import TYPE_CHECKING, NoReturn

from normtrain.util.errors import ConfigError, NormtrainError
from normtrain.util.runlog import say

if TYPE_CHECKING:
    from omegaconf import DictConfig

RANK_0_GRACE_S = 60.0  # how long a rank > 0 waits for rank 0 to report the config error they share


def main(cfg: DictConfig) -> float | None:
    """Hydra's task function: one job, one run."""
    if StartUp.interrupted:  # a Ctrl-C that a library's start-up code swallowed (see StartUp)
        raise KeyboardInterrupt
    from normtrain.training.trainer import train

    _warn_if_restarts_cannot_resume()
    try:
        summary = train(cfg)
    except NormtrainError as err:
        if isinstance(err, ConfigError) and _rank() > 0:
            _let_rank_0_say_it()  # every rank validates the same config: rank 0 says what is wrong with it, once
        say(f"normtrain: {err}")
        sys.exit(2)
    if _rank() == 0:
        from normtrain.training.ending import end_line

        say(end_line(summary))
    if summary["status"] == "interrupted":
        sys.exit(130)
    return summary["final_val_loss"]  # for Hydra sweepers that optimize a value


def _rank() -> int:
    """This process's rank under torchrun (0 alone)."""
    return int(os.environ.get("RANK", "0") or 0)


def _let_rank_0_say_it() -> NoReturn:
    """Exit 2 without a word, on a rank > 0 that found the config error every rank finds, but not before rank 0
    has said it: torchrun stops every worker as soon as one has failed, so a rank that left first could cut rank
    0 off before its message. torchrun ends this wait once rank 0 has exited (SIGTERM: exit 2 here too); the
    timeout only ends it if rank 0 never fails."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(2))
    time.sleep(RANK_0_GRACE_S)
    sys.exit(2)


def _warn_if_restarts_cannot_resume() -> None:
    """Under ``torchrun --max-restarts=K`` a restarted group resumes the run folder's checkpoint, but only a folder
    given with hydra.run.dir is found again: the default one is named by the time of the start."""
    from hydra.core.hydra_config import HydraConfig

    if int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0) < 1 or _rank() > 0:
        return
    if not any(o.startswith("hydra.run.dir=") for o in HydraConfig.get().overrides.hydra):
        say("normtrain: warning: torchrun --max-restarts without hydra.run.dir=PATH: a restarted group would start a "
            "new folder (the default one is named by the time) instead of resuming this one; give hydra.run.dir")


def run() -> None:
    """Console-script entry point: Hydra's app, with its exit codes mapped onto ours (see the module doc)."""
    full_error_asked = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises instead of printing: we decide how each error is shown
    StartUp.watch()
    from normtrain.training.preemption import StartUpWatch  # no torch: signals and a thread

    StartUpWatch.enabled = True  # a Ctrl-C inside one long torch call of start-up ends the command too
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
        if _rank() > 0:  # under torchrun every rank composes the same command line: rank 0 says what is wrong
            _let_rank_0_say_it()
        _report_command_line_error(err, full_error_asked)
        sys.exit(2)
    except BaseException as err:
        _report_refused_sweep(err)
        raise


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
    rank = _rank()
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


def _report_command_line_error(err: BaseException, full_error_asked: bool) -> None:
    """One message for what Hydra stopped at. A misspelt key or an unknown group option gets normtrain's alone,
    with every other such mistake of the command line (Hydra stops at the first): Hydra would answer
    ``model.n_layer=3`` with "use +model.n_layer=3", which trains the default depth, and ``norm=groupnorm`` with
    its search path and no suggestion. Bad syntax gets Hydra's message and the override it is in; anything else
    (a wrong type, Hydra's own flags) Hydra's message."""
    from hydra.errors import OverrideParseException

    from normtrain.config.compose import group_options
    from normtrain.config.names import composition_problem, override_problems
    from normtrain.training.run_folder import write_error

    if full_error_asked:
        traceback.print_exc()
    if _unwritable(err):
        print(f"normtrain: {write_error(err, err.filename or 'the run folder')}", file=sys.stderr)
        return
    own = None if isinstance(err, OverrideParseException) else composition_problem(err)
    problems = [] if isinstance(err, OverrideParseException) else override_problems(_overrides(), group_options())
    problems = list(dict.fromkeys([own, *problems] if own else problems))
    if own is None and not full_error_asked:
        print(err, file=sys.stderr)  # Hydra's own message
        if err.__cause__ is not None and "omegaconf" in type(err.__cause__).__module__:
            print(err.__cause__, file=sys.stderr)
    if isinstance(err, OverrideParseException):
        print(f"normtrain: cannot parse the override {err.override!r}", file=sys.stderr)
    elif problems:
        print(f"normtrain: {ConfigError(problems)}", file=sys.stderr)


def _report_refused_sweep(err: BaseException) -> None:
    """A multirun whose jobs were checked before the first and refused (normtrain.config.sweep): the message of
    every failing job, exit 2. Anything else passes on (SystemExit, a bug)."""
    sweep = sys.modules.get("normtrain.config.sweep")  # a refusal comes from there: no import for other exits
    if sweep is not None and isinstance(err, sweep.SweepRefused):
        print(f"normtrain: {err.error}", file=sys.stderr)
        sys.exit(2)


def _overrides() -> list[str]:
    """The command line's overrides (``key=value``, ``group=option``), without Hydra's flags."""
    return [arg for arg in sys.argv[1:] if "=" in arg and not arg.startswith("-")]


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
