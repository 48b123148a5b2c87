"""What the diagnostics cost: training throughput with every monitor switch on vs all off (or vs all on but
the ``--without`` ones: what those cost on top of the rest).

Runs the real training loop (``normtrain.train``) on the default model and corpus, alternating the
two settings (A B A B ...) so that machine noise hits both alike, and compares the median tokens/s
of the logged intervals, and the median CPU time of the whole run (set-up and final evaluation included, the
same in both settings). On a machine shared with other work, wall-clock rates follow the neighbours' load; the
CPU time this process spent does much less so (with ``--threads 1``: no threads waiting on each other). Usage:

    python scripts/bench_monitor.py [--steps 100] [--repeats 2] [--every 10] [--without S1,S2] [--threads N]
                                    [--out FILE.json] [overrides...]

``--log-step`` measures instead what the forward-hook diagnostics (``HOOKED``, or the ``--without`` ones among
them) add to one log step: the CPU time of a forward and backward pass of the default model on one batch with
their hooks, and without, alternated ``--repeats`` times (the minimum and the median of each); divided by
``--every`` that is their share of the training time. Small and in-process, it holds on a busy machine where
whole runs drift with the neighbours' load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

import normtrain

SWITCHES = ("grad_norms", "activations", "attn_entropy", "update_ratio", "output_change", "attn_logit_max",
            "output_log_z", "output_logit_max", "spike_score", "residual_stats", "block_cos", "cap_saturation")
DEVICE = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores (or the GPU in overrides)"
HOOKED = ("activations", "residual_stats", "block_cos", "attn_entropy", "attn_logit_max",  # Monitor.capture's
          "cap_saturation")  # (nothing to measure without model.attn_softcap)


def log_step_cost(switches: list[str], overrides: list[str], repeats: int) -> dict[str, list[float]]:
    """CPU seconds of a forward and backward pass with the hooks of ``switches`` (and the one read-back), and
    without, alternated ``repeats`` times after three warm-up pairs."""
    from normtrain.training.monitor import Monitor

    cfg = normtrain.compose(overrides)
    model = normtrain.build_model(cfg)
    x = torch.randint(0, model.cfg.vocab_size, (cfg.train.batch_size, cfg.model.seq_len))
    flags = {s: s in switches for s in HOOKED}
    monitor = Monitor(model.blocks, list(model.parameters()), every=1, divergence_factor=3.0, grad_norms=False,
                      update_ratio=False, output_log_z=False, output_logit_max=False, spike_window=None, **flags)
    seconds: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(repeats + 3):
        for name in ("on", "off"):
            start = time.process_time()
            with monitor.capture(0) if name == "on" else contextlib.nullcontext():
                _, loss = model(x, x)
            loss.backward()
            monitor.read()
            model.zero_grad(set_to_none=True)
            if i >= 3:
                seconds[name].append(time.process_time() - start)
    return seconds


def report_log_step(args: argparse.Namespace, switches: list[str]) -> dict:
    seconds = log_step_cost(switches, args.overrides, args.repeats)
    result = {"mode": "log_step", "switches": switches, "every": args.every, "repeats": args.repeats,
              "threads": torch.get_num_threads(), "overrides": args.overrides, "cpu_s": seconds,
              "load_average_at_end": [round(x, 2) for x in os.getloadavg()], "device": DEVICE,
              "torch": torch.__version__}
    for stat, pick in (("min", min), ("median", statistics.median)):
        on, off = pick(seconds["on"]), pick(seconds["off"])
        result[f"log_step_cost_{stat}"] = on / off - 1
        result[f"overhead_{stat}"] = (on / off - 1) / args.every
    print(f"{', '.join(switches)}: a log step costs {100 * result['log_step_cost_min']:+.2f}% (min) / "
          f"{100 * result['log_step_cost_median']:+.2f}% (median) CPU time; every {args.every} steps that is "
          f"{100 * result['overhead_min']:+.3f}% / {100 * result['overhead_median']:+.3f}% of training")
    return result


def throughput(overrides: list[str], run_dir: Path) -> tuple[float, float]:
    """(median tokens/s of the logged intervals, CPU seconds of the whole run)."""
    cpu = time.process_time()
    normtrain.train(normtrain.compose(overrides), run_dir=run_dir)
    cpu = time.process_time() - cpu
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in rows[1:] if r.get("tokens_per_s")]  # skip the warm-up interval
    return statistics.median(rates), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--without", default=None, metavar="S1,S2",
                        help=f"switch off only these in the 'off' runs (default: all of {', '.join(SWITCHES)})")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    parser.add_argument("--log-step", action="store_true", help="the hooked diagnostics' cost per log step (above)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("overrides", nargs="*", help="extra config overrides, e.g. train.device=cuda")
    args = parser.parse_args()

    base = [f"train.max_steps={args.steps}", "train.eval_every=0", "logger=none", "train.progress=false",
            f"monitor.every={args.every}", *args.overrides]
    without = args.without.split(",") if args.without else list(SWITCHES)
    if unknown := sorted(set(without) - set(SWITCHES)):
        parser.error(f"--without {','.join(unknown)}: not a switch; allowed: {', '.join(SWITCHES)}")
    settings = {"on": [f"monitor.{s}=true" for s in SWITCHES],
                "off": [f"monitor.{s}={str(s not in without).lower()}" for s in SWITCHES]}
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.log_step:
        write(report_log_step(args, [s for s in HOOKED if s in without]), args.out)
        return
    rates: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for name, switches in settings.items():
                rate, seconds = throughput([*base, *switches], Path(tmp) / f"{name}{i}")
                rates[name].append(rate)
                cpu[name].append(seconds)
                print(f"repeat {i} monitor {name:3s}: {rate:9.0f} tokens/s, {seconds:7.2f} CPU s", flush=True)
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    cpu_on, cpu_off = statistics.median(cpu["on"]), statistics.median(cpu["off"])
    result = {"tokens_per_s_on": on, "tokens_per_s_off": off, "overhead": off / on - 1,
              "cpu_s_on": cpu_on, "cpu_s_off": cpu_off, "cpu_overhead": cpu_on / cpu_off - 1, "switched_off": without,
              "every": args.every, "steps": args.steps, "repeats": args.repeats, "threads": torch.get_num_threads(),
              "overrides": args.overrides, "runs": rates, "cpu_runs": cpu,
              "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
              "device": DEVICE, "torch": torch.__version__}
    what = "diagnostics" if set(without) == set(SWITCHES) else f"{', '.join(without)}"
    print(f"{what} every {args.every} steps cost {100 * result['overhead']:.1f}% of the step time "
          f"({on:.0f} vs {off:.0f} tokens/s), {100 * result['cpu_overhead']:.1f}% of the run's CPU time "
          f"({cpu_on:.1f} vs {cpu_off:.1f} s)")
    write(result, args.out)


def write(result: dict, out: Path | None) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
