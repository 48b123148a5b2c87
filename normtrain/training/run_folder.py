"""The run folder: one writer at a time, no stale leftovers, a summary that never outlives its run.

``RunFolder.open`` takes an exclusive ``fcntl.flock`` on ``normtrain.lock`` (which records the holder's pid and
host) before anything of the run is written. A second run on the same folder is refused with the holder's name;
a lock left by a process that died (kill -9, a crash) is released by the OS and simply taken over, with a
warning. Sweeps write one folder per job, so their jobs never meet here.

The lock file is never deleted (deleting it would let two runs lock two different files of the same name); a
released lock is an empty file. Only the holder writes into the folder, so any ``.*.tmp`` file found after
the lock is taken was left by a killed writer and is removed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from normtrain.util.atomic import TMP_GLOB, write_json
from normtrain.util.errors import RunFolderError
from normtrain.util.runlog import say

LOCK_NAME = "normtrain.lock"
SUMMARY_NAME = "summary.json"
# Errors of the file system that the user can fix: a read-only or foreign folder, a full disk or quota.
USER_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}


def write_error(err: OSError, what: str) -> RunFolderError:
    """The one-paragraph message for a write the user's file system refused (``err`` in USER_ERRNOS)."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = "free some space, then run the same command again: it resumes from the last checkpoint"
    else:
        advice = "make the folder writable or choose another one (hydra.run.dir=PATH, or run_dir= in Python)"
    return RunFolderError(f"could not write {what}: {err.strerror or err}. Files written before are intact "
                          f"(every checkpoint and summary is replaced atomically); {advice}.")


class RunFolder:
    """The folder one run writes: its lock, its summary, and the sweep of a killed writer's leftovers."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock_fd: int | None = None
        self.previous_summary: dict[str, Any] | None = None  # what the folder held before this run

    def open(self) -> RunFolder:
        """Create the folder, take the lock (or raise RunFolderError naming the holder), sweep leftovers."""
        self.path.mkdir(parents=True, exist_ok=True)  # a refused write becomes exit 2 in training.train
        fd = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunFolderError(
                f"the run folder {self.path} is in use by {holder}. Two runs writing one folder would mix their "
                "metrics and checkpoints: wait for that run to end, or give this one its own folder "
                "(hydra.run.dir=PATH; sweeps get one folder per job)") from None
        self._lock_fd = fd
        if stale := os.pread(fd, 4096, 0).decode(errors="replace").strip():  # a run that did not finish held it
            say(f"normtrain: warning: taking over the run folder {self.path}, whose lock was left by "
                f"{stale}, no longer running")
        self._record_holder()
        for tmp in self.path.glob(TMP_GLOB):  # only the holder writes here: these are a killed writer's
            if tmp.is_file():
                tmp.unlink(missing_ok=True)
        self.previous_summary = self.read_summary()
        return self

    def _record_holder(self) -> None:
        me = f"pid {os.getpid()} on host {socket.gethostname()} (since {time.strftime('%Y-%m-%d %H:%M:%S')})"
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, me.encode(), 0)

    def read_summary(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.path / SUMMARY_NAME).read_text())
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json(self.path / SUMMARY_NAME, summary)

    def close(self) -> None:
        """Release the lock, leaving an empty lock file (an empty file means: nobody holds it)."""
        if self._lock_fd is None:
            return
        fd, self._lock_fd = self._lock_fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # a full disk cannot stop us from unlocking; a stale name only costs a warning later
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
