"""The hydra/launcher presets (submitit: SLURM and local) compose, and a local two-job sweep survives a divergence."""

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from test_cli import run_cli

from normtrain.config import config_dir, register_configs

PLUGIN = "hydra_plugins.hydra_submitit_launcher.submitit_launcher"


def hydra_config(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def test_slurm_preset_composes_with_its_keys():
    cfg = hydra_config("hydra/launcher=slurm", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=4")
    launcher = cfg.hydra.launcher
    assert launcher._target_ == f"{PLUGIN}.SlurmLauncher"
    assert launcher.partition == "gpu" and launcher.gpus_per_node == 4
    for key in ("timeout_min", "tasks_per_node", "cpus_per_task", "mem_gb", "nodes", "array_parallelism",
                "additional_parameters", "max_num_timeout"):
        assert key in launcher, key
    assert cfg.model.n_layers == 6  # the run's own config is untouched


def test_slurm_gpu_preset_maps_slurm_ranks_to_torchrun_variables(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    cfg = hydra_config("hydra/launcher=slurm_gpu", "hydra.launcher.partition=gpu")
    assert cfg.hydra.launcher._target_ == f"{PLUGIN}.SlurmLauncher"
    assert cfg.hydra.launcher.gpus_per_node == cfg.hydra.launcher.tasks_per_node == 8
    assert any("MASTER_ADDR" in line for line in cfg.hydra.launcher.setup)
    assert dict(cfg.hydra.job.env_set) == {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}


@pytest.mark.parametrize("option", sorted(f.stem for f in (Path(config_dir()) / "hydra" / "launcher").glob("*.yaml")))
def test_every_launcher_preset_composes_and_instantiates(option):
    launcher = hydra_config(f"hydra/launcher={option}").hydra.launcher
    expected = "LocalLauncher" if option == "local" else "SlurmLauncher"
    assert launcher._target_ == f"{PLUGIN}.{expected}"
    assert type(instantiate(launcher)).__name__ == expected


@pytest.mark.slow
def test_local_submitit_sweep_one_job_diverges_the_other_completes(tiny, tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", "hydra/launcher=local", *tiny, "train.max_steps=10", "optim.lr=1e-3,1e4", "optim.warmup_steps=0",
            "optim.grad_clip=0", "placement=post", f"hydra.sweep.dir={sweep}"]
    proc = run_cli(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (sweep / ".submitit").is_dir()  # the jobs ran through submitit, each in its own process
    status = {job: json.loads((sweep / job / "summary.json").read_text())
              for job in ("0_post-rmsnorm-L2", "1_post-rmsnorm-L2")}
    assert status["0_post-rmsnorm-L2"]["status"] == "completed"
    assert status["0_post-rmsnorm-L2"]["steps"] == 10
    assert status["1_post-rmsnorm-L2"]["status"] == "diverged"
    assert status["1_post-rmsnorm-L2"]["diverged_at_step"] is not None
