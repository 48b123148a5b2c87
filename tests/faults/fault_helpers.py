"""Helpers of the fault suite: run the victim script, read a run folder, compare it with a reference run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from warm_python import warm

VICTIM = Path(__file__).with_name("victim.py")
TIMING_KEYS = {"tokens_per_s", "mfu"}  # differ between any two runs; everything else must match exactly


def run_victim(overrides, run_dir, kind="none", n=1, cli=False, timeout=300) -> subprocess.CompletedProcess:
    """victim.py in a process of its own, forked warm (tests/warm_python.py)."""
    spec = {"overrides": list(overrides), "run_dir": str(run_dir), "fault": {"kind": kind, "n": n}, "cli": cli}
    return warm().run([str(VICTIM), json.dumps(spec)], cwd=Path.cwd(), timeout=timeout)


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def comparable(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows(run_dir)]


def summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


def fault_overrides(tiny: list[str]) -> list[str]:
    """A run with checkpoints every 3 steps, metrics every 2, evaluation every 5: every kind of row."""
    return [*tiny, "train.max_steps=24", "train.ckpt_every=3", "monitor.every=2", "train.eval_every=5"]
