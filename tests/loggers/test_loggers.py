"""Loggers: TensorBoard event files and metrics.csv hold what metrics.jsonl holds; several backends at once;
W&B group and run names; one interface, and every sink closed even when one fails; a rollback in each."""

from __future__ import annotations

import csv
import json
import math
import os
import struct
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

import normtrain
from normtrain.config import validate
from normtrain.loggers import CsvLogger, JsonlLogger, Loggers, TensorBoardLogger, WandbLogger
from normtrain.loggers.names import SweepJob, group_name, run_name
from normtrain.training.trainer import build_loggers
from normtrain.util.errors import ConfigError


def events(run_dir: Path):
    """The Event protos of the TensorBoard event files (TFRecord: length, crc, Event proto, crc), in order."""
    from tensorboardX.proto import event_pb2

    for path in sorted((run_dir / "tensorboard").glob("events.out.tfevents.*")):
        data, i = path.read_bytes(), 0
        while i < len(data):
            (length,) = struct.unpack("<Q", data[i:i + 8])
            event = event_pb2.Event()
            event.ParseFromString(data[i + 12:i + 12 + length])
            i += 12 + length + 4
            yield event


def read_events(run_dir: Path) -> dict[str, dict[int, float]]:
    """Scalars of the TensorBoard event files as {tag: {step: value}}."""
    scalars: dict[str, dict[int, float]] = {}
    for event in events(run_dir):
        for value in event.summary.value:
            if value.HasField("simple_value"):
                scalars.setdefault(value.tag, {})[event.step] = value.simple_value
    return scalars


def jsonl(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_tensorboard_and_csv_hold_the_values_of_metrics_jsonl(tiny, tmp_path):
    cfg = normtrain.compose([*tiny, "logger=[tensorboard,csv]", "placement=post"])
    normtrain.train(cfg, run_dir=tmp_path)
    rows = jsonl(tmp_path)
    events = read_events(tmp_path)
    expected = {(k, r["step"]): v for r in rows for k, v in r.items() if k != "step" and v is not None}
    got = {(k, s): v for k, by_step in events.items() for s, v in by_step.items()}
    assert got.keys() == expected.keys() and len(got) > 50  # same keys and steps; null (non-finite) left out
    assert {"act_rms/layer_1", "act_absmax/layer_1", "block_cos/layer_1"} <= {k for k, _ in got}
    assert all(got[k] == pytest.approx(v, rel=1e-6, abs=1e-30) for k, v in expected.items())  # float32 in events

    with open(tmp_path / "metrics.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [int(r["step"]) for r in table] == [r["step"] for r in rows]
    for row, record in zip(table, rows, strict=True):
        assert {k for k, v in row.items() if v != ""} == {k for k, v in record.items() if v is not None}
        assert all(float(row[k]) == v for k, v in record.items() if v is not None)  # full precision


def test_tensorboard_leaves_out_what_metrics_jsonl_writes_as_null(tmp_path):
    log = TensorBoardLogger(tmp_path)
    log.log({"train/loss": math.nan, "grad_norm/total": math.inf, "lr": 1e-3, "grad_norm/layer_0": 2.0}, 4)
    log.finish({"status": "diverged", "steps": 4})
    assert read_events(tmp_path) == {"lr": {4: pytest.approx(1e-3)}, "grad_norm/layer_0": {4: 2.0}}


def test_csv_adds_columns_as_keys_appear_and_a_resume_drops_later_rows(tmp_path):
    path = tmp_path / "metrics.csv"
    log = CsvLogger(path)
    log.log({"train/loss": 3.0, "val/loss": 3.1}, 0)
    log.log({"train/loss": 2.5, "tokens_per_s": 1e4}, 5)
    log.log({"train/loss": math.nan, "tokens_per_s": 1e4}, 10)
    log.finish({})
    assert path.read_text().splitlines() == ["step,train/loss,val/loss,tokens_per_s", "0,3.0,3.1,",
                                             "5,2.5,,10000.0", "10,,,10000.0"]
    resumed = CsvLogger(path, start_step=10)  # the checkpoint was at step 10: its row is logged again
    resumed.log({"train/loss": 2.0}, 10)
    resumed.finish({})
    assert path.read_text().splitlines()[-2:] == ["5,2.5,,10000.0", "10,2.0,,"]


def test_every_sink_is_finished_even_when_one_fails():
    finished = []

    class Sink:
        def __init__(self, name, fail=False):
            self.name, self.fail = name, fail

        def log(self, metrics, step):
            pass

        def finish(self, summary):
            finished.append(self.name)
            if self.fail:
                raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        Loggers([Sink("a", fail=True), Sink("b")]).finish({})
    assert finished == ["a", "b"]


def test_logger_choices_compose_into_backends(tmp_path):
    assert dict(normtrain.compose([]).logger.backends) == {"wandb": True}  # the default, as before
    assert dict(normtrain.compose(["logger=none"]).logger.backends) == {}
    both = normtrain.compose(["logger=[wandb,tensorboard]", "logger.project=p"])
    assert dict(both.logger.backends) == {"wandb": True, "tensorboard": True} and both.logger.project == "p"
    assert dict(normtrain.compose(["logger=[tensorboard,csv]"]).logger.backends) == {"tensorboard": True, "csv": True}
    bad = normtrain.compose(["+logger.backends.mlflow=true"])
    with pytest.raises(ConfigError, match="logger.backends='mlflow' is not known; allowed: csv, tensorboard, wandb"):
        validate(bad)


def test_wandb_group_has_the_date_and_the_name_and_runs_are_told_apart(tmp_path):
    default = SweepJob(Path("multirun/2026-05-04/12-30-00"), 7, ["norm=rmsnorm", "train.seed=1", "optim.lr=0.01",
                                                                 "train.max_steps=60"], ["norm", "train.seed"])
    assert group_name(default) == "2026-05-04_12-30-00"
    assert run_name("post-rmsnorm-L6", default) == "7_post-rmsnorm-L6 seed=1"  # norm is in the label; lr not swept
    named = tmp_path / "depth"
    named.mkdir()
    (named / "multirun.yaml").write_text("hydra: {}\n")
    made = time.strftime("%Y-%m-%d", time.localtime((named / "multirun.yaml").stat().st_mtime))
    assert group_name(SweepJob(named, 0, experiment="deepnet_depth")) == f"{made}_depth_deepnet_depth"


def test_build_loggers_names_the_wandb_run_of_a_sweep_job(tiny, tmp_path, monkeypatch):
    seen = {}

    class FakeWandb:
        def __init__(self, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr("normtrain.training.reporting.WandbLogger", FakeWandb)
    cfg = normtrain.compose([*tiny, "logger=[wandb,csv]", "placement=post"])
    job = SweepJob(Path("multirun/2026-05-04/12-30-00"), 3, ["train.seed=2"], ["train.seed"])
    sinks = build_loggers(cfg, tmp_path, job, start_step=0)
    assert [type(s).__name__ for s in sinks.sinks] == ["JsonlLogger", "CsvLogger", "FakeWandb"]
    assert seen["group"] == "2026-05-04_12-30-00" and seen["name"] == "3_post-rmsnorm-L2 seed=2"
    assert seen["tags"][:3] == ["rmsnorm", "post", "L2"]
    (tmp_path / "single").mkdir()
    single = build_loggers(cfg, tmp_path / "single", None, start_step=0)
    assert seen["group"] is None and seen["name"] == "post-rmsnorm-L2" and len(single.sinks) == 3
    cfg.logger.run_name, cfg.logger.group = "mine", "g"
    (tmp_path / "own").mkdir()
    build_loggers(cfg, tmp_path / "own", job, start_step=0)
    assert (seen["name"], seen["group"]) == ("mine", "g")
    assert OmegaConf.select(cfg, "logger.mode") == "auto" and os.environ.get("WANDB_MODE") == "offline"


ROLLBACK = {"step": 9, "restored_step": 8, "checkpoint": "/runs/a/ckpt.pt", "skipped_batches": 2, "lr_factor": 0.5,
            "lr_steps": 3, "retry": 1}


def session_starts(run_dir: Path) -> list[int]:
    """Steps of the TensorBoard purge markers (SessionLog START: hide earlier events at or after this step)."""
    from tensorboardX.proto import event_pb2

    return [e.step for e in events(run_dir)
            if e.HasField("session_log") and e.session_log.status == event_pb2.SessionLog.START]


def test_every_file_logger_records_a_rollback_and_a_resume_keeps_it(tmp_path):
    sinks = Loggers([JsonlLogger(tmp_path / "metrics.jsonl"), CsvLogger(tmp_path / "metrics.csv"),
                     TensorBoardLogger(tmp_path)])
    for step in (0, 5, 10):
        sinks.log({"train/loss": 3.0 - step / 10}, step)
    sinks.rollback(ROLLBACK)
    for step in (10, 15):
        sinks.log({"train/loss": 2.0 - step / 100}, step)
    sinks.finish({})
    rows = jsonl(tmp_path)
    assert [r["step"] for r in rows] == [0, 5, 10, 9, 10, 15]
    assert rows[3] == {"step": 9, "event": "rollback", "rollback/restored_step": 8,
                       "rollback/checkpoint": "/runs/a/ckpt.pt", "rollback/skipped_batches": 2,
                       "rollback/lr_factor": 0.5, "rollback/lr_steps": 3, "rollback/retry": 1}
    with open(tmp_path / "metrics.csv", newline="") as f:
        assert [(r["step"], r["event"]) for r in csv.DictReader(f)] == [
            ("0", ""), ("5", ""), ("10", ""), ("9", "rollback"), ("10", ""), ("15", "")]
    # TensorBoard purges the abandoned attempt from the restored step on and notes the rollback there
    assert 8 in session_starts(tmp_path) and read_events(tmp_path)["rollback/skipped_batches"] == {8: 2.0}

    # a resume from the rollback's checkpoint (step 8) drops the trailing rows from 8 on, never the event row
    JsonlLogger(tmp_path / "metrics.jsonl", start_step=8).finish({})
    CsvLogger(tmp_path / "metrics.csv", start_step=8).finish({})
    assert [r["step"] for r in jsonl(tmp_path)] == [0, 5, 10, 9]
    with open(tmp_path / "metrics.csv", newline="") as f:
        assert [r["step"] for r in csv.DictReader(f)] == ["0", "5", "10", "9"]


def test_wandb_logs_a_rollback_at_its_diverged_step():
    logged: list[dict] = []
    logger = WandbLogger.__new__(WandbLogger)  # no W&B run: only what it is handed
    logger.run = SimpleNamespace(log=logged.append)
    logger.rollback(ROLLBACK)
    assert logged == [{"step": 9, "rollback/restored_step": 8, "rollback/skipped_batches": 2,
                       "rollback/lr_factor": 0.5, "rollback/lr_steps": 3, "rollback/retry": 1}]


KEY = "k" * 40


@pytest.fixture
def wandb_home(tmp_path, monkeypatch):
    """A fresh HOME and NETRC (a netrc written by the test), no key or mode in the environment, no network: a
    connection attempt fails the test instead of waiting on a server."""
    import socket

    from wandb.sdk import wandb_setup

    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "WANDB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setattr(wandb_setup, "_singleton", None)  # wandb's settings read from this environment
    monkeypatch.setattr(socket.socket, "connect", lambda *a: pytest.fail(f"network reached: {a}"))

    def netrc(host: str) -> None:
        (tmp_path / "netrc").write_text(f"machine {host}\n  login user\n  password {KEY}\n")
        (tmp_path / "netrc").chmod(0o600)
    return netrc


def test_wandb_goes_online_with_a_key_for_a_self_hosted_server(wandb_home, monkeypatch):
    from normtrain.loggers import wandb_mode

    wandb_home("wandb.example.org")
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    mode, why = wandb_mode("auto")
    assert mode == "online" and "https://wandb.example.org" in why
    monkeypatch.delenv("WANDB_BASE_URL")  # wandb's default server: the netrc has no key for it
    monkeypatch.setattr("wandb.sdk.wandb_setup._singleton", None)
    mode, why = wandb_mode("auto")
    assert mode == "offline" and "example.org" not in why and "coreweave" not in why  # wandb 0.31's name for W&B
    assert why == ("no API key for your W&B server (wandb.ai by default, or WANDB_BASE_URL): neither WANDB_API_KEY "
                   "nor a netrc entry for its host; `wandb login` logs the next runs online")
    wandb_home("api.wandb.ai")  # `wandb login`'s entry: wandb's default server (or its proxy) finds it
    assert wandb_mode("auto")[0] == "online"
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    mode, why = wandb_mode("auto")
    assert mode == "online" and why.endswith("(WANDB_API_KEY)")
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_mode("auto") == ("offline", "WANDB_MODE=offline")
    assert wandb_mode("disabled") == ("disabled", "logger.mode=disabled")


def test_wandb_logger_says_which_mode_and_why(wandb_home, monkeypatch, tmp_path, capsys):
    import wandb

    wandb_home("api.wandb.ai")  # a key for W&B's server, but the runs go to another one
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    modes = []

    def init(mode, **_):
        modes.append(mode)
        return SimpleNamespace(define_metric=lambda *a, **k: None)

    monkeypatch.setattr(wandb, "init", init)
    WandbLogger(run_dir=tmp_path, project="p", entity=None, group=None, name="n", tags=[], job_type="j",
                mode="auto", config={})
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("W&B")]
    assert modes == ["offline"]
    assert lines == ["W&B offline: no API key for https://wandb.example.org: neither WANDB_API_KEY nor a netrc entry "
                     "for its host; `wandb login --host https://wandb.example.org` logs the next runs online"]


def test_wandb_without_wbauth_looks_up_the_netrc_itself(wandb_home, monkeypatch):
    import sys

    from normtrain.loggers import wandb_mode

    monkeypatch.setitem(sys.modules, "wandb.sdk.lib.wbauth", None)  # an older wandb: import fails
    wandb_home("wandb.example.org")
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    mode, why = wandb_mode("auto")
    assert mode == "online" and why.startswith("wandb has an API key for https://wandb.example.org (netrc ")
    monkeypatch.setenv("WANDB_BASE_URL", "https://other.example.org")
    assert wandb_mode("auto")[0] == "offline"
