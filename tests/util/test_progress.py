"""Batch-job output: plain progress lines instead of tqdm frames when stderr is no terminal, the run's lines in
cli.log, a real first tokens/s; and help that never loads torch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from normtrain.util.progress import Lines, duration

slow = pytest.mark.slow


def test_lines_say_step_loss_rate_and_eta(capsys):
    lines = Lines(total=100, initial=0, desc="post-rmsnorm-L6", every_s=0)
    lines.set_postfix(loss="2.345", lr="1.00e-03", tok_s="15234")
    lines.update(40)
    lines.set_postfix_str("val 2.400")
    lines.update(10)
    lines.close()
    lines.update(1)  # after close: silent
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and "\r" not in "".join(said)
    assert said[0].startswith("normtrain: post-rmsnorm-L6: step 40/100 (40%) · loss 2.345 · lr 1.00e-03 · 15.2k tok/s")
    assert "ETA" in said[0] and "val 2.400" in said[1] and "step 50/100" in said[1]
    quiet = Lines(total=10, initial=0, desc="x", every_s=3600)
    quiet.update(5)
    assert capsys.readouterr().err == ""  # not due yet
    quiet.close()
    assert "step 5/10" in capsys.readouterr().err  # the last state, at the end
    assert (duration(42), duration(185), duration(3725)) == ("42s", "3m05s", "1h02m")
    runs = Lines(total=2, initial=0, desc="norm_types: training runs", every_s=3600, unit="run")
    runs.update(2)
    runs.close()
    assert "training runs: run 2/2 (100%)" in capsys.readouterr().err  # runs counted as runs, not steps


@slow
def test_a_batch_job_logs_lines_not_frames_and_keeps_them_in_cli_log(tiny, tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-m", "normtrain", *tiny, "train.progress=true",
                           "train.progress_every_s=0", f"hydra.run.dir={run_dir}"],
                          cwd=tmp_path, env=env, capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"\r" not in proc.stdout + proc.stderr  # pipes are no terminal: no tqdm frames
    err = proc.stderr.decode()
    steps = [line for line in err.splitlines() if line.startswith("normtrain: pre-rmsnorm-L2: step ")]
    assert len(steps) >= 10 and "step 20/20 (100%)" in steps[-1] and " tok/s" in steps[-1]
    log = (run_dir / "cli.log").read_text()  # Hydra's job log: the same lines, time-stamped
    assert all(line in log for line in steps) and "normtrain: completed after 20 steps" in log
    assert err.count("completed after 20 steps") == 1  # said once on the terminal
    first = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert first["step"] == 0 and first["tokens_per_s"] > 0  # the first interval has a real rate


@pytest.mark.parametrize("entry", ["normtrain.cli:run", "normtrain.compare.cli:main"])
def test_help_never_imports_torch(entry):
    module, function = entry.split(":")
    script = (f"import sys\nsys.argv = ['prog', '--help']\nfrom {module} import {function}\n"
              f"try:\n    {function}()\nexcept SystemExit:\n    pass\n"
              "heavy = sorted({'torch', 'torch._dynamo', 'wandb', 'datasets'} & set(sys.modules))\n"
              "assert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage" in proc.stdout.lower() or "normtrain" in proc.stdout


SWALLOWED = """
import os, signal, sys, time
from normtrain import cli

def app():
    def job():
        try:  # a library that catches everything while it sets up
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except BaseException:
            pass
        if sys.argv[1] == "wrapped":
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")
        cli.main(None)  # the job starts: it must not train
    return job

cli._hydra_app = app
cli.run()
"""


def ctrl_c_default() -> None:
    """In the child: Ctrl-C as on a terminal, even when the suite runs as a background job (which ignores it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["swallowed", "wrapped"])
def test_ctrl_c_hidden_by_a_library_at_start_up_still_ends_in_one_line(how):
    proc = subprocess.run([sys.executable, "-c", SWALLOWED, how], capture_output=True, text=True, timeout=120,
                          preexec_fn=ctrl_c_default)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() in ("normtrain: interrupted during start-up",
                                   "normtrain: interrupted while setting up the run")  # one line, no traceback
