"""The ``normtrain`` command end to end: single runs, a multirun sweep, W&B offline, bad input, exit codes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigAttributeError
from warm_python import warm

from normtrain import cli

slow = pytest.mark.slow


def run_cli(args, cwd, timeout=300):
    """``python -m normtrain ARGS`` in a process of its own, forked warm (tests/warm_python.py): the tests of the
    interpreter's start-up (Ctrl-C during it, W&B's login, a bug's traceback) start a cold one below."""
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONWARNINGS": "ignore"}
    return warm(env).run(["-m", "normtrain", *args], cwd=cwd, timeout=timeout)


@slow
def test_default_corpus_single_run(tiny_base, tmp_path):
    out = tmp_path / "run"
    proc = run_cli([*tiny_base, "train.max_steps=10", f"hydra.run.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["corpus"]["name"] == "python_stdlib" and summary["corpus"]["n_bytes"] > 1_000_000
    assert (out / "metrics.jsonl").is_file() and (out / ".hydra" / "config.yaml").is_file()


@slow
def test_multirun_2x2_writes_one_folder_per_job(tiny, tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *tiny, "train.max_steps=6", "norm=layernorm,rmsnorm", "placement=pre,deepnorm",
                    f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    jobs = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert jobs == ["0_pre-layernorm-L2", "1_deepnorm-layernorm-L2", "2_pre-rmsnorm-L2", "3_deepnorm-rmsnorm-L2"]
    for job in jobs:
        summary = json.loads((sweep / job / "summary.json").read_text())
        assert summary["status"] == "completed"
        placement, norm = job.split("_")[1].split("-")[:2]
        assert (summary["config"]["placement"]["name"], summary["config"]["norm"]["name"]) == (placement, norm)
    deep = json.loads((sweep / "1_deepnorm-layernorm-L2" / "summary.json").read_text())
    assert deep["alpha"] == pytest.approx(4 ** 0.25) and deep["beta"] == pytest.approx(16 ** -0.25)


@slow
def test_divergence_exits_zero(tiny, tmp_path):
    out = tmp_path / "run"
    proc = run_cli([*tiny, "optim.lr=1e4", "optim.warmup_steps=0", "optim.grad_clip=0", "placement=post",
                    "train.max_steps=60", f"hydra.run.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "summary.json").read_text())["status"] == "diverged"


@slow
def test_wandb_offline_run_lands_in_the_run_folder(tiny, tmp_path):
    out = tmp_path / "run"
    env_free = {k: v for k, v in os.environ.items() if k not in ("WANDB_API_KEY", "WANDB_MODE")}
    proc = subprocess.run(
        [sys.executable, "-m", "normtrain", *tiny, "train.max_steps=5", "logger=wandb", "logger.mode=auto",
         f"hydra.run.dir={out}"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**env_free, "HOME": str(tmp_path)}, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    offline = list((out / "wandb").glob("offline-run-*"))
    assert len(offline) == 1, list((out / "wandb").iterdir())


@slow
@pytest.mark.parametrize("args,needles", [
    (["norm.name=groupnorm"],
     ["norm.name='groupnorm' is not known; allowed: batchnorm, batchnorm_causal, derf, dyt, l2, layernorm, prmsnorm, "
      "rmsnorm"]),
    (["model.n_heads=3", "model.n_layers=0"], ["2 problems", "does not divide", "model.n_layers=0"]),
    (["norm=prmsnorm", "norm.p=2"], ["norm.p=2.0"]),
    (["optim.lr=-1"], ["optim.lr=-1.0"]),
    (["data=local_text", "data.path=/no/such/dir"], ["/no/such/dir", "does not exist"]),
    (["+model.n_layer=3"], ["model.n_layer is not a key of model; did you mean model.n_layers?"]),
    (["model.emb_std=-1"], ["model.emb_std=-1.0"]),
    (["optim.eps=-1"], ["optim.eps=-1.0"]),
])
def test_bad_input_gets_a_message_not_a_traceback(args, needles, tiny_base, tmp_path):
    proc = run_cli([*tiny_base, *args, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


@slow
def test_unknown_group_option_lists_choices(tiny_base, tmp_path):
    proc = run_cli([*tiny_base, "placement=pre_post"], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "deepnorm" in proc.stderr and "post" in proc.stderr, proc.stderr


@slow
@pytest.mark.parametrize("args,needles,absent", [
    (["norm=groupnorm"], ["normtrain: invalid configuration (1 problem):\n  - norm=groupnorm is not an option of norm; "
                          "did you mean norm=rmsnorm? allowed, closest first: rmsnorm, prmsnorm, layernorm, "],
     ["Config search path", "Could not find"]),  # Hydra's list after its search path, no suggestion
    (["model.n_layer=3"], ["normtrain: invalid configuration (1 problem):\n  - model.n_layer is not a key of model; "
                           "did you mean model.n_layers?"],
     ["+model.n_layer=3", "Could not override"]),  # Hydra's "use +model.n_layer=3" would train the default depth
    (["model.n_layers=["], ["no viable alternative", "cannot parse the override 'model.n_layers=['"], []),
    (["model.n_layers=abc"], ["model.n_layers"], []),
    (["--cfg", "job", "-m"], ["Only one of"], []),  # Hydra raises this one instead of reporting it
])
def test_command_line_errors_exit_2_without_a_traceback(args, needles, absent, tiny_base, tmp_path):
    proc = run_cli([*args, *tiny_base, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    for noise in absent:
        assert noise not in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()


@slow
def test_every_misspelt_key_and_unknown_option_of_the_command_line_is_named_at_once(tiny_base, tmp_path):
    proc = run_cli([*tiny_base, "model.n_layer=3", "norm=groupnorm", "optim.learning_rate=1e-3"], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("normtrain: invalid configuration (3 problems):"), proc.stderr
    for needle in ("model.n_layer is not a key of model; did you mean model.n_layers?",
                   "norm=groupnorm is not an option of norm", "optim.learning_rate is not a key of optim"):
        assert needle in proc.stderr


@slow
def test_a_bad_option_in_a_sweep_exits_2_before_any_job(tiny, tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *tiny, "placement=pre,pre_post", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "placement=pre_post is not an option of placement; did you mean placement=post?" in proc.stderr
    assert "deepnorm" in proc.stderr and "job 1 (placement=pre_post)" in proc.stderr
    assert not list(sweep.rglob("metrics.jsonl"))  # every job is checked before the first is launched


@slow
def test_help_and_cfg_still_work(tmp_path):
    proc = run_cli(["--help"], cwd=tmp_path, timeout=120)
    placements = ("placement: admin, b2t, deepnorm, hybrid, mhc, mix, ngpt, none, normformer, peri, post, pre, "
                  "reorder, resi_dual, rezero, sandwich, subln")
    assert proc.returncode == 0 and placements in proc.stdout, proc.stdout + proc.stderr
    proc = run_cli(["--cfg", "job", "placement=post"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and "name: post" in proc.stdout, proc.stderr


@slow
def test_a_bug_in_a_job_still_exits_1_with_its_traceback(tiny_base, tmp_path):
    """An OmegaConf error raised inside a job is a bug, although Hydra raises the same class for a bad key."""
    script = ("import sys\n"
              "from omegaconf import OmegaConf\n"
              "import normtrain.training.trainer\n"
              "normtrain.training.trainer.train = lambda cfg: OmegaConf.create({}, flags={'struct': True}).missing\n"
              "from normtrain.cli import run\n"
              "sys.argv = ['normtrain', *sys.argv[1:]]\n"
              "run()\n")
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", script, *tiny_base, f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "missing" in proc.stderr, proc.stderr


def test_hydra_errors_are_user_errors_only_outside_a_job(monkeypatch):
    def bug(cfg):
        raise ConfigAttributeError("a bug in the job")

    monkeypatch.setattr("normtrain.training.trainer.train", bug)
    with pytest.raises(ConfigAttributeError) as err:
        cli.main(None)
    assert not cli.hydra_user_error(err.value)  # it passed through the task function
    try:
        raise ConfigCompositionException("Could not find 'placement/sandwich'")
    except ConfigCompositionException as composing:
        assert cli.hydra_user_error(composing)
    assert not cli.hydra_user_error(RuntimeError("not Hydra's")) and not cli.hydra_user_error(None)


def wait_until_importing(pid: int, limit: float = 10.0) -> None:
    """Until the process maps its first extension module from site-packages: the interpreter has started
    and runs normtrain's imports (Hydra, torch), which take seconds. Without /proc: a fixed 0.3 s."""
    maps = Path(f"/proc/{pid}/maps")
    if not maps.exists():
        time.sleep(0.3)
        return
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if any("site-packages" in line and ".so" in line for line in maps.read_text().splitlines()):
            return
        time.sleep(0.01)


@slow
def test_ctrl_c_during_start_up_exits_130_with_one_line(tiny_base, tmp_path):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "normtrain", *tiny_base, f"hydra.run.dir={tmp_path / 'run'}"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # even as a bg job
    started = time.monotonic()
    wait_until_importing(proc.pid)
    proc.send_signal(signal.SIGINT)
    sent_after = time.monotonic() - started
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (sent_after, stderr)
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) <= 2, stderr
    assert "normtrain: interrupted during start-up" in stderr
