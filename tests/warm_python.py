"""Processes forked from a Python that has already imported normtrain's heavy modules, for the tests that run a
command end to end many times.

A cold ``python -m normtrain ...`` spends about 4 s of CPU importing torch, torch._dynamo and Hydra before it reads
its first argument; the CLI, fault and torchrun tests start some seventy of them. Here one server process imports
those modules once and forks a child for each command: the child is a process of its own (its own exit status,
signals, a SIGKILL in the middle of a write, its stdout and stderr, working directory and environment), running the
same ``-m normtrain`` or script as a cold start would. What a fork cannot show is the start-up itself (what
importing costs or does, a Ctrl-C during it, ``--help`` without torch): the tests of those start a cold interpreter.

    python warm_python.py MODULE...   the server: imports the modules, then one JSON request a line on stdin
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# What a command of the CLI imports before its first line of work (python -X importtime -m normtrain ...).
PRELOAD = ("torch", "normtrain.cli", "normtrain.training.trainer", "hydra.main", "hydra._internal.utils",
           "hydra.core.override_parser.overrides_parser", "logging.config", "torch.distributed.checkpoint")


class WarmPython:
    """A server started with ``env`` (read once at start-up: PYTHONWARNINGS, TRITON_INTERPRET, ...); ``run`` forks
    a command from it. One command at a time."""

    def __init__(self, env: dict[str, str] | None = None, preload: tuple[str, ...] = PRELOAD):
        self.env = dict(os.environ if env is None else env)
        self.server = subprocess.Popen([sys.executable, __file__, *preload], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, env=self.env)

    def run(self, argv: list[str], cwd: str | Path, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """``python ARGV`` (``-m MODULE ARGS`` or ``SCRIPT ARGS``) in a fresh fork, as ``subprocess.run`` with
        ``capture_output=True, text=True`` would return it; stdin is /dev/null. ``env``: the command's environment
        (default: the server's)."""
        with tempfile.TemporaryDirectory(prefix="warm-python-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {"argv": list(map(str, argv)), "cwd": str(cwd), "env": dict(self.env if env is None else env),
                       "stdout": str(out), "stderr": str(err)}
            self.server.stdin.write(json.dumps(request) + "\n")
            self.server.stdin.flush()
            pid = self._answer(60)["pid"]
            try:
                code = self._answer(timeout)["returncode"]
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._answer(60)
                raise subprocess.TimeoutExpired(argv, timeout, out.read_text(), err.read_text()) from None
            return subprocess.CompletedProcess([sys.executable, *argv], code, out.read_text(), err.read_text())

    def _answer(self, timeout: float) -> dict:
        ready, _, _ = select.select([self.server.stdout], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired(self.server.args, timeout)
        line = self.server.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm Python server ended (exit {self.server.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=60)
        self.server.stdout.close()


_servers: dict[tuple, WarmPython] = {}


def warm(env: dict[str, str] | None = None) -> WarmPython:
    """The server started with exactly ``env`` (default: this process's), started on first use and kept for the
    session (tests/conftest.py closes them)."""
    env = dict(os.environ if env is None else env)
    key = tuple(sorted((k, v) for k, v in env.items() if k != "PYTEST_CURRENT_TEST"))  # pytest sets it per test
    if key not in _servers or _servers[key].server.poll() is not None:
        _servers[key] = WarmPython(env)
    return _servers[key]


def close_all() -> None:
    while _servers:
        _servers.popitem()[1].close()


def serve(preload: list[str]) -> None:
    """Import ``preload``, then fork a child for each request; answer its pid, then its exit status."""
    for name in preload:
        importlib.import_module(name)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            become(request)
            raise SystemExit(0)  # through the interpreter's own exit (atexit hooks, flushed files), as a cold run
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


def become(request: dict) -> None:
    """In the child: the request's working directory, environment and files, then its command."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, mode in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                           (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, mode, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    first, *rest = request["argv"]
    if first == "-m":  # sys.path[0] as ``python -m`` sets it: the working directory
        sys.argv, sys.path[0] = ["-m", *rest[1:]], os.getcwd()
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
    else:  # as ``python SCRIPT`` sets it: the script's folder
        sys.argv, sys.path[0] = [first, *rest], str(Path(first).resolve().parent)
        runpy.run_path(first, run_name="__main__")


if __name__ == "__main__":
    serve(sys.argv[1:])
