"""The cost of each catalog option: one training step of the default model with it, as a ratio to Pre-LN's.

    python scripts/bench_options.py                    # CPU: writes outputs/bench/options-cpu.{json,md}
    python scripts/bench_options.py --device cuda      # GPU (bf16 autocast): options-<device>.{json,md}
    python scripts/bench_options.py --only hybrid ngpt # some rows (Pre-LN, the reference, always runs)

Every variant is built with ``normtrain.compose`` + ``normtrain.build_model`` and stepped the way the training
loop steps it, without its diagnostics: forward, backward, clipping, the optimizer (Muon where chosen), then what
the model keeps true after an update (nGPT's unit matrices) and QK-Clip. All variants are built first and timed
round-robin (``--rounds`` rounds of ``--steps`` steps each, after ``--warmup`` untimed steps), so drift in the
machine's speed hits every row alike; a row's ratio is the median over rounds of its time over Pre-LN's time in
the same round. Random bytes, no data loader: the cost of the model and its update only.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import device_name, slug, synchronize, versions  # noqa: E402

import normtrain  # noqa: E402
from normtrain.config import validate  # noqa: E402
from normtrain.training.optim import MuonSettings, build_optimizer  # noqa: E402
from normtrain.training.qk_clip import QKClip  # noqa: E402

REFERENCE = "pre"
OPTIONS = (  # (row name, overrides on top of the default model)
    ("pre", []),
    ("post", ["placement=post"]),
    ("peri", ["placement=peri"]),
    ("hybrid", ["placement=hybrid"]),
    ("hybrid_star", ["placement=hybrid", "placement.first_pre=true"]),
    ("normformer", ["placement=normformer"]),
    ("b2t", ["placement=b2t"]),
    ("resi_dual", ["placement=resi_dual"]),
    ("ngpt", ["experiment=ngpt"]),
    ("mhc", ["placement=mhc"]),
    ("gpas", ["placement.gpas=true"]),
    ("derf", ["norm=derf"]),
    ("gain_zero_centred", ["norm.gain=zero_centred"]),
    ("gain_scalar", ["norm.gain=scalar"]),
    ("qk_norm_after_rope", ["model.qk_norm=per_head", "model.qk_norm_at=after_rope"]),
    ("v_norm", ["model.v_norm=true"]),
    ("attn_softcap", ["model.attn_softcap=50"]),
    ("logit_softcap", ["model.logit_softcap=30"]),
    ("attn_gate_head", ["model.attn_gate=head"]),
    ("attn_gate_elementwise", ["model.attn_gate=elementwise"]),
    ("emb_proj", ["model.emb_proj=true"]),
    ("muon", ["optim=muon"]),
    ("qk_clip", ["optim.qk_clip=100"]),
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="config overrides for every row, e.g. model.n_layers=12")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--only", nargs="+", default=None, metavar="ROW", help="rows to time (Pre-LN always runs)")
    ap.add_argument("--batch-size", type=int, default=16, help="sequences per step (default 16)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per row first (default 3)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per row and round (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="round-robin rounds (default 3)")
    ap.add_argument("--out", type=Path, default=None, help="JSON file (default outputs/bench/options-<device>.json); "
                                                           "the markdown table goes next to it (.md)")
    args = ap.parse_args(argv)
    known = [name for name, _ in OPTIONS]
    if args.only and (bad := [r for r in args.only if r not in known]):
        ap.error(f"--only: unknown row(s) {', '.join(bad)}; rows: {', '.join(known)}")
    return args


class Variant:
    """One option's model and optimizer, stepped as the training loop steps them."""

    def __init__(self, overrides: list[str], batch_size: int, device: torch.device):
        cfg = normtrain.compose(overrides)
        validate(cfg)
        torch.manual_seed(0)
        self.model = normtrain.build_model(cfg).to(device)
        o = cfg.optim
        self.optimizer = build_optimizer(self.model, o.lr, o.betas, o.eps, o.weight_decay, o.independent_wd, o.name,
                                         o.momentum, MuonSettings.of(o) if o.name == "muon" else None)
        self.qk_clip = QKClip.of(self.model, o.qk_clip, o.qk_clip_alpha) if o.qk_clip > 0 else None
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.clip = o.grad_clip
        self.batches = [torch.randint(0, self.model.cfg.vocab_size, (batch_size, cfg.model.seq_len + 1),
                                      device=device) for _ in range(4)]
        self.autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda"
                         else contextlib.nullcontext())
        self.steps_done, self.loss = 0, float("nan")

    def step(self) -> None:
        tokens = self.batches[self.steps_done % len(self.batches)]
        with self.autocast:
            _, loss = self.model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.optimizer.step()
        self.model.after_optimizer_step()
        if self.qk_clip is not None:
            self.qk_clip.apply()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps_done += 1
        self.loss = loss.detach()

    def timed(self, steps: int, device: torch.device) -> float:
        """Seconds per step over ``steps`` steps."""
        synchronize(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        synchronize(device)
        return (time.perf_counter() - t0) / steps


def run(args: argparse.Namespace, argv: list[str]) -> dict:
    device = torch.device(args.device)
    base = ["logger=none", f"train.device={args.device}", *args.overrides]
    rows = [(n, o) for n, o in OPTIONS if args.only is None or n == REFERENCE or n in args.only]
    variants = {}
    for name, overrides in rows:
        print(f"bench_options: building {name} ...", file=sys.stderr, flush=True)
        variants[name] = Variant([*base, *overrides], args.batch_size, device)
        for _ in range(args.warmup):
            variants[name].step()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.rounds):
        print(f"bench_options: round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
        for name, variant in variants.items():
            times[name].append(variant.timed(args.steps, device))
    cfg = normtrain.compose(base)
    results = []
    for name, overrides in rows:
        ratios = [t / ref for t, ref in zip(times[name], times[REFERENCE], strict=True)]
        results.append({"row": name, "overrides": overrides, "step_ms": [1000 * t for t in times[name]],
                        "median_step_ms": 1000 * statistics.median(times[name]),
                        "ratio_to_pre": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                        "n_params": sum(p.numel() for p in variants[name].params),
                        "last_loss": float(variants[name].loss)})
    name = device_name(device)
    return {"device": name, "device_slug": slug(name) if device.type == "cuda" else "cpu", **versions(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python", "scripts/bench_options.py", *argv]),
            "model": {k: cfg.model[k] for k in ("n_layers", "d_model", "n_heads", "seq_len", "mlp")},
            "batch_size": args.batch_size, "warmup_steps": args.warmup, "steps_per_round": args.steps,
            "rounds": args.rounds, "threads": torch.get_num_threads(),
            "autocast": "bf16" if device.type == "cuda" else None, "results": results}


def table(report: dict) -> str:
    m = report["model"]
    head = (f"One training step of the default model ({m['n_layers']} layers, d {m['d_model']}, {m['n_heads']} "
            f"heads, seq {m['seq_len']}, {m['mlp']}; batch {report['batch_size']}) on **{report['device']}**, "
            f"{report['threads']} threads, autocast {report['autocast'] or 'off'}, torch {report['torch']}, commit "
            f"{report['git_commit']}: median over {report['rounds']} round-robin rounds of {report['steps_per_round']} "
            f"steps; ratio = the row's step time / Pre-LN's in the same round (median, [min, max]).")
    lines = [head, "", "| option | overrides | step (ms) | ratio to Pre-LN | parameters |", "|---|---|---|---|---|"]
    for r in report["results"]:
        lines.append(f"| {r['row']} | {' '.join(r['overrides']) or '(default)'} | {r['median_step_ms']:.1f} | "
                     f"{r['ratio_to_pre']:.2f} [{r['ratio_min']:.2f}, {r['ratio_max']:.2f}] | {r['n_params']:,} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_options: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    report = run(args, argv)
    out = args.out or Path("outputs/bench") / f"options-{report['device_slug']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text(table(report))
    print(table(report))
    print(f"bench_options: wrote {out} and {out.with_suffix('.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
