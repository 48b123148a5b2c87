"""One process or many (``torchrun``): rank, device, collectives and the model wrapper.

Under torchrun every rank trains on its slice of the global batch (``train.global_batch_size``, by default the
per-rank ``train.batch_size`` × world size; more is made up by gradient accumulation, see ``grad_sync``); rank 0
alone writes logs, metrics, W&B and one-file checkpoints (every rank writes its shard of a sharded one).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from normtrain.util.ranks import STRATEGIES, env_world_size, local  # noqa: F401 (moved to util/, still importable here)


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(f"cuda:{local_rank}") if name == "cuda" else torch.device(name)


@dataclass
class DistContext:
    device: torch.device
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # did we create the process group (and so must destroy it)?
    mesh: Any = None  # FSDP's DeviceMesh, once made (``device_mesh``)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's value of ``obj`` on every rank."""
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def all_reduce(self, tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
        if not self.enabled:
            return tensor
        if op == "mean":
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
            return tensor.div_(self.world_size)
        dist.all_reduce(tensor, op={"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op])
        return tensor

    def device_mesh(self) -> Any:
        """The 1-D mesh of every rank that FSDP shards over: made once and kept, so that ``close`` can release it."""
        if self.mesh is None:
            from torch.distributed.device_mesh import init_device_mesh

            self.mesh = init_device_mesh(self.device.type, (self.world_size,))
        return self.mesh

    def close(self, together: bool = True) -> None:
        """Leave the process group so that none of its threads outlives this call.

        The group's native threads (gloo's ``pt_gloo_runloop`` workers and ``gloo_tcp_loop``) stop only when
        the last object holding the group is freed; ``destroy_process_group`` unregisters it but frees nothing
        that still holds it: DDP's reducer in the run's objects, and FSDP's mesh, which torch's DTensor caches
        keep for the life of the process. Left running into interpreter exit, a worker finishing its last
        collective while Python finalizes can abort a finished run ("terminate called without an active
        exception", torchrun's ChildFailedError). So, in order: a barrier when every rank ends here together
        (``together``: a completed or diverged run; after an error or a stop mid-step a peer may be elsewhere),
        so no collective is in flight on any rank and none closes its connections while a peer still reads them;
        the group destroyed; the mesh's hold on it dropped; a collection that frees the run's objects, whose last
        reference to the group joins its threads now."""
        if not (self.owns_group and dist.is_initialized()):
            return
        if together:
            dist.barrier()
        dist.destroy_process_group()
        held = getattr(self.mesh, "_pg_registry", None)  # where the mesh keeps its groups (recent torch)
        if isinstance(held, dict):
            held.clear()
        self.mesh = None
        gc.collect()

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()


def init_distributed(device_name: str) -> DistContext:
    """Join the process group torchrun describes in the environment (NCCL on GPU, gloo on CPU)."""
    world_size = env_world_size()
    if world_size == 1:
        return DistContext(device=pick_device(device_name))
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(device_name, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    owns = not dist.is_initialized()
    if owns:
        # DDP and FSDP import torch._dynamo. Imported only then, after the group exists, something keeps the group
        # alive past close(): gloo's threads outlive the run (scripts/ddp_exit_tally.py, its test). Imported before
        # init_process_group (which then clears dynamo's cached trace rules), they do not. A one-process run never
        # imports it: 2 s saved at its start.
        importlib.import_module("torch._dynamo")

        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", **_restart_store(rank, world_size))
    return DistContext(device=device, rank=rank, world_size=world_size, local_rank=local_rank, owns_group=owns)


def _restart_store(rank: int, world_size: int) -> dict[str, Any]:
    """A group that ``torchrun --max-restarts`` started again rendezvous under keys of its own. torchrun's agent
    keeps its key-value store across attempts, so the new ranks could read the addresses the failed attempt's
    ranks published (gloo: "connectFullMesh failed ... Connection refused"), depending on who writes first."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if attempt in ("", "0"):
        return {}
    store, _, _ = next(dist.rendezvous("env://", rank, world_size))
    return {"store": dist.PrefixStore(f"normtrain/attempt_{attempt}/", store), "rank": rank, "world_size": world_size}


def wrap_model(model: nn.Module, ctx: DistContext, strategy: str) -> nn.Module:
    """DDP (gradients all-reduced) or FSDP2 (each block and the root sharded); unchanged on one process."""
    if not ctx.enabled:
        return model
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        mesh = ctx.device_mesh()
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)


@contextmanager
def grad_sync(model: nn.Module, enabled: bool) -> Iterator[None]:
    """Around one micro-batch's forward and backward: with ``enabled`` False the gradients are accumulated locally,
    not reduced across ranks (DDP's ``no_sync``, FSDP2's ``set_requires_gradient_sync``); the step's last
    micro-batch reduces them all at once."""
    if enabled or not hasattr(model, "no_sync") and not hasattr(model, "set_requires_gradient_sync"):
        yield
    elif hasattr(model, "no_sync"):
        with model.no_sync():
            yield
    else:
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)


def autocast_for(device: torch.device, enabled: bool) -> Callable[[], AbstractContextManager]:
    """A fresh context per forward pass: bf16 autocast on CUDA when ``enabled`` (``train.autocast``), else none."""
    if device.type == "cuda" and enabled:
        return lambda: torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext
