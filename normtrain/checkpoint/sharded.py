"""The sharded format (``train.ckpt_format=dcp``, the default under torchrun): torch.distributed.checkpoint (DCP),
the engine torchtitan and OLMo-core use. Every rank writes its own shard; nothing is gathered on rank 0.

    <run dir>/ckpt.dcp/
        LATEST                     the name of the one committed checkpoint (replaced atomically: the commit)
        step_00000120-3fa2c1/      one save: __<rank>_0.distcp (each rank's tensors), .metadata (DCP's index),
                                   state.pt (rank 0: the step, data position, RNG, monitor, config, ...),
                                   manifest.json (the CRC-32 and size of every file; written last)

A save writes a new folder, and only when every rank's files are on disk and digested does rank 0 write the
manifest and then point LATEST at the folder; older folders are removed after that. A crash at any moment (kill -9
of one rank mid-write) leaves LATEST naming the previous, complete checkpoint; leftovers are swept by the next
commit. With ``train.async_ckpt`` DCP writes from a background thread (a copy of the state is staged first, so
training may change the weights at once) over a gloo group of its own; the commit waits for the next point where
every rank is in step anyway (``Checkpointer.poll`` at log steps, the next save, a rollback, the end).

The one-file format's safety carries over: DCP is given tensors only (it would store anything else as a pickle,
loaded with ``weights_only=False``); the rest goes to ``state.pt``, which loads with ``weights_only=True``; DCP's
own ``.metadata`` pickle is read by an unpickler that accepts DCP's metadata classes and nothing else; and every
file's CRC-32 is checked (each rank checks its share) before anything is loaded.
"""

from __future__ import annotations

import enum
import io
import json
import pickle
import secrets
import shutil
import warnings
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normtrain.checkpoint.identify import what_it_is
from normtrain.checkpoint.state import (
    UnusableCheckpoint,
    all_finite,
    merge,
    rng_states,
    set_rng_states,
    split_tensors,
    unwrap,
)
from normtrain.util.atomic import atomic_write, write_json
from normtrain.util.hashing import blocks
from normtrain.util.optimizers import optimizers_of

DCP_NAME = "ckpt.dcp"
LATEST = "LATEST"
MANIFEST = "manifest.json"
STATE = "state.pt"
FORMAT = "normtrain-dcp/1"
# DCP warns on every single-process save or load (also from its async writer's thread) that it assumes one
# process: with train.ckpt_format=dcp on one process, and in normtrain-export, that is the intent.
warnings.filterwarnings("ignore", message="torch.distributed is (disabled|unavailable)", category=UserWarning)


def latest_folder(root: Path) -> Path | None:
    """The committed checkpoint under ``root`` (a ``ckpt.dcp`` folder), or None when nothing was committed."""
    try:
        name = (root / LATEST).read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return root / name


def file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        for block in blocks(f):
            crc = zlib.crc32(block, crc)
    return crc


def _written_by(folder: Path, rank: int) -> dict[str, list[int]]:
    """{file name: [crc32, bytes]} of the files this rank wrote into ``folder`` (rank 0 also DCP's index and
    state.pt)."""
    names = [p.name for p in folder.glob(f"__{rank}_*.distcp")]
    if rank == 0:
        names += [".metadata", STATE]
    return {name: [file_crc(folder / name), (folder / name).stat().st_size] for name in sorted(names)}


def _dcp_enum_member(cls: Any, name: str) -> enum.Enum:
    """What ``getattr`` may do inside DCP's index: name a member of one of DCP's own enums. Python 3.12 (and
    Debian's 3.11.2) pickle an enum member as ``getattr(Enum class, name)``, 3.11.7 as ``Enum class(value)``."""
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum) and cls.__module__ == _DCP_METADATA):
        raise pickle.UnpicklingError(f"getattr({cls!r}, {name!r}) is not part of a DCP checkpoint's metadata")
    return cls[name]


_DCP_METADATA = "torch.distributed.checkpoint.metadata"


class _MetadataUnpickler(pickle.Unpickler):
    """DCP's ``.metadata`` is a pickle; this one builds DCP's own metadata classes and refuses any other global,
    so a crafted file cannot run code (``weights_only`` for the index)."""

    ALLOWED = {("torch", "Size"), ("torch.serialization", "_get_layout"), ("pathlib", "PosixPath"),
               ("pathlib", "PurePosixPath"), ("collections", "OrderedDict"),
               ("torch.distributed.checkpoint.filesystem", "_StorageInfo")}

    def find_class(self, module: str, name: str) -> Any:
        if module == _DCP_METADATA or (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        if (module, name) == ("builtins", "getattr"):
            return _dcp_enum_member
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a DCP checkpoint's metadata")


def _safe_reader(folder: Path):
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any):
            with open(self._get_metadata_path(kwargs.get("rank")), "rb") as f:
                metadata = _MetadataUnpickler(io.BytesIO(f.read())).load()
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(str(folder))


def dcp_state(model: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """The model's (and optimizer's) state dicts keyed by parameter name, this rank's shards under FSDP: what
    DCP saves and loads in place (it reshards to any world size)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    model = unwrap(model)
    if optimizer is None:
        return {"model": get_model_state_dict(model)}
    model_state, optim_state = get_state_dict(model, optimizers_of(optimizer))
    return {"model": model_state, "optimizer": optim_state}


@dataclass
class _Pending:
    folder: Path
    step: int
    future: Future  # this rank's {file: [crc, bytes]} once its files are on disk


class ShardedWriter:
    """Writes sharded checkpoints into ``<run dir>/ckpt.dcp`` and commits them (see the module doc); at most one
    save is pending, and every method is called by every rank at the same point of the loop."""

    def __init__(self, run_dir: Path, ctx, async_save: bool):
        import torch.distributed as dist

        self.root, self.ctx, self.async_save = Path(run_dir) / DCP_NAME, ctx, async_save
        self.group = dist.new_group(backend="gloo") if async_save and ctx.enabled else None  # a collective
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="normtrain-dcp") if async_save else None
        self.pending: _Pending | None = None

    def save(self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        """Start writing ``state`` (the step, data position, ...: everything but weights and optimizer) with the
        model's and optimizer's shards; commit at once unless asynchronous."""
        import torch.distributed.checkpoint as dcp

        self.wait()  # the previous one first: one save in flight
        tensors, tensorless = split_tensors(dcp_state(model, optimizer))
        if not all_finite(tensors["model"]):
            raise ValueError("refusing to save non-finite weights as a resume point")  # the loop checks first
        ctx = self.ctx
        folder = self.root / ctx.broadcast(f"step_{state['step']:08d}-{secrets.token_hex(3)}")
        if ctx.is_main:
            folder.mkdir(parents=True, exist_ok=True)  # (the other ranks' writers may create it first)
            plain = {**state, "tensorless": tensorless, "rng": rng_states(), "format": FORMAT}
            atomic_write(folder / STATE, lambda f: torch.save(plain, f))
        writer = dcp.FileSystemWriter(str(folder), sync_files=True)
        if self.async_save:  # returns once the state is staged (copied); the writing goes on in a thread
            upload = dcp.async_save(tensors, storage_writer=writer, process_group=self.group, no_dist=not ctx.enabled)
            self.pending = _Pending(folder, state["step"], self.executor.submit(self._written, upload, folder))
            return
        dcp.save(tensors, storage_writer=writer, no_dist=not ctx.enabled)
        done: Future = Future()
        done.set_result(_written_by(folder, ctx.rank))
        self.pending = _Pending(folder, state["step"], done)
        self.wait()

    def _written(self, upload: Future, folder: Path) -> dict[str, list[int]]:
        upload.result()
        return _written_by(folder, self.ctx.rank)

    def poll(self) -> bool:
        """At a point where every rank is in step: commit the pending save if every rank has written its part.
        True when a save was committed."""
        if self.pending is None:
            return False
        done = torch.tensor([float(self.pending.future.done())], device=self.ctx.device)
        if self.ctx.enabled:
            done = self.ctx.all_reduce(done, "min")
        return bool(done.item()) and self.wait()

    def wait(self) -> bool:
        """Wait for the pending save on every rank, then commit it (rank 0): manifest, LATEST, old folders gone.
        True when a save was committed."""
        if self.pending is None:
            return False
        pending, self.pending = self.pending, None
        files: dict[str, list[int]] = {}
        for part in self.ctx.all_gather(pending.future.result()):
            files.update(part)
        if self.ctx.is_main:
            manifest = {"format": FORMAT, "step": pending.step, "world_size": self.ctx.world_size,
                        "files": dict(sorted(files.items()))}
            write_json(pending.folder / MANIFEST, manifest)
            atomic_write(self.root / LATEST, lambda f: f.write(pending.folder.name.encode()))
            for old in self.root.iterdir():
                if old.name not in (LATEST, pending.folder.name):
                    shutil.rmtree(old) if old.is_dir() else old.unlink(missing_ok=True)
        return True

    def close(self, failed: bool = False) -> None:
        """Stop the writer thread and the checkpoint group. A pending save is left uncommitted (LATEST keeps the
        previous one): the loop waits for it where the run ends well (``Checkpointer.wait``); after a failure
        another rank may be gone, so nothing waits for it."""
        self.pending = None
        if self.executor is not None:
            self.executor.shutdown(wait=not failed, cancel_futures=True)
        if self.group is not None and not failed:
            import torch.distributed as dist

            dist.destroy_process_group(self.group)
        self.group = None


@dataclass(frozen=True)
class ShardedCheckpoint:
    """One committed sharded save: ``read`` verifies every file's digest and loads the small state,
    ``restore`` loads the shards into a model and optimizer of any world size (DCP reshards)."""

    path: Path
    format = "dcp"

    def manifest(self) -> dict[str, Any]:
        try:
            manifest = json.loads((self.path / MANIFEST).read_text())
        except (OSError, ValueError):
            manifest = None
        if not (isinstance(manifest, dict) and manifest.get("format") == FORMAT
                and isinstance(manifest.get("files"), dict)):
            raise UnusableCheckpoint(f"the sharded checkpoint {self.path} is incomplete or not normtrain's (no "
                                     f"readable {MANIFEST}, which a save writes last)")
        return manifest

    def read(self, ctx=None) -> dict[str, Any]:
        """The state besides weights and optimizer, after every file's CRC-32 was checked (split among ranks)."""
        files = self.manifest()["files"]
        names = sorted(files)
        share = names[ctx.rank::ctx.world_size] if ctx is not None else names
        problems = [p for name in share if (p := self._check(name, *files[name]))]
        if ctx is not None and ctx.enabled:
            problems = [p for part in ctx.all_gather(problems) for p in part]
        if problems:
            raise UnusableCheckpoint(f"the sharded checkpoint {self.path} is damaged ({'; '.join(problems[:3])})")
        try:
            _safe_reader(self.path).read_metadata()
        except Exception as err:  # intact (the digests match) but not what DCP writes: refused before any load
            raise UnusableCheckpoint(f"the sharded checkpoint {self.path} has an index (.metadata) that DCP did not "
                                     f"write ({err}); it is not loaded") from None
        try:
            return torch.load(self.path / STATE, map_location="cpu", weights_only=True)
        except Exception as err:
            raise UnusableCheckpoint(f"the checkpoint state {self.path / STATE} cannot be read: it "
                                     f"{what_it_is(self.path / STATE, err)}") from None

    def _check(self, name: str, crc: int, size: int) -> str | None:
        path = self.path / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size or file_crc(path) != crc:
            return f"{name} does not match the digest written with it"
        return None

    def restore(self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any], ctx=None) -> None:
        """Load the shards into ``model`` and ``optimizer`` (wrapped, sharded or plain) and set the RNG states."""
        from torch.distributed.checkpoint.state_dict import set_state_dict

        tensors = self._load(model, optimizer, ctx)
        whole = merge(tensors, state["tensorless"])
        set_state_dict(unwrap(model), optimizers_of(optimizer), model_state_dict=whole["model"],
                       optim_state_dict=whole["optimizer"])
        set_rng_states(state["rng"])

    def load_weights(self, model: nn.Module, state: dict[str, Any]) -> None:
        """The weights alone, into a plain model in one process (normtrain-export, normtrain.load)."""
        self._load(model, None, None)

    def _load(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, ctx) -> dict[str, Any]:
        import torch.distributed.checkpoint as dcp

        tensors, _ = split_tensors(dcp_state(model, optimizer))
        try:
            dcp.load(tensors, storage_reader=_safe_reader(self.path), no_dist=ctx is None or not ctx.enabled)
        except Exception as err:
            first = " ".join(str(err).strip().splitlines()[:3])[:300] or type(err).__name__
            raise UnusableCheckpoint(f"the sharded checkpoint {self.path} does not fit this model ({first}): it comes "
                                     "from another architecture (another model config), or is damaged") from None
        finite = torch.tensor([float(all_finite(tensors["model"]))], device=ctx.device if ctx else "cpu")
        if ctx is not None and ctx.enabled:
            finite = ctx.all_reduce(finite, "min")
        if not finite.item():
            raise UnusableCheckpoint(f"the checkpoint {self.path} holds non-finite weights (the run had diverged)")
        return tensors
