"""Training throughput and MFU of the norms at a GPT-2-small-like size, eager and compiled (a GPU benchmark).

    python scripts/bench_train.py                     # CUDA: writes experiments/throughput/<device>.json and .md
    python scripts/bench_train.py --device cpu --tiny  # a smoke run of the code paths on CPU (about 20 s)
    python scripts/bench_train.py model.n_layers=24    # any config override, as on the normtrain command line

The variants: LayerNorm (torch's fused kernel); RMSNorm with norm.impl=torch (``F.rms_norm``: torch's fused kernel
on CUDA); RMSNorm with norm.impl=auto (the default: the fused Triton kernel in eager mode, inductor's own norm
under torch.compile); RMSNorm with norm.impl=triton compiled (the kernels traced as triton_ops), the alternative
that rule was decided against. ``--modes graphs`` runs the compiled variants with inductor's CUDA graphs
(``mode="reduce-overhead"``: the host launches a step's kernels as one graph; on a CPU it is compiled alone). Each
is built with ``normtrain.compose`` + ``normtrain.build_model`` and trained
on random bytes (no dataset) with the project's AdamW (fused on CUDA) under bf16 autocast, the step the training
loop runs without its diagnostics: forward, backward, gradient clipping, update.

The variants of one mode are measured side by side: all built and warmed up (``--warmup`` steps; compilation
happens there), then ``--rounds`` rounds in which each runs ``--steps`` steps between two
``torch.cuda.synchronize()`` calls, in turn. Each variant's tokens/s is the median of its rounds (min and max
kept), so a ratio between variants compares steps taken minutes apart at most, on the same warm GPU.
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

VARIANTS = (  # (label, norm, norm.impl, modes)
    ("LayerNorm", "layernorm", "torch", ("eager", "compiled", "graphs")),
    ("RMSNorm (torch: F.rms_norm)", "rmsnorm", "torch", ("eager", "compiled", "graphs")),
    ("RMSNorm (auto: the default)", "rmsnorm", "auto", ("eager", "compiled", "graphs")),
    ("RMSNorm (Triton, traced)", "rmsnorm", "triton", ("compiled",)),
)
MODES = ("eager", "compiled", "graphs")  # graphs: compiled with mode="reduce-overhead" (inductor's CUDA graphs)
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
    ap.add_argument("--steps", type=int, default=None, help="timed steps a round (default 20; 2 with --tiny)")
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds of each variant (default 3; 1 with --tiny)")
    ap.add_argument("--modes", default="eager,compiled",
                    help="comma-separated: eager, compiled, graphs (compiled with CUDA graphs: mode=reduce-overhead)")
    ap.add_argument("--profile", action="store_true",
                    help="also profile 3 steps of each variant (CUDA): wall vs GPU kernel time, the top host ops")
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
    args.steps = args.steps or (2 if args.tiny else 20)
    args.rounds = args.rounds or (1 if args.tiny else 3)
    args.compile_backend = args.compile_backend or ("aot_eager" if args.tiny and args.device == "cpu" else "inductor")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if bad := [m for m in args.modes if m not in MODES]:
        ap.error(f"--modes: unknown {', '.join(bad)}; allowed: {', '.join(MODES)}")
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


class Variant:
    """One model, optimizer and step function, warmed up once and then timed in rounds."""

    def __init__(self, overrides: list[str], mode: str, args, device: torch.device):
        cfg = normtrain.compose(overrides)
        torch.manual_seed(0)
        self.model = normtrain.build_model(cfg).to(device)
        o = self.o = cfg.optim
        self.optimizer = build_optimizer(self.model, o.lr, o.betas, o.eps, o.weight_decay)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.flops = model_flops_per_token(self.model)
        compiled, self.graphs = mode != "eager", mode == "graphs"
        # on a CPU there is nothing to graph: the graphs mode runs as compiled (its path checked, not its speed)
        compile_mode = "reduce-overhead" if self.graphs and device.type == "cuda" else args.compile_mode
        self.step_model = (torch.compile(self.model, backend=args.compile_backend, mode=compile_mode)
                           if compiled else self.model)
        self.compiled, self.device, self.args = compiled, device, args
        self.B, self.T = args.batch_size, cfg.model.seq_len
        # a few batches of random bytes, made before the clock starts (the data loader is not measured)
        self.batches = [torch.randint(0, self.model.cfg.vocab_size, (self.B, self.T + 1), device=device)
                        for _ in range(4)]
        self.autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda"
                         else contextlib.nullcontext())
        self.i, self.loss, self.rounds = 0, None, []

    def step(self) -> None:
        tokens = self.batches[self.i % len(self.batches)]
        self.i += 1
        if self.graphs:  # a new step: the graphs may overwrite the last one's outputs
            torch.compiler.cudagraph_mark_step_begin()
        with self.autocast:
            _, loss = self.step_model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        if self.o.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.o.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.loss = loss.detach().clone() if self.graphs else loss  # a graph's output is overwritten next step

    def warm_up(self) -> dict:
        """The untimed steps (compilation happens here); the graphs and breaks dynamo counted."""
        counters.clear()
        t0 = time.perf_counter()
        for _ in range(self.args.warmup):
            self.step()
        synchronize(self.device)
        return {"warmup_s": time.perf_counter() - t0,
                # compiled: graphs dynamo built (1 forward graph is the goal) and the graph breaks it hit
                "graphs": counters["stats"]["unique_graphs"] if self.compiled else None,
                "graph_breaks": sum(counters["graph_break"].values()) if self.compiled else None}

    def timed_round(self) -> None:
        synchronize(self.device)
        t0 = time.perf_counter()
        for _ in range(self.args.steps):
            self.step()
        synchronize(self.device)
        self.rounds.append(self.args.steps * self.B * self.T / (time.perf_counter() - t0))

    def profile(self, steps: int = 3) -> dict:
        """Where a step's host time goes (torch.profiler over ``steps`` steps): the profiled wall time and the host
        ops with the most self CPU time. (The summed device time of the profiler's events came out above the wall
        time on an H200, events counted twice: not reported.)"""
        from torch.profiler import ProfilerActivity, profile

        synchronize(self.device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                self.step()
            synchronize(self.device)
            wall = time.perf_counter() - t0
        top = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
        return {"wall_ms_per_step_profiled": 1000 * wall / steps,
                "top_host_ops": [{"op": e.key, "calls_per_step": e.count / steps,
                                  "self_cpu_ms_per_step": e.self_cpu_time_total / 1000 / steps} for e in top]}

    def result(self) -> dict:
        ranked = sorted(self.rounds)
        tokens_per_s = ranked[len(ranked) // 2]
        return {
            "tokens_per_s": tokens_per_s, "tokens_per_s_min": ranked[0], "tokens_per_s_max": ranked[-1],
            "rounds": len(ranked), "step_ms": 1000 * self.B * self.T / tokens_per_s,
            "flops_per_token": self.flops, "final_loss": self.loss.item(),
            "fused_adamw": bool(self.optimizer.defaults.get("fused")), "n_params": sum(p.numel() for p in self.params),
        }


def bench_mode(mode: str, base: list[str], args, device: torch.device, rows: list[dict]) -> None:
    """Every variant of one mode side by side: built and warmed up, then timed in alternating rounds."""
    live = []
    for label, norm, impl, modes in VARIANTS:
        if mode not in modes:
            continue
        row = {"variant": label, "norm": norm, "impl": impl, "mode": mode}
        rows.append(row)
        if impl == "triton" and device.type != "cuda":
            row.update(status="skipped", error="the Triton kernels need a CUDA device")
            continue
        print(f"bench_train: {label}, {mode}: building and warming up ...", file=sys.stderr, flush=True)
        try:
            variant = Variant([*base, f"norm={norm}", f"norm.impl={impl}"], mode, args, device)
            row.update(variant.warm_up())
            live.append((row, variant))
        except Exception as err:  # one failing variant (OOM, a kernel error) must not lose the others
            row.update(status="failed", error=f"{type(err).__name__}: {str(err).splitlines()[0][:300]}")
    for r in range(args.rounds):
        for row, variant in live:
            if row.get("status") == "failed":
                continue
            try:
                variant.timed_round()
            except Exception as err:  # noqa: BLE001 - as above
                row.update(status="failed", error=f"{type(err).__name__}: {str(err).splitlines()[0][:300]}")
        print(f"bench_train: {mode} round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    for row, variant in live:
        if row.get("status") != "failed":
            row.update(variant.result(), status="ok")
            if args.profile and device.type == "cuda":
                row["profile"] = variant.profile()
    if device.type == "cuda":
        row_mem = torch.cuda.max_memory_allocated(device) / 2**30
        for row, _ in live:
            row["max_mem_gb_mode"] = row_mem  # the variants of a mode share the GPU: the peak of all of them
    del live
    torch._dynamo.reset()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def ratios(rows: list[dict]) -> dict:
    """The ratios issue 36 asks for, each within one mode (so measured side by side)."""
    ok = {(r["variant"], r["mode"]): r["tokens_per_s"] for r in rows if r.get("status") == "ok"}
    out = {}
    for mode in MODES:
        auto, torch_rms = ok.get((VARIANTS[2][0], mode)), ok.get((VARIANTS[1][0], mode))
        layernorm, traced = ok.get((VARIANTS[0][0], mode)), ok.get((VARIANTS[3][0], mode))
        if auto and torch_rms:
            out[f"auto / torch RMSNorm, {mode}"] = auto / torch_rms
        if auto and layernorm:
            out[f"auto RMSNorm / LayerNorm, {mode}"] = auto / layernorm
        if traced and torch_rms:
            out[f"Triton traced / torch RMSNorm, {mode}"] = traced / torch_rms
    return out


def run(args, argv: list[str], save=None) -> dict:
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
        "warmup_steps": args.warmup, "timed_steps": args.steps, "rounds": args.rounds,
        "autocast": "bf16" if device.type == "cuda" else None, "compile_backend": args.compile_backend,
        "compile_mode": args.compile_mode,
        "results": [],
    }
    for mode in args.modes:
        bench_mode(mode, base, args, device, report["results"])
        for row in report["results"]:
            if row.get("status") == "ok":
                row["mfu"] = mfu(row["tokens_per_s"], row["flops_per_token"], peak)
        report["ratios"] = ratios(report["results"])
        if save is not None:
            save(report)  # after each mode: a run stopped by a time limit keeps the modes it finished
    return report


def table(report: dict) -> str:
    m, peak = report["model"], report["peak_bf16_flops"]
    peak_text = f"{peak / 1e12:.0f} TFLOP/s" if peak else "n/a (unknown device)"
    lines = [
        f"Training throughput on **{report['device']}**: {m['n_layers']} layers, d {m['d_model']}, "
        f"{m['n_heads']} heads, seq {m['seq_len']}, {m['mlp']} MLP; batch {report['batch_size']} "
        f"({report['tokens_per_step']} tokens/step); each mode's variants side by side: {report['warmup_steps']} "
        f"warm-up steps each, then {report['rounds']} rounds of {report['timed_steps']} timed steps in turn "
        f"(tokens/s: the median round, min–max in brackets); autocast {report['autocast'] or 'off'}; "
        f"torch {report['torch']}. MFU against a dense bf16 peak of {peak_text}.",
        "",
        "| norm | mode | tokens/s | step (ms) | MFU | graphs / breaks |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"| {r['variant']} | {r['mode']} | {r['status']}: {r.get('error', '')} | | | |")
            continue
        util = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "n/a"
        graphs = f"{r['graphs']} / {r['graph_breaks']}" if r["graphs"] is not None else ""
        spread = f" ({r['tokens_per_s_min']:,.0f}–{r['tokens_per_s_max']:,.0f})" if r["rounds"] > 1 else ""
        lines.append(f"| {r['variant']} | {r['mode']} | {r['tokens_per_s']:,.0f}{spread} | {r['step_ms']:.1f} "
                     f"| {util} | {graphs} |")
    profiled = [r for r in report["results"] if r.get("profile")]
    if profiled:
        lines += ["", "| profiled (3 steps, torch.profiler) | wall ms/step | top host op (self CPU ms/step) |",
                  "|---|---:|---|"]
        for r in profiled:
            p, top = r["profile"], r["profile"]["top_host_ops"][0]
            lines.append(f"| {r['variant']}, {r['mode']} | {p['wall_ms_per_step_profiled']:.1f} | "
                         f"{top['op']} ({top['self_cpu_ms_per_step']:.1f}) |")
    if report.get("ratios"):
        lines += ["", "| ratio (same mode, side by side) | value |", "|---|---:|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in report["ratios"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_train: no CUDA device is available; this benchmark measures GPU throughput. "
              "Run `python scripts/bench_train.py --device cpu --tiny` for a smoke test on CPU.", file=sys.stderr)
        return 2
    # measured results belong in experiments/; a smoke run's numbers do not
    folder = Path("outputs/bench") if args.tiny else Path("experiments/throughput")
    device = torch.device(args.device)
    name = slug(device_name(device)) if device.type == "cuda" else "cpu"
    out = args.out or folder / f"{name}{'-tiny' if args.tiny else ''}.json"

    def save(report: dict) -> str:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        md = table(report)
        out.with_suffix(".md").write_text(md)
        return md

    report = run(args, argv, save)
    print(save(report))
    print(f"bench_train: wrote {out} and {out.with_suffix('.md')}", file=sys.stderr)
    return 0 if all(r["status"] in ("ok", "skipped") for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
