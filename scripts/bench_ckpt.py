"""Checkpoint save time and peak memory: one file (``full``) vs sharded (``dcp``) vs sharded in the background
(``dcp`` + ``train.async_ckpt``), through the project's own ``Checkpointer`` (digests and commit included).

    python scripts/bench_ckpt.py                          # 2 processes (gloo on CPU, NCCL on GPUs), FSDP, GPT-2 small
    python scripts/bench_ckpt.py --nproc 4 --strategy ddp model.n_layers=24   # any model override
    python scripts/bench_ckpt.py --tiny --repeat 1        # a smoke run of the code paths (seconds)

It starts itself under torchrun; every rank builds the model (``normtrain.build_model``, the byte vocabulary),
wraps it (``train.strategy``) and takes one AdamW step so the optimizer state exists, then saves it ``--repeat``
times per format into a fresh folder. Per save and rank it records:

  blocked_s   how long the training loop is held: the whole save, or for async until DCP has staged its copy
  commit_s    until the checkpoint is committed (for async: ``Checkpointer.wait`` right after the save)
  rss_peak_mb the process's resident memory above what it was before the save, sampled every 2 ms
  cuda_peak_mb on GPUs, the peak allocated device memory above the level before the save

Prints one JSON object: the setup, and per format the median over repeats of each rank's value and the maximum
over ranks (rank 0 gathers everything in ``full``, so its peak is the one that grows with the model).
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
    return ap.parse_args(argv)


class PeakRss:
    """The resident set size's peak above its level at the start, sampled by a thread."""

    def __init__(self):
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self.rss()
        self.running = True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.rss())
            time.sleep(0.002)

    def stop(self) -> float:
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.rss())
        return (self.peak - self.start) / 2**20


def one_save(ckpt, model, optimizer, step: int, async_save: bool, device) -> dict[str, float]:
    import torch

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    rss = PeakRss()
    t0 = time.perf_counter()
    ckpt.save(model, optimizer, {"step": step})
    blocked = time.perf_counter() - t0
    ckpt.wait()
    committed = time.perf_counter() - t0
    out = {"blocked_s": blocked, "commit_s": committed, "rss_peak_mb": rss.stop()}
    if cuda:
        out["cuda_peak_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    return out


def worker(args: argparse.Namespace) -> None:
    import torch

    import normtrain
    from normtrain.checkpoint import Checkpointer
    from normtrain.distributed import init_distributed, wrap_model
    from normtrain.optim import build_optimizer

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
    root = Path(ctx.broadcast(str(args.dir or tempfile.mkdtemp(prefix="bench-ckpt-"))))
    results = {}
    for label, fmt, async_save in FORMATS:
        ckpt = Checkpointer(root / label, ctx, fmt, async_save)
        saves = [one_save(ckpt, model, optimizer, step, async_save, ctx.device) for step in range(args.repeat)]
        ckpt.close()
        per_rank = ctx.all_gather({k: statistics.median(s[k] for s in saves) for k in saves[0]})
        results[label] = {k: {"per_rank": [round(r[k], 3) for r in per_rank],
                              "max": round(max(r[k] for r in per_rank), 3)} for k in per_rank[0]}
        ctx.barrier()
    if ctx.is_main:
        size = sum(p.stat().st_size for p in (root / "dcp").rglob("*") if p.is_file())
        print(json.dumps({"n_params": n_params, "model": dict(cfg.model), "world_size": ctx.world_size,
                          "strategy": args.strategy, "device": str(ctx.device),
                          "device_name": torch.cuda.get_device_name(ctx.device) if ctx.device.type == "cuda"
                          else "cpu", "checkpoint_mb": round(size / 2**20, 1), "repeat": args.repeat,
                          "results": results}, indent=1))
        if args.dir is None:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
    ctx.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}",
           __file__, "--worker", f"--strategy={args.strategy}", f"--repeat={args.repeat}",
           *(["--tiny"] if args.tiny else []), *([f"--dir={args.dir}"] if args.dir else []), *args.overrides]
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
