"""Helpers of the prepare tests: normtrain-prepare in this process or in its own."""

from __future__ import annotations

import os
import subprocess
import sys

from normtrain.prepare import PrepareRequest, prepare


def prepare_quietly(source, out, **options) -> dict:
    return prepare(PrepareRequest(source=str(source), out_dir=str(out), progress=False, **options))


def run_prepare_cli(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
    """normtrain-prepare in its own process, offline as in CI."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "normtrain.prepare", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=timeout)
