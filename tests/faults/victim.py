"""A training run that injects one fault into itself, for the fault suite (run as a subprocess).

    python victim.py '<json>'   with keys: overrides (list), run_dir, fault: {"kind": ..., "n": ...}

Faults (n counts from 1 within this process):
  step          SIGKILL when the n-th training batch is drawn (before step n-1 of this process trains)
  ckpt_partial  SIGKILL inside the n-th checkpoint write, after half of the file's bytes are on disk
  ckpt_replace  SIGKILL after the n-th checkpoint's temp file is complete, before it replaces ckpt.pt
  metrics_line  SIGKILL after writing half of the n-th metrics.jsonl row (a line cut short)
  summary       SIGKILL inside the n-th summary.json write (the "running" one is n=1)
  enospc_ckpt   the n-th checkpoint write fails with ENOSPC (a full disk); the run goes on to its end
  eacces_folder the run folder refuses the lock file with EACCES (a read-only folder)
  dcp_partial   SIGKILL inside the n-th sharded (DCP) save, once this rank's shard file is on disk, cut to half
Under torchrun, "rank" (in "fault") picks the one rank that injects, and only the group's first attempt does
(TORCHELASTIC_RESTART_COUNT 0), so a group restarted by ``torchrun --max-restarts`` runs clean.
Then it hands over to the real CLI (``normtrain.cli.run``) when "cli" is true, else calls normtrain.training.
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import sys


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def counter(n: int):
    """A callable that is True on its n-th call."""
    calls = [0]

    def hit() -> bool:
        calls[0] += 1
        return calls[0] == n

    return hit


def inject(kind: str, n: int) -> None:
    import torch

    from normtrain import loggers
    from normtrain.checkpoint import full as checkpoint_full
    from normtrain.data import batches
    from normtrain.training import run_folder
    from normtrain.util import atomic

    hit = counter(n)
    if kind == "step":
        original_next = batches.BatchSampler.next_batch

        def next_batch(self):
            if hit():
                die()
            return original_next(self)

        batches.BatchSampler.next_batch = next_batch
    elif kind in ("ckpt_partial", "enospc_ckpt"):
        real_save = torch.save

        def save(obj, f, *args, **kwargs):
            if not hit():
                return real_save(obj, f, *args, **kwargs)
            if kind == "enospc_ckpt":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            buffer = io.BytesIO()
            real_save(obj, buffer)
            f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
            f.flush()
            os.fsync(f.fileno())
            die()

        checkpoint_full.torch = _ModuleView(torch, save=save)  # only the one-file format's view of torch.save
    elif kind == "ckpt_replace":
        real_replace = os.replace

        def replace(src, dst):
            if str(dst).endswith("ckpt.pt") and hit():
                die()
            return real_replace(src, dst)

        atomic.os = _ModuleView(os, replace=replace)
    elif kind == "metrics_line":
        real_log = loggers.JsonlLogger.log

        def log(self, metrics, step):
            if hit():
                line = json.dumps({"step": step, **atomic.json_safe(metrics)})
                self._file.write(line[: len(line) // 2])
                self._file.flush()
                die()
            return real_log(self, metrics, step)

        loggers.JsonlLogger.log = log
    elif kind == "summary":
        real_write_json = run_folder.write_json

        def write_json(path, obj):
            if hit():
                with open(path.with_name(".summary.json.victim.tmp"), "w") as f:
                    f.write(json.dumps(obj)[:40])
                die()
            return real_write_json(path, obj)

        run_folder.write_json = write_json
    elif kind == "eacces_folder":
        real_open = os.open

        def refuse(path, flags, mode=0o777, **kw):
            if str(path).endswith(run_folder.LOCK_NAME):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real_open(path, flags, mode, **kw)

        run_folder.os = _ModuleView(os, open=refuse)
    elif kind == "dcp_partial":
        from torch.distributed.checkpoint import filesystem

        real_write = filesystem.FileSystemWriter.write_data

        def write_data(self, plan, planner):
            written = real_write(self, plan, planner)
            if hit():
                for shard in os.scandir(self.path):
                    if shard.name.startswith(f"__{os.environ.get('RANK', '0')}_"):
                        os.truncate(shard.path, shard.stat().st_size // 2)
                die()
            return written

        filesystem.FileSystemWriter.write_data = write_data
    elif kind != "none":
        raise SystemExit(f"victim: unknown fault {kind!r}")


class _ModuleView:
    """A module with some functions replaced, for one importing module's eyes only."""

    def __init__(self, module, **replaced):
        self._module, self._replaced = module, replaced

    def __getattr__(self, name):
        return self._replaced.get(name) or getattr(self._module, name)


def main() -> None:
    spec = json.loads(sys.argv[1])
    fault = spec.get("fault") or {"kind": "none", "n": 0}
    rank, attempt = int(os.environ.get("RANK", "0")), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if fault.get("rank") in (None, rank) and attempt == 0:
        inject(fault["kind"], fault.get("n", 1))
    if spec.get("cli"):
        sys.argv = ["normtrain", *spec["overrides"], f"hydra.run.dir={spec['run_dir']}"]
        from normtrain.cli import run

        run()
        return
    import normtrain

    summary = normtrain.train(normtrain.compose(spec["overrides"]), run_dir=spec["run_dir"])
    print(json.dumps({"status": summary["status"], "steps": summary["steps"]}))


if __name__ == "__main__":
    main()
