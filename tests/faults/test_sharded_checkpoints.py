"""Sharded checkpoints (train.ckpt_format=dcp) in one process: kill -9 inside a sharded save leaves the previous
checkpoint valid, a run changes format on resume (dcp → full → dcp with async saves) and still ends with the rows of
an uninterrupted run, normtrain.load reads the sharded format, and a damaged or crafted one is refused (exit 2)."""

from __future__ import annotations

import enum
import io
import json
import pickle
import signal

import pytest
import torch
from fault_helpers import comparable, run_victim, summary
from test_exit_codes import assert_user_error

import normtrain
from normtrain.checkpoint import CKPT_NAME, DCP_NAME, load_checkpoint
from normtrain.checkpoint.sharded import LATEST, MANIFEST, _safe_reader, file_crc

pytestmark = pytest.mark.slow


@pytest.fixture
def reference(fault_run, tmp_path_factory):
    """fault_run's uninterrupted run, one-file format."""
    run_dir = tmp_path_factory.mktemp("reference")
    normtrain.train(normtrain.compose(fault_run), run_dir=run_dir)
    return fault_run, run_dir


def saves(run_dir) -> list[str]:
    return sorted(p.name for p in (run_dir / DCP_NAME).iterdir() if p.is_dir())


def test_kill_9_inside_a_sharded_save_then_resume_in_either_format(reference, tmp_path):
    overrides, ref = reference
    run_dir = tmp_path / "run"
    dcp = [*overrides, "train.ckpt_format=dcp"]
    proc = run_victim(dcp, run_dir, "dcp_partial", n=3)  # saves at steps 3, 6, 9: killed inside the third
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    committed = (run_dir / DCP_NAME / LATEST).read_text()
    cut = [name for name in saves(run_dir) if name != committed]
    assert committed.startswith("step_00000006-") and cut[0].startswith("step_00000009-")  # written, not committed
    assert not (run_dir / DCP_NAME / cut[0] / MANIFEST).exists()
    assert summary(run_dir)["status"] == "running"

    # resumed as one file (the sharded checkpoint is read, then replaced), killed again, then sharded with async
    proc = run_victim([*overrides, "train.ckpt_format=full"], run_dir, "step", n=8)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert "resuming from step 6" in proc.stderr and not (run_dir / DCP_NAME).exists()
    assert load_checkpoint(run_dir / CKPT_NAME)["step"] == 12
    final = normtrain.train(normtrain.compose([*dcp, "train.async_ckpt=true"]), run_dir=run_dir)
    assert final["status"] == "completed" and final["ckpt_format"] == "dcp"
    assert [r["step"] for r in final["resumes"]] == [6, 12] and not (run_dir / CKPT_NAME).exists()
    assert comparable(run_dir) == comparable(ref)  # bit for bit, whatever the formats on the way
    assert len(saves(run_dir)) == 1 and (run_dir / DCP_NAME / LATEST).read_text() == saves(run_dir)[0]
    manifest = json.loads((run_dir / DCP_NAME / saves(run_dir)[0] / MANIFEST).read_text())
    assert manifest["step"] == 24 and {".metadata", "__0_0.distcp", "state.pt"} <= set(manifest["files"])

    loaded = normtrain.load(run_dir).state_dict()  # normtrain.load / normtrain-export read the sharded format
    weights = load_checkpoint(ref / CKPT_NAME)["model"]
    assert loaded.keys() == weights.keys() and all(torch.equal(loaded[k], weights[k]) for k in weights)


class Payload:
    def __reduce__(self):
        return (print, ("the payload ran",))


@pytest.mark.parametrize("damage", ["flipped_byte", "no_manifest", "code_in_metadata"])
def test_a_damaged_sharded_checkpoint_is_refused(damage, tiny, tmp_path):
    run_dir = tmp_path / "run"
    normtrain.train(normtrain.compose([*tiny, "train.max_steps=4", "train.ckpt_format=dcp"]), run_dir=run_dir)
    folder = run_dir / DCP_NAME / (run_dir / DCP_NAME / LATEST).read_text()
    if damage == "flipped_byte":
        shard = bytearray((folder / "__0_0.distcp").read_bytes())
        shard[len(shard) // 2] ^= 0xFF
        (folder / "__0_0.distcp").write_bytes(bytes(shard))
        needles = ["is damaged", "__0_0.distcp does not match the digest", "train.resume=none"]
    elif damage == "no_manifest":
        (folder / MANIFEST).unlink()
        needles = ["is incomplete or not normtrain's", "train.resume=none"]
    else:  # a crafted index whose digest was updated too: the digest proves integrity, not intent
        (folder / ".metadata").write_bytes(pickle.dumps(Payload()))
        manifest = json.loads((folder / MANIFEST).read_text())
        manifest["files"][".metadata"] = [file_crc(folder / ".metadata"), (folder / ".metadata").stat().st_size]
        (folder / MANIFEST).write_text(json.dumps(manifest))
        needles = ["builtins.print is not part of a DCP checkpoint's metadata"]
    proc = run_victim([*tiny, "train.max_steps=8", "train.ckpt_format=dcp"], run_dir, cli=True)
    assert_user_error(proc, *needles)
    assert "the payload ran" not in proc.stdout + proc.stderr


class _ByName(pickle.Pickler):
    """Pickles enum members as ``getattr(cls, name)``: what Python 3.12+ (and Debian's 3.11.2) write by default."""

    def reducer_override(self, obj):
        return (getattr, (type(obj), obj.name)) if isinstance(obj, enum.Enum) else NotImplemented


def test_the_index_loads_when_python_pickles_enums_by_name(tmp_path):
    import torch.distributed.checkpoint as dcp

    dcp.save({"w": torch.ones(3)}, checkpoint_id=str(tmp_path), no_dist=True)
    written = _safe_reader(tmp_path).read_metadata()
    buffer = io.BytesIO()
    _ByName(buffer, protocol=4).dump(pickle.loads((tmp_path / ".metadata").read_bytes()))
    assert b"getattr" in buffer.getvalue()  # the form that was refused on those Pythons
    (tmp_path / ".metadata").write_bytes(buffer.getvalue())
    assert _safe_reader(tmp_path).read_metadata().state_dict_metadata == written.state_dict_metadata
    out = {"w": torch.zeros(3)}
    dcp.load(out, storage_reader=_safe_reader(tmp_path), no_dist=True)
    assert torch.equal(out["w"], torch.ones(3))


def test_getattr_in_the_index_reaches_nothing_but_dcp_enums(tmp_path):
    from pathlib import PosixPath  # a class the index may name, whose methods it may not reach

    (tmp_path / ".metadata").write_bytes(_reduce_pickle(getattr, (PosixPath, "unlink")))
    with pytest.raises(pickle.UnpicklingError, match="is not part of a DCP checkpoint's metadata"):
        _safe_reader(tmp_path).read_metadata()


def _reduce_pickle(fn, args) -> bytes:
    class Call:
        def __reduce__(self):
            return fn, args

    return pickle.dumps(Call(), protocol=4)
