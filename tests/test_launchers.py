"""The hydra/launcher presets (submitit: SLURM and local) compose, a local two-job sweep survives a divergence, and
every job of a sweep is checked before the first starts, whatever the launcher."""

import json
from contextlib import contextmanager
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import read_write
from test_cli import run_cli

from normtrain.config import config_dir, register_configs
from normtrain.config.sweep import SweepError, check_sweep, sweep_jobs

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


@contextmanager
def multirun(task: list[str], launcher: list[str] = ()):
    """(the master config, Hydra's config loader) of ``normtrain -m [LAUNCHER] TASK...`` as the sweep starts:
    composed without the swept values, which ``hydra.overrides.task`` keeps for the sweeper."""
    register_configs()
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        fixed = [o for o in task if "," not in o.partition("=")[2]]
        master = compose(config_name="config", overrides=[*launcher, *fixed], return_hydra_config=True)
        with read_write(master.hydra):
            master.hydra.overrides.task = list(task)
        yield master, GlobalHydra.instance().config_loader()


def refusal(task: list[str], launcher: list[str] = ()) -> str:
    with multirun(task, launcher) as (master, loader), pytest.raises(SweepError) as err:
        check_sweep(master, loader)
    return str(err.value)


def test_every_job_of_a_sweep_is_checked_and_every_problem_listed_before_the_first_starts():
    """``-m model.n_heads=2,3,4`` trained job 0 and failed job 1 (3 heads do not divide the width) before job 2."""
    message = refusal(["model.d_model=32", "model.n_heads=2,3,4", "optim.lr=1e-3,-1", "norm=rmsnorm,groupnorm"])
    assert message.startswith("the sweep was not started: 10 of its 12 jobs would fail, so none was run")
    lines = message.splitlines()
    assert lines[1:5] == [
        "  job 1 (model.n_heads=2 optim.lr=0.001 norm=groupnorm):",
        "    - norm=groupnorm is not an option of norm; did you mean norm=rmsnorm? allowed, closest first: rmsnorm, "
        "prmsnorm, layernorm, batchnorm, batchnorm_causal, derf, dyt, l2",
        "  job 2 (model.n_heads=2 optim.lr=-1 norm=rmsnorm):",
        "    - optim.lr=-1.0: the learning rate must be a finite number > 0"]
    assert "  job 4 (model.n_heads=3 optim.lr=0.001 norm=rmsnorm):" in lines
    assert "    - model.n_heads=3 does not divide model.d_model=32" in lines
    assert "  job 0 " not in message and "  job 8 " not in message  # heads 2 and 4 at lr 1e-3 with rmsnorm: fine
    assert message.endswith("Fix these values, or leave them out of the sweep, and run it again")


def test_a_problem_of_every_job_is_listed_once():
    message = refusal(["model.d_model=32", "model.n_heads=2,3", "optim.eps=-1"])
    assert message.splitlines()[1:5] == ["  every job:",
                                         "    - optim.eps=-1.0: Adam's epsilon must be a finite number > 0",
                                         "  job 1 (model.n_heads=3):",
                                         "    - model.n_heads=3 does not divide model.d_model=32"]


def test_a_slurm_sweep_is_checked_for_its_jobs_world_size_not_for_this_machines_gpu():
    """The jobs run on the cluster's nodes: the login node's lack of a GPU is no problem of theirs, and a job of
    slurm_gpu has tasks_per_node × nodes processes."""
    task = ["train.device=cuda", "train.batch_size=1", "train.global_batch_size=12,16"]
    message = refusal(task, ["hydra/launcher=slurm_gpu", "hydra.launcher.tasks_per_node=8"])
    assert "no CUDA device" not in message and "1 of its 2 jobs would fail" in message
    assert "train.global_batch_size=12 is not a multiple of train.batch_size × world size = 1 × 8 = 8" in message
    with multirun(task[1:], ["hydra/launcher=slurm"]) as (master, loader):
        check_sweep(master, loader)  # one process per job: 12 and 16 both fit


def test_an_experiments_own_sweep_is_expanded_as_hydra_does():
    with multirun(["experiment=deepnet_depth"]) as (master, loader):
        jobs = sweep_jobs(master, loader)
        assert len(jobs) == 240 and len({tuple(j) for j in jobs}) == 240  # 2 placements × 8 lrs × 3 depths × 5 seeds
        assert all("experiment=deepnet_depth" in job for job in jobs)
        check_sweep(master, loader)
    with multirun(["experiment=deepnet_depth", "hydra/sweeper=basic"]) as (master, loader):
        with read_write(master.hydra):
            master.hydra.sweeper._target_ = "hydra_plugins.some_optimizer.Sweeper"  # jobs chosen as it goes
        assert sweep_jobs(master, loader) is None


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=slurm"]])
def test_the_cli_refuses_a_sweep_with_a_bad_job_before_any_job_runs(launcher, tiny, tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *launcher, *tiny, "train.max_steps=2", "model.n_heads=2,3,4",
                    f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "the sweep was not started: 1 of its 3 jobs would fail" in proc.stderr
    assert "  job 1 (model.n_heads=3):\n    - model.n_heads=3 does not divide model.d_model=32" in proc.stderr
    assert not sweep.exists()  # no job folder, no .submitit, nothing submitted
