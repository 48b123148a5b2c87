"""The ``normtrain`` command end to end: single runs, a multirun sweep, W&B offline, bad input."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def run_cli(args, cwd, timeout=300):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "normtrain", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_default_corpus_single_run(tiny_base, tmp_path):
    out = tmp_path / "run"
    proc = run_cli([*tiny_base, "train.max_steps=10", f"hydra.run.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["corpus"]["name"] == "python_stdlib" and summary["corpus"]["n_bytes"] > 1_000_000
    assert (out / "metrics.jsonl").is_file() and (out / ".hydra" / "config.yaml").is_file()


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


def test_divergence_exits_zero(tiny, tmp_path):
    out = tmp_path / "run"
    proc = run_cli([*tiny, "optim.lr=1e4", "optim.warmup_steps=0", "optim.grad_clip=0", "placement=post",
                    "train.max_steps=60", f"hydra.run.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "summary.json").read_text())["status"] == "diverged"


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


@pytest.mark.parametrize("args,needles", [
    (["norm.name=groupnorm"], ["norm.name='groupnorm' is not known; allowed: batchnorm, layernorm, prmsnorm, rmsnorm"]),
    (["model.n_heads=3", "model.n_layers=0"], ["2 problems", "does not divide", "model.n_layers=0"]),
    (["norm=prmsnorm", "norm.p=2"], ["norm.p=2.0"]),
    (["optim.lr=-1"], ["optim.lr=-1.0"]),
    (["data=local_text", "data.path=/no/such/dir"], ["/no/such/dir", "does not exist"]),
])
def test_bad_input_gets_a_message_not_a_traceback(args, needles, tiny_base, tmp_path):
    proc = run_cli([*tiny_base, *args, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def test_unknown_group_option_lists_choices(tiny_base, tmp_path):
    proc = run_cli([*tiny_base, "placement=sandwich"], cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "deepnorm" in proc.stderr and "post" in proc.stderr, proc.stderr
