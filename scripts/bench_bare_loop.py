"""What the framework costs: normtrain's training loop against a bare PyTorch loop on the same model and data.

    python scripts/bench_bare_loop.py [--steps 100] [--repeats 3] [--every 10] [--threads N] [--out FILE.json]
                                      [overrides...]

The framework side is ``normtrain.train`` with its defaults (diagnostics every ``--every`` steps, the spike score,
checkpoints off, no logger, no evaluation during training): what a user runs. The bare side is the loop a user
would write by hand around the same model (``normtrain.build_model`` of the same config): random windows of the
same corpus, forward, backward, clipping, ``torch.optim.AdamW`` with the config's settings, nothing else. Both
report the median tokens/s over intervals of ``--every`` steps after the first one, and the two alternate
(A B A B ...) so that machine noise hits both alike. The ratio framework/bare is the figure: 1.0 means the
framework costs nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_monitor import DEVICE, throughput  # noqa: E402

import normtrain  # noqa: E402
from normtrain.data import load_corpus  # noqa: E402


def bare_loop(overrides: list[str], steps: int, every: int) -> float:
    """Median tokens/s of a hand-written loop over intervals of ``every`` steps (the first interval skipped)."""
    cfg = normtrain.compose(overrides)
    torch.manual_seed(cfg.train.seed)
    model = normtrain.build_model(cfg)
    o, t = cfg.optim, cfg.train
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": o.weight_decay},
                                   {"params": rest, "weight_decay": 0.0}], lr=o.lr, betas=tuple(o.betas), eps=o.eps)
    tokens = torch.from_numpy(np.array(load_corpus(cfg.data.name, cfg.data.get("path"), progress=False).train))
    B, T = t.batch_size, cfg.model.seq_len
    rng = torch.Generator().manual_seed(0)
    rates, start = [], time.perf_counter()
    for step in range(1, steps + 1):
        at = torch.randint(0, len(tokens) - T - 1, (B,), generator=rng)
        batch = torch.stack([tokens[i:i + T + 1] for i in at.tolist()]).long()
        _, loss = model(batch[:, :-1], batch[:, 1:])
        loss.backward()
        if o.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % every == 0:
            loss.item()  # the framework reads its loss back at log steps too
            now = time.perf_counter()
            rates.append(every * B * T / (now - start))
            start = now
    return statistics.median(rates[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("overrides", nargs="*", help="extra config overrides, e.g. model.n_layers=12")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    base = [f"train.max_steps={args.steps}", "train.eval_every=0", "logger=none", "train.progress=false",
            f"monitor.every={args.every}", *args.overrides]
    rates: dict[str, list[float]] = {"framework": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            rates["framework"].append(throughput(base, Path(tmp) / f"run{i}")[0])
            rates["bare"].append(bare_loop(base, args.steps, args.every))
            print(f"repeat {i}: framework {rates['framework'][-1]:9.0f} tokens/s, bare {rates['bare'][-1]:9.0f}",
                  flush=True)
    ratios = [f / b for f, b in zip(rates["framework"], rates["bare"], strict=True)]
    result = {"ratio_median": statistics.median(ratios), "ratios": ratios, "runs": rates, "steps": args.steps,
              "every": args.every, "repeats": args.repeats, "threads": torch.get_num_threads(),
              "overrides": args.overrides, "device": DEVICE, "torch": torch.__version__}
    print(f"framework / bare loop: {result['ratio_median']:.3f} (median of {args.repeats} pairs: "
          f"{', '.join(f'{r:.3f}' for r in ratios)})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
