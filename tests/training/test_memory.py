"""A run that cannot fit is refused before anything of its model is allocated (exit 2, with the numbers and what
would fit), and a Ctrl-C at each phase of start-up ends in one line, exit 130, and no held lock."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from warm_python import warm

import normtrain
from normtrain.training import memory
from normtrain.util.errors import ConfigError

HUGE = ["model.d_model=32768", "model.n_heads=256", "model.n_layers=48", "logger=none"]  # about 6e11 parameters


def test_the_estimate_counts_weights_gradients_and_adamw_state_and_scales_with_the_shape():
    cfg = normtrain.compose(["model.n_layers=4", "model.d_model=64", "model.n_heads=4"])
    est = memory.estimate(cfg, vocab=256)
    assert est.n_params == normtrain.build_model(cfg).num_params()
    parts = est.at()
    assert parts["weights"] == parts["gradients"] == 4 * est.n_params and parts["optimizer"] == 8 * est.n_params
    assert est.total(n_layers=8) - est.total() == pytest.approx(4 * (16 * est.block_params + (
        est.at(n_layers=8)["activations"] - parts["activations"]) / 4))
    wider = memory.estimate(normtrain.compose(["model.n_layers=4", "model.d_model=128", "model.n_heads=4"]), 256)
    assert est.at(d_model=128)["params"] == pytest.approx(wider.n_params, rel=0.02)


def test_a_model_that_cannot_fit_is_refused_with_the_numbers_and_what_fits(monkeypatch):
    monkeypatch.setattr(memory, "available", lambda device: (8e9, "available RAM (MemAvailable)"))
    with pytest.raises(ConfigError) as err:
        memory.check_fits(normtrain.compose(HUGE), 256, torch.device("cpu"))
    text = str(err.value)
    assert "does not fit in memory" in text and "6.19e+11 parameters" in text and "8 GB available RAM" in text
    assert "optimizer state 4.95 TB" in text and "model.d_model=" in text and "would fit" in text
    fitting = memory.check_fits(normtrain.compose(["model.n_layers=2"]), 256, torch.device("cpu"))
    assert fitting.total() < 8e9


def test_the_cli_refuses_a_6e11_parameter_model_in_seconds_with_exit_2(tiny, tmp_path):
    started = time.monotonic()
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONWARNINGS": "ignore"}
    proc = warm(env).run(["-m", "normtrain", *tiny, *HUGE, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path,
                         timeout=600)
    assert proc.returncode == 2, proc.stderr
    assert time.monotonic() - started < 300  # 5 s on a quiet 2-core machine; the old code allocated for minutes
    assert "does not fit in memory" in proc.stderr and "would fit" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "summary.json").exists()  # refused before the run started
    assert (tmp_path / "run" / "normtrain.lock").read_text() == ""  # released


SLOW_PHASE = """
import sys, time
import normtrain.model, normtrain.training.trainer as trainer
phase = sys.argv.pop(1)
def slow(*args, **kwargs):
    print("slow phase", flush=True)
    time.sleep(120)
def stuck(*args, **kwargs):
    print("slow phase", flush=True)
    import torch  # one long torch call (as a huge model's initialization: the GIL released, no bytecode between)
    torch.linalg.matrix_power(torch.eye(4000), 2 ** 40 - 1)  # 80 matmuls: minutes on 2 cores
if phase == "corpus":
    trainer.corpus_for = slow
else:
    built = normtrain.model.GPT.__init__
    def slow_build(self, *args, **kwargs):
        built(self, *args, **kwargs)
        if not next(self.parameters()).is_meta:  # the real build, not the memory estimate's
            (stuck if phase == "stuck" else slow)()
    normtrain.model.GPT.__init__ = slow_build
from normtrain.cli import run
sys.argv[0] = "normtrain"
run()
"""


@pytest.mark.parametrize("phase", ["corpus", "model", "stuck"])
def test_ctrl_c_while_the_corpus_loads_or_the_model_builds_exits_130_with_no_lock_held(phase, tiny, tmp_path):
    """``stuck``: the Ctrl-C comes during one long call into C (as a huge model's allocation), which Python's own
    handling would wait out; it still ends within seconds."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_PHASE, phase, *tiny, f"hydra.run.dir={run_dir}"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().strip() == "slow phase"
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == ["normtrain: interrupted while setting up the run"]
    assert (run_dir / "normtrain.lock").read_text() == ""  # released: no stale holder
    assert not (run_dir / "summary.json").exists()
