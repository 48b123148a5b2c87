"""A resumed run logged to W&B offline: wandb opens one folder per process, both carry the run's id and its resume
mark, normtrain's ``step`` (every chart's x-axis) goes on where the first process stopped, and the hint printed at
the end is one ``wandb sync`` of both folders, naming the server as a user knows it. Real wandb, offline, in a
temporary home; nothing leaves the machine (the upload itself needs a server, which the tests do not have)."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normtrain.loggers import WandbLogger
from normtrain.loggers.wandb import CLOUD_TEXT, server_text, sync_hint

BLOCK = 32 * 1024  # the .wandb file is a LevelDB-style log: 7-byte header, records of chunks within 32 KiB blocks


def wandb_records(path: Path):
    """The Record protos of a .wandb file, in order (each split into FULL, or FIRST MIDDLE... LAST chunks)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:7]
    pos, chunks = 7, b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunks, pos = chunks + data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # FULL or LAST: a whole record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            chunks = b""
            yield record


def offline_folder(folder: Path) -> dict:
    """What one offline folder holds: its run record's id and resume mark, and normtrain's ``step`` per row."""
    (file,) = folder.glob("run-*.wandb")
    run, steps = None, []
    for record in wandb_records(file):
        if record.HasField("run"):
            run = record.run
        elif record.HasField("history"):
            steps += [int(item.value_json) for item in record.history.item
                      if (item.key or "/".join(item.nested_key)) == "step"]
    return {"file": file.name, "id": run.run_id, "resume": run.resume, "steps": steps}


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """wandb offline in a fresh home and WANDB_DIR, no key; any connection but wandb's own local service fails."""
    from wandb.sdk import wandb_setup

    for var in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_RESUME", "WANDB_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "HOME": str(tmp_path / "home"),
           "WANDB_DIR": str(tmp_path / "wandb_dir"), "WANDB_CONFIG_DIR": str(tmp_path / "home" / ".config")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(wandb_setup, "_singleton", None)
    connect = socket.socket.connect

    def local_only(sock, address):
        if sock.family == socket.AF_UNIX or address[0] in ("127.0.0.1", "::1", "localhost"):
            return connect(sock, address)
        pytest.fail(f"network reached: {address}")
    monkeypatch.setattr(socket.socket, "connect", local_only)
    return env


def logged_process(run_dir: Path, steps: range, status: str) -> None:
    """What one training process does with W&B: open the run (the run folder's id), log ``steps``, finish."""
    logger = WandbLogger(run_dir=run_dir, project="p", entity=None, group="g", name="n", tags=[], job_type="j",
                         mode="auto", config={"train": {"max_steps": 6}})
    for step in steps:
        logger.log({"train/loss": 1.0 / (step + 1)}, step=step)
    logger.finish({"status": status, "steps": steps.stop})


def test_a_resumed_offline_run_is_two_folders_of_one_run_synced_by_one_command(offline_wandb, tmp_path, capsys):
    import wandb

    run_dir = tmp_path / "run"
    logged_process(run_dir, range(0, 3), "interrupted")  # stopped at step 3 (a checkpoint there) ...
    time.sleep(1.05 - time.time() % 1)  # ... resumed in a later second: wandb names its folders to the second
    logged_process(run_dir, range(3, 6), "completed")
    wandb.teardown()  # wandb's service writes the files out as it stops: at the end of a process, here now
    run_id = (run_dir / "wandb_run_id").read_text()
    folders = sorted((run_dir / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(folders) == 2 and len(list((run_dir / "wandb").glob("offline-run-*"))) == 2
    first, resumed = map(offline_folder, folders)
    assert first["id"] == resumed["id"] == run_id and first["file"] == resumed["file"] == f"run-{run_id}.wandb"
    assert first["resume"] and resumed["resume"]  # resume="allow": at sync the later folder continues the run
    assert first["steps"] == [0, 1, 2] and resumed["steps"] == [3, 4, 5]  # the x-axis goes on, no restart at 0
    hints = [line for line in capsys.readouterr().err.splitlines() if line.startswith("W&B run saved offline")]
    assert hints[-1] == sync_hint(folders, "https://api.wandb.ai")
    assert hints[-1].endswith(f"as one run to {CLOUD_TEXT} with: wandb sync {folders[0]} {folders[1]}")
    assert hints[0] == sync_hint(folders[:1], "https://api.wandb.ai")  # the first process: its one folder
    wandb_cli = Path(sys.executable).parent / "wandb"
    help_text = subprocess.run([wandb_cli, "sync", "--help"], capture_output=True, text=True, timeout=120).stdout
    if "--dry-run" not in help_text:
        pytest.skip("this wandb's sync has no --dry-run")
    dry = subprocess.run([wandb_cli, "sync", "--dry-run", *map(str, folders)], capture_output=True, text=True,
                         timeout=120, env={**offline_wandb, "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    listed = dry.stdout + dry.stderr  # the command of the hint takes both folders' files
    assert "Would sync 2 run(s)" in listed and all(f"{f.name}/run-{run_id}.wandb" in listed for f in folders)


def test_the_server_is_named_as_a_user_knows_it():
    assert server_text("https://api.wandb.ai") == CLOUD_TEXT == server_text("https://api.forge.coreweave.com")
    assert server_text("https://wandb.example.org") == "https://wandb.example.org"
    hint = sync_hint([Path("runs/a b/wandb/offline-run-1-x")], "https://wandb.example.org")
    assert hint == ("W&B run saved offline; upload it to https://wandb.example.org with: "
                    "wandb sync 'runs/a b/wandb/offline-run-1-x'")  # quoted for a shell
