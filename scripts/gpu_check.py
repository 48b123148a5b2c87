"""Everything a GPU must confirm about the fused RMSNorm, in one command that fits a time budget (issue 36).

    python scripts/gpu_check.py [--budget 480] [--out experiments]

Four phases, each a subprocess given the time the budget has left (a phase that overruns is stopped and marked,
the others still run):

  tests    TRITON_INTERPRET=0 pytest tests/ops: every correctness case, compiled for this GPU
  kernels  scripts/bench_rmsnorm.py: the kernel table (ours, F.rms_norm, torch.compile, Liger; % of the copy
           bandwidth), the host time per call of the launch candidates, a profile, the backward's heuristics
  train    scripts/bench_train.py: GPT-2-small tokens/s, LayerNorm and RMSNorm, eager and compiled
  cli      `normtrain model=gpt2_small train.max_steps=100 logger=csv`: which norm the default run picked

Results land where the README's kernel and throughput sections read them: ``OUT/kernels/<device>.json``,
``OUT/throughput/<device>.json`` (and ``.md``), and this check's own table ``OUT/kernels/gpu_check-<device>.md``
(and ``.json``), each phase's output beside it (``.log``). The table, printed last, holds every target of issue 36
(must-haves 1, 3, 5 and 6) met or missed, with its number.

On a machine without hydra-core/omegaconf (the lent GPU image), install the wheels first (README, "The fused
RMSNorm kernel"); liger-kernel is optional (its rows are then missing, and said so).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAPS = {"tests": 100, "kernels": 100, "train": 170, "cli": 40}  # seconds; unused time passes to the next phase


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_phase(name: str, cmd: list[str], seconds: float, log: Path, env: dict | None = None) -> dict:
    """Run ``cmd`` for at most ``seconds``; its output to ``log``; returns status, rc and the time it took."""
    t0 = time.monotonic()
    print(f"gpu_check: {name} (at most {seconds:.0f} s): {' '.join(cmd)}", flush=True)
    with log.open("w") as f:
        try:
            proc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=max(1.0, seconds),
                                  env={**os.environ, **(env or {})})
            status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            status, rc = f"stopped at its {seconds:.0f}-s share of the budget", None
    took = time.monotonic() - t0
    print(f"gpu_check: {name}: {status} in {took:.0f} s", flush=True)
    return {"status": status, "rc": rc, "seconds": round(took, 1)}


def load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_row(log: Path) -> tuple[str, str, bool | None]:
    text = log.read_text() if log.exists() else ""
    counts = re.findall(r"(\d+) (passed|failed|error|errors|skipped)", text)
    summary = ", ".join(f"{n} {w}" for n, w in counts[-4:]) or "no summary (see tests.log)"
    failed = any(w in ("failed", "error", "errors") and int(n) for n, w in counts)
    return "tests/ops compiled for this GPU all pass", summary, (not failed and bool(counts))


def target_rows(out: Path, dev: str, phases: dict) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for every target of issue 36 the phases measured; None: not measured."""
    rows = [test_row(out / "kernels" / f"gpu_check-{dev}.tests.log")]
    kernels = load(out / "kernels" / f"{dev}.json")
    if kernels:
        rows += [(c["what"], c["value"], c["met"]) for c in kernels.get("targets", [])]
        host = kernels.get("host_us", {}).get("F.rms_norm")
        if host:
            rows.append(("(for comparison) F.rms_norm host fwd / fwd+bwd", f"{host['fwd']:.1f} / "
                         f"{host['fwd+bwd']:.1f} us", None))
    else:
        rows.append(("kernel targets (must-haves 1, 3)", f"not measured: kernels {phases['kernels']['status']}", None))
    summary = load(out / "kernels" / f"gpu_check-{dev}.cli-summary.json")
    if summary:
        impl = summary.get("norm_impl", {})
        rows.append(("default CLI run at model=gpt2_small picks Triton (summary.json)",
                     f"{impl.get('impl')}: {impl.get('why')}", impl.get("impl") == "triton"))
    else:
        rows.append(("default CLI run picks Triton", f"not measured: cli {phases['cli']['status']}", None))
    train = load(out / "throughput" / f"{dev}.json")
    if train:
        r = train.get("ratios", {})
        for key, floor in (("auto / torch RMSNorm, eager", 1.05), ("auto / torch RMSNorm, compiled", 1.00),
                           ("auto RMSNorm / LayerNorm, eager", 1.00), ("auto RMSNorm / LayerNorm, compiled", 1.00)):
            stretch = "LayerNorm" in key
            rows.append((f"{'(stretch) ' if stretch else ''}{key} >= {floor:.2f}",
                         f"{r[key]:.3f}" if key in r else "not measured", (r[key] >= floor) if key in r else None))
        mfu = [x.get("mfu") for x in train["results"] if x.get("status") == "ok" and x["mode"] == "compiled"
               and x["impl"] == "auto"]
        if mfu and mfu[0] is not None:
            rows.append(("(stretch) MFU compiled >= 42%", f"{100 * mfu[0]:.1f}%", mfu[0] >= 0.42))
    else:
        rows.append(("whole-model targets (must-have 6)", f"not measured: train {phases['train']['status']}", None))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=480, help="seconds for all four phases (default 480)")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments", help="folder of kernels/ and throughput/")
    ap.add_argument("--only", nargs="*", choices=list(CAPS), default=list(CAPS), help="these phases only")
    ap.add_argument("--train-modes", default="eager,compiled",
                    help="bench_train's --modes (compiling GPT-2-small takes minutes: eager alone fits a short budget)")
    ap.add_argument("--no-sweep", action="store_true", help="skip bench_rmsnorm's heuristics sweep")
    ap.add_argument("--train-args", default="", help="more bench_train options in one string, e.g. '--steps 15'")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device; this check is for a GPU (on a CPU: python -m pytest)", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    dev = slug(name)
    out = args.out.resolve()
    (out / "kernels").mkdir(parents=True, exist_ok=True)
    (out / "throughput").mkdir(parents=True, exist_ok=True)
    stem = out / "kernels" / f"gpu_check-{dev}"
    py = sys.executable
    cli_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"normtrain-gpu-check-{os.getpid()}"
    commands = {
        # the project's addopts name pytest-xdist (-n 2): replaced, so the check runs with or without it
        "tests": ([py, "-m", "pytest", "-o", "addopts=", "tests/ops", "-q", "--maxfail=10", "-ra", "-p",
                   "no:cacheprovider"] + (["-n", "8", "--dist", "load"] if _has("xdist") else []),
                  {"TRITON_INTERPRET": "0"}),
        "kernels": ([py, "scripts/bench_rmsnorm.py", *([] if args.no_sweep else ["--sweep"]), "--compile-widths",
                     "768", "4096", "16384", "--out", str(out / "kernels" / f"{dev}.json")], {}),
        "train": ([py, "scripts/bench_train.py", "--modes", args.train_modes, "--profile", *args.train_args.split(),
                   "--out", str(out / "throughput" / f"{dev}.json")], {}),
        "cli": ([py, "-m", "normtrain", "model=gpt2_small", "train.device=cuda", "train.max_steps=100",
                 "logger=csv", "train.progress=false", f"hydra.run.dir={cli_dir}"], {"WANDB_MODE": "disabled"}),
    }
    start, carried, phases = time.monotonic(), 0.0, {}
    for phase, cap in CAPS.items():
        if phase not in args.only:
            phases[phase] = {"status": "not run (--only)"}
            continue
        left = args.budget - (time.monotonic() - start)
        later = sum(CAPS[p] for p in CAPS if p in args.only and list(CAPS).index(p) > list(CAPS).index(phase))
        seconds = min(cap + carried, left - min(later, left / 2))
        cmd, env = commands[phase]
        phases[phase] = run_phase(phase, cmd, seconds, Path(f"{stem}.{phase}.log"), env)
        carried = max(0.0, cap + carried - phases[phase]["seconds"])
    summary = cli_dir / "summary.json"
    if summary.exists():
        Path(f"{stem}.cli-summary.json").write_text(summary.read_text())
    rows = target_rows(out, dev, phases)
    mark = {True: "met", False: "MISSED", None: "–"}
    lines = [f"GPU check on **{name}** (torch {torch.__version__}), {time.monotonic() - start:.0f} s of a "
             f"{args.budget:.0f}-s budget. Phases: " + "; ".join(f"{p} {v['status']}"
                                                              + (f" ({v['seconds']:.0f} s)" if "seconds" in v else "")
                                                              for p, v in phases.items()), "",
             "| target (issue 36) | measured | |", "|---|---|---|"]
    lines += [f"| {what} | {value} | {mark[met]} |" for what, value, met in rows]
    table = "\n".join(lines) + "\n"
    Path(f"{stem}.md").write_text(table)
    Path(f"{stem}.json").write_text(json.dumps({"device": name, "torch": torch.__version__, "phases": phases,
                                                "targets": [{"target": w, "measured": v, "met": m}
                                                            for w, v, m in rows]}, indent=2) + "\n")
    print("\n" + table)
    return 0 if all(v.get("status") in ("ok", "not run (--only)") for v in phases.values()) else 1


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    sys.exit(main())
