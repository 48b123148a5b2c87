"""Training throughput and MFU of the norms at a GPT-2-small-like size, eager and compiled (a GPU benchmark).

    python scripts/bench_train.py                     # CUDA: writes experiments/throughput/<device>.json and .md
    python scripts/bench_train.py --device cpu --tiny  # a smoke run of the code paths on CPU (about 20 s)
    python scripts/bench_train.py model.n_layers=24    # any config override, as on the normtrain command line

Each variant (LayerNorm; RMSNorm with norm.impl=torch; RMSNorm with norm.impl=triton) is built with
``normtrain.compose`` + ``normtrain.build_model`` and trained on random bytes (no dataset) with the
project's AdamW (fused on CUDA) under bf16 autocast, the step the training loop runs without its
diagnostics: forward, backward, gradient clipping, update. After ``--warmup`` steps (compilation happens
there) the next ``--steps`` are timed between two ``torch.cuda.synchronize()`` calls.
MFU = tokens/s × FLOPs per token (``normtrain.training.flops``: 6N + 12·L·d·T) / the device's dense bf16 peak;
it is left empty on a device whose peak is not known.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import json
import os
import re
import sys
import time
from pathlib import Path

import torch
from torch._dynamo.utils import counters

import normtrain
from normtrain.training.flops import mfu, model_flops_per_token, peak_flops
from normtrain.training.optim import build_optimizer
from normtrain.util.provenance import code_state

VARIANTS = (  # (label, norm, norm.impl)
    ("LayerNorm", "layernorm", "torch"),
    ("RMSNorm (torch)", "rmsnorm", "torch"),
    ("RMSNorm (Triton)", "rmsnorm", "triton"),
)
SIZE = ["model=gpt2_small"]  # 12 layers, d 768, 12 heads, seq 1024, GELU MLP 3072
TINY = ["model.n_layers=2", "model.d_model=64", "model.n_heads=2", "model.seq_len=64", "model.d_ff=256"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="config overrides, e.g. model.n_layers=24")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer d-64 model and 1+2 steps: a smoke test")
    ap.add_argument("--batch-size", type=int, default=None, help="sequences per step (default 16; 4 with --tiny)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 10; 1 with --tiny)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 30; 2 with --tiny)")
    ap.add_argument("--modes", default="eager,compiled", help="comma-separated: eager, compiled")
    ap.add_argument("--compile-backend", default=None,
                    help="torch.compile backend (default inductor; aot_eager with --tiny on CPU, where inductor's "
                         "C++ build alone takes a minute)")
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode, e.g. max-autotune (default: default)")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON file (default experiments/throughput/<device-slug>.json, outputs/bench/ with --tiny); "
                         "the markdown table goes next to it (.md)")
    args = ap.parse_args(argv)
    args.batch_size = args.batch_size or (4 if args.tiny else 16)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.tiny else 10)
    args.steps = args.steps or (2 if args.tiny else 30)
    args.compile_backend = args.compile_backend or ("aot_eager" if args.tiny and args.device == "cpu" else "inductor")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if bad := [m for m in args.modes if m not in ("eager", "compiled")]:
        ap.error(f"--modes: unknown {', '.join(bad)}; allowed: eager, compiled")
    return args


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"


def slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def versions() -> dict:
    """torch, CUDA, Triton and the code's commit (short) and whether it was modified, for the record."""
    try:
        triton = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        triton = None
    code = code_state()
    commit = code["code_commit"] and code["code_commit"][:7]
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton, "git_commit": commit,
            "code_dirty": code["code_dirty"]}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_one(overrides: list[str], compiled: bool, args, device: torch.device) -> dict:
    """Build one variant, run warm-up and timed steps, and return its measurements."""
    cfg = normtrain.compose(overrides)
    torch.manual_seed(0)
    model = normtrain.build_model(cfg).to(device)
    o = cfg.optim
    optimizer = build_optimizer(model, o.lr, o.betas, o.eps, o.weight_decay)
    params = [p for p in model.parameters() if p.requires_grad]
    flops = model_flops_per_token(model)
    step_model = torch.compile(model, backend=args.compile_backend, mode=args.compile_mode) if compiled else model
    B, T = args.batch_size, cfg.model.seq_len
    # a few batches of random bytes, made before the clock starts (the data loader is not measured)
    batches = [torch.randint(0, model.cfg.vocab_size, (B, T + 1), device=device) for _ in range(4)]
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda"
                else contextlib.nullcontext())

    def step(i: int) -> torch.Tensor:
        tokens = batches[i % len(batches)]
        with autocast:
            _, loss = step_model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        if o.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, o.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    counters.clear()
    t0 = time.perf_counter()
    for i in range(args.warmup):
        step(i)
    synchronize(device)
    warmup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(args.steps):
        loss = step(args.warmup + i)
    synchronize(device)
    elapsed = time.perf_counter() - t0
    tokens_per_s = args.steps * B * T / elapsed
    return {
        "tokens_per_s": tokens_per_s, "step_ms": 1000 * elapsed / args.steps, "warmup_s": warmup_s,
        "flops_per_token": flops, "final_loss": loss.item(),
        "max_mem_gb": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        "fused_adamw": bool(optimizer.defaults.get("fused")), "n_params": sum(p.numel() for p in params),
        # compiled mode: graphs dynamo built (1 forward graph is the goal) and the graph breaks it hit
        "graphs": counters["stats"]["unique_graphs"] if compiled else None,
        "graph_breaks": sum(counters["graph_break"].values()) if compiled else None,
    }


def run(args, argv: list[str]) -> dict:
    device = torch.device(args.device)
    name = device_name(device)
    peak = peak_flops(name) if device.type == "cuda" else None
    base = [*SIZE, *(TINY if args.tiny else []), "logger=none", f"train.device={args.device}", *args.overrides]
    cfg = normtrain.compose(base)
    report = {
        "device": name, "device_slug": slug(name) if device.type == "cuda" else "cpu",
        "peak_bf16_flops": peak, **versions(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", "scripts/bench_train.py", *argv]),
        "model": {k: cfg.model[k] for k in ("n_layers", "d_model", "n_heads", "seq_len", "mlp", "d_ff", "pos")},
        "batch_size": args.batch_size, "tokens_per_step": args.batch_size * cfg.model.seq_len,
        "warmup_steps": args.warmup, "timed_steps": args.steps,
        "autocast": "bf16" if device.type == "cuda" else None, "compile_backend": args.compile_backend,
        "compile_mode": args.compile_mode,
        "results": [],
    }
    for label, norm, impl in VARIANTS:
        for mode in args.modes:
            row = {"variant": label, "norm": norm, "impl": impl, "mode": mode}
            report["results"].append(row)
            if impl == "triton" and device.type != "cuda":
                row.update(status="skipped", error="the Triton kernels need a CUDA device")
                continue
            print(f"bench_train: {label}, {mode} ...", file=sys.stderr, flush=True)
            try:
                row.update(bench_one([*base, f"norm={norm}", f"norm.impl={impl}"], mode == "compiled", args, device))
                row["mfu"] = mfu(row["tokens_per_s"], row["flops_per_token"], peak)
                row["status"] = "ok"
            except Exception as err:  # one failing variant (OOM, a kernel error) must not lose the others
                row.update(status="failed", error=f"{type(err).__name__}: {str(err).splitlines()[0][:300]}")
            finally:
                torch._dynamo.reset()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return report


def table(report: dict) -> str:
    m, peak = report["model"], report["peak_bf16_flops"]
    peak_text = f"{peak / 1e12:.0f} TFLOP/s" if peak else "n/a (unknown device)"
    lines = [
        f"Training throughput on **{report['device']}**: {m['n_layers']} layers, d {m['d_model']}, "
        f"{m['n_heads']} heads, seq {m['seq_len']}, {m['mlp']} MLP; batch {report['batch_size']} "
        f"({report['tokens_per_step']} tokens/step), {report['timed_steps']} timed steps after "
        f"{report['warmup_steps']} warm-up; autocast {report['autocast'] or 'off'}; torch {report['torch']}. "
        f"MFU against a dense bf16 peak of {peak_text}.",
        "",
        "| norm | mode | tokens/s | step (ms) | MFU | peak memory (GiB) | graphs / breaks |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"| {r['variant']} | {r['mode']} | {r['status']}: {r.get('error', '')} | | | | |")
            continue
        util = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "n/a"
        mem = f"{r['max_mem_gb']:.1f}" if r["max_mem_gb"] is not None else "n/a"
        graphs = f"{r['graphs']} / {r['graph_breaks']}" if r["graphs"] is not None else ""
        lines.append(f"| {r['variant']} | {r['mode']} | {r['tokens_per_s']:,.0f} | {r['step_ms']:.1f} | {util} "
                     f"| {mem} | {graphs} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_train: no CUDA device is available; this benchmark measures GPU throughput. "
              "Run `python scripts/bench_train.py --device cpu --tiny` for a smoke test on CPU.", file=sys.stderr)
        return 2
    report = run(args, argv)
    # measured results belong in experiments/; a smoke run's numbers do not
    folder = Path("outputs/bench") if args.tiny else Path("experiments/throughput")
    out = args.out or folder / f"{report['device_slug']}{'-tiny' if args.tiny else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    md = table(report)
    out.with_suffix(".md").write_text(md)
    print(md)
    print(f"bench_train: wrote {out} and {out.with_suffix('.md')}", file=sys.stderr)
    return 0 if all(r["status"] in ("ok", "skipped") for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
