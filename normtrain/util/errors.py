"""Errors that carry a message meant for the user, not a traceback.

The CLI catches :class:`NormtrainError`, prints its message and exits non-zero; every layer of
the package raises one of these for bad input so the user learns what was wrong and what is allowed.
"""

from __future__ import annotations


class NormtrainError(Exception):
    """Base class: the message is complete and user-facing."""


class ConfigError(NormtrainError, ValueError):
    """One or more problems in a config, reported together."""

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        n = len(self.problems)
        super().__init__(f"invalid configuration ({n} problem{'s' if n != 1 else ''}):\n{lines}")


def first_line(err: BaseException, chars: int = 200) -> str:
    """``Type: the first line of its message`` (cut at ``chars``), or the type alone when the message is empty
    (a bare ``AssertionError()``): what went wrong, short enough for a one-paragraph message."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:chars]}" if text else type(err).__name__


class StudyError(NormtrainError, ValueError):
    """A study (normtrain-ablate, normtrain-compare --tune) cannot be decided as asked: bad input, a folder that
    holds another study, runs of mixed or uncommitted code. The message is whole: what is wrong and what to do."""


class DataError(NormtrainError, ValueError):
    """A corpus could not be found or read."""


class RunFolderError(NormtrainError):
    """The run folder cannot be used: held by another run, not writable, or the disk is full."""


class CheckpointError(NormtrainError):
    """A checkpoint that cannot be resumed: unreadable, non-finite, or from another experiment."""
