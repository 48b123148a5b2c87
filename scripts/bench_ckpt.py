"""Checkpoint save time and peak memory: one file (``full``) vs sharded (``dcp``) vs sharded in the background
(``dcp`` + ``train.async_ckpt``), through the project's own ``Checkpointer`` (digests and commit included).

    python scripts/bench_ckpt.py                          # 2 processes (gloo on CPU, NCCL on GPUs), FSDP, GPT-2 small
    python scripts/bench_ckpt.py --nproc 4 --strategy ddp model.n_layers=24   # any model override
    python scripts/bench_ckpt.py --tiny --repeat 1        # a smoke run of the code paths (seconds)

Each format runs in a process group of its own (torchrun, started by this script), so one format's freed but
cached memory cannot hide the next one's. Every rank builds the model (``normtrain.build_model``, the byte
vocabulary), wraps it (``train.strategy``) and takes one AdamW step so the optimizer state exists, then saves it
``--repeat`` times into a fresh folder. Per rank it records:

  blocked_s    how long the training loop is held: the whole save, or for async until DCP has staged its copy
               (median over the repeats)
  commit_s     until the checkpoint is committed (for async: ``Checkpointer.wait`` right after the save) (median)
  rss_peak_mb  the process's resident memory at its highest during any save, above its level after the set-up
               (sampled every 2 ms; freed memory the allocator kept is returned first, glibc's malloc_trim)
  rss_base_mb  that level: the model, optimizer state and gradients of this rank, and the libraries
  cuda_peak_mb on GPUs, the peak allocated device memory above the level before the save (maximum)

Prints one JSON object: the setup, and per format each rank's value and the maximum over ranks (rank 0 gathers
everything in ``full``, so its peak is the one that grows with the model).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

FORMATS = (("full", "full", False), ("dcp", "dcp", False), ("dcp+async", "dcp", True))
SIZE = ["model=gpt2_small"]  # 12 layers, d 768 (with the byte vocabulary: 85 M parameters)
TINY = ["model.n_layers=2", "model.d_model=64", "model.n_heads=2", "model.seq_len=64"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="model overrides, e.g. model.n_layers=24")
    ap.add_argument("--nproc", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--strategy", choices=("ddp", "fsdp"), default="fsdp")
    ap.add_argument("--repeat", type=int, default=3, help="saves per format (default 3; the median is reported)")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer d-64 model: a smoke test")
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp folder, removed)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--format", choices=[f[0] for f in FORMATS], default="full", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settled_rss() -> int:
    """The resident memory after the set-up, with the pages the allocator keeps for memory already freed (the
    unsharded model FSDP started from) handed back first: else a save could reuse them unseen."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the peak is then a lower bound
    return rss()


class PeakRss:
    """The resident set size's peak above ``base``, sampled by a thread."""

    def __init__(self, base: int):
        self.rss = rss
        self.start, self.peak = base, self.rss()
        self.running = True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.rss())
            time.sleep(0.002)

    def stop(self) -> float:
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.rss())
        return (self.peak - self.start) / 2**20


def one_save(ckpt, model, optimizer, step: int, base_rss: int, device) -> dict[str, float]:
    import torch

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    peak = PeakRss(base_rss)
    t0 = time.perf_counter()
    ckpt.save(model, optimizer, {"step": step})
    blocked = time.perf_counter() - t0
    ckpt.wait()
    committed = time.perf_counter() - t0
    out = {"blocked_s": blocked, "commit_s": committed, "rss_peak_mb": peak.stop()}
    if cuda:
        out["cuda_peak_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    return out


def worker(args: argparse.Namespace) -> None:
    import torch

    import normtrain
    from normtrain.checkpoint import Checkpointer
    from normtrain.training.distributed import init_distributed, wrap_model
    from normtrain.training.optim import build_optimizer

    ctx = init_distributed("auto")
    cfg = normtrain.compose([*(TINY if args.tiny else SIZE), "model.vocab_size=256", *args.overrides])
    torch.manual_seed(0)
    plain = normtrain.build_model(cfg).to(ctx.device)
    n_params = plain.num_params()
    model = wrap_model(plain, ctx, args.strategy)
    optimizer = build_optimizer(model, 1e-4, [0.9, 0.95], 1e-8, 0.1)
    x = torch.randint(0, 256, (1, cfg.model.seq_len), device=ctx.device)
    model(x, x)[1].backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    label, fmt, async_save = next(f for f in FORMATS if f[0] == args.format)
    root = Path(ctx.broadcast(str(args.dir or tempfile.mkdtemp(prefix="bench-ckpt-"))))
    base = settled_rss()
    ckpt = Checkpointer(root / label, ctx, fmt, async_save)
    saves = [one_save(ckpt, model, optimizer, step, base, ctx.device) for step in range(args.repeat)]
    ckpt.close()
    summary = {k: (max if k.endswith("_mb") else statistics.median)(s[k] for s in saves) for k in saves[0]}
    summary["rss_base_mb"] = base / 2**20
    per_rank = ctx.all_gather(summary)
    if ctx.is_main:
        size = sum(p.stat().st_size for p in (root / label).rglob("*") if p.is_file())
        print(json.dumps({"format": label, "n_params": n_params, "model": dict(cfg.model),
                          "world_size": ctx.world_size, "strategy": args.strategy, "device": str(ctx.device),
                          "device_name": torch.cuda.get_device_name(ctx.device) if ctx.device.type == "cuda"
                          else "cpu", "checkpoint_mb": round(size / 2**20, 1), "repeat": args.repeat,
                          "result": {k: {"per_rank": [round(r[k], 3) for r in per_rank],
                                         "max": round(max(r[k] for r in per_rank), 3)} for k in per_rank[0]}}))
        if args.dir is None:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
    ctx.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    report: dict = {}
    for label, _, _ in FORMATS:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}",
               __file__, "--worker", f"--format={label}", f"--strategy={args.strategy}", f"--repeat={args.repeat}",
               *(["--tiny"] if args.tiny else []), *([f"--dir={args.dir}"] if args.dir else []),
               *args.overrides]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if proc.returncode:
            return proc.returncode
        one = json.loads(proc.stdout.strip().splitlines()[-1])
        report.setdefault("results", {})[label] = {**one.pop("result"), "checkpoint_mb": one.pop("checkpoint_mb")}
        report = {**one, **report}
    report.pop("format", None)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
