"""Everything a GPU must confirm, in one command that fits a time budget (issues 36 and 58).

    python scripts/gpu_check.py [--budget 480] [--out experiments]
    python scripts/gpu_check.py --dry-run   # every phase end to end on CPU: tiny settings, no timing claims

Five phases, each a subprocess given the time the budget has left (a phase that overruns is stopped and marked,
the others still run):

  tests    TRITON_INTERPRET=0 pytest tests/ops: every correctness case, compiled for this GPU, both backwards
  kernels  scripts/bench_rmsnorm.py: the kernel table (ours with the tile and the rows backward, F.rms_norm,
           torch.compile, Liger; % of the copy bandwidth over a 1-GiB copy), the host time per call, a profile,
           the rows backward's config sweep (the fastest per width, recorded with the device)
  train    scripts/bench_train.py: GPT-2-small tokens/s, LayerNorm and RMSNorm, eager, compiled and CUDA graphs
  cli      `normtrain model=gpt2_small train.max_steps=100 logger=csv`: which norm the default run picked
  science  `normtrain-reproduce NAME --scale gpu --budget M` for hybrid_depth, then the contested claims, in the
           time left (each a share of it; an unfinished plan continues at the next invocation)

Results land where the README's kernel and throughput sections read them: ``OUT/kernels/<device>.json``,
``OUT/throughput/<device>.json`` (and ``.md``), the science in ``experiments/NAME-gpu/``, and this check's own
table ``OUT/kernels/gpu_check-<device>.md`` (and ``.json``), each phase's output beside it (``.log``). The table,
printed last, holds every target met or missed, with its number.

``--dry-run`` runs the same phases on this CPU under Triton's interpreter with tiny settings (a few interpreter
tests, tiny kernel shapes, a 2-layer model, a 2-step CLI run, the science phase's plans without their runs), into
``outputs/gpu_check-dry/`` unless ``--out`` says otherwise: it checks that the GPU session will only have to run
it. Its times and its table's numbers mean nothing.

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
# seconds; unused time passes to the next phase, and the science phase takes whatever is left at its turn
CAPS = {"tests": 70, "kernels": 100, "train": 140, "cli": 30, "science": 140}
# hybrid_depth first (inconclusive at this scale: its decision waits on --scale gpu), then the contested claims:
# the four whose CPU verdicts are inconclusive on the plateau precondition (experiments/README.md)
SCIENCE = ("hybrid_depth", "curse_of_depth", "peri_variance", "dyt", "norm_types")
GRACE_S = 30  # of a science share, kept back from --budget: the planner's start and the last run's end


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
        for key in ("auto / torch RMSNorm, graphs", "auto RMSNorm / LayerNorm, graphs"):
            if key in r:  # CUDA graphs: reported beside compiled, where they pay
                rows.append((f"(reported) {key}", f"{r[key]:.3f}", None))
        for mode in ("compiled", "graphs"):
            mfu = [x.get("mfu") for x in train["results"] if x.get("status") == "ok" and x["mode"] == mode
                   and x["impl"] == "auto"]
            if mfu and mfu[0] is not None:
                rows.append((f"MFU {mode} (auto) >= 45%", f"{100 * mfu[0]:.1f}%", mfu[0] >= 0.45))
    else:
        rows.append(("whole-model targets (must-have 6)", f"not measured: train {phases['train']['status']}", None))
    return rows


def science_rows(phases: dict) -> list[tuple[str, str, bool | None]]:
    """One row per experiment the science phase ran: its verdict at --scale gpu (result.json), or why none."""
    rows = []
    for name, run in phases.get("science", {}).get("runs", {}).items():
        result = load(Path(run["out"]) / "result.json") if run.get("out") else None
        verdict = (result or {}).get("verdict")
        what = f"science: {name} --scale gpu --budget {run.get('budget_min', '?')}"
        if run.get("plan_only"):
            rows.append((what + " (dry run: the plan only)", run["status"], None))
        else:
            rows.append((what, f"verdict: {verdict}" if verdict else f"no verdict: {run['status']}", None))
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=480, help="seconds for all five phases (default 480)")
    ap.add_argument("--out", type=Path, default=None,
                    help="folder of kernels/ and throughput/ (default experiments; outputs/gpu_check-dry with "
                         "--dry-run)")
    ap.add_argument("--only", nargs="*", choices=list(CAPS), default=list(CAPS), help="these phases only")
    ap.add_argument("--train-modes", default="eager,compiled,graphs",
                    help="bench_train's --modes (compiling GPT-2-small takes minutes: eager alone fits a short budget)")
    ap.add_argument("--no-sweep", action="store_true", help="skip bench_rmsnorm's sweep of the rows backward")
    ap.add_argument("--train-args", default="", help="more bench_train options in one string, e.g. '--steps 15'")
    ap.add_argument("--science", nargs="*", default=list(SCIENCE), help="experiments of the science phase, in order")
    ap.add_argument("--dry-run", action="store_true",
                    help="every phase on CPU: interpreter, tiny settings, the science's plans only; no timing claims")
    args = ap.parse_args(argv)
    args.out = (args.out or (ROOT / "outputs" / "gpu_check-dry" if args.dry_run else ROOT / "experiments")).resolve()
    return args


def commands(args, dev: str, stem: Path, cli_dir: Path) -> dict[str, tuple[list[str], dict]]:
    """Each phase's command and environment (the science phase's are ``science_command``'s)."""
    py, out, dry = sys.executable, args.out, args.dry_run
    pytest = [py, "-m", "pytest", "-o", "addopts=", "-q", "-ra", "-p", "no:cacheprovider"]
    if dry:  # a few interpreter tests: the phase and its summary, not the GPU's verdict
        tests = [*pytest, "tests/ops/test_rmsnorm_rows.py", "-k", "flag or api or symbolic or chunked"]
    else:  # the project's addopts name pytest-xdist (-n 2): replaced, so the check runs with or without it
        tests = [*pytest, "tests/ops", "--maxfail=10"] + (["-n", "8", "--dist", "load"] if _has("xdist") else [])
    sweep = [] if args.no_sweep else ["--sweep-rows"]
    kernels = [py, "scripts/bench_rmsnorm.py", *sweep, "--out", str(out / "kernels" / f"{dev}.json")]
    kernels += ["--dry-run"] if dry else ["--compile-widths", "768", "4096", "16384"]
    train = [py, "scripts/bench_train.py", "--modes", "eager,graphs" if dry else args.train_modes,
             *(["--device", "cpu", "--tiny"] if dry else ["--profile"]), *args.train_args.split(),
             "--out", str(out / "throughput" / f"{dev}.json")]
    size = ["model.n_layers=2", "model.d_model=64", "model.n_heads=2", "model.seq_len=64", "model.d_ff=256",
            "train.device=cpu", "train.max_steps=2"] if dry else ["train.device=cuda", "train.max_steps=100"]
    cli = [py, "-m", "normtrain", "model=gpt2_small", *size, "logger=csv", "train.progress=false",
           f"hydra.run.dir={cli_dir}"]
    return {"tests": (tests, {"TRITON_INTERPRET": "1" if dry else "0"}), "kernels": (kernels, {}),
            "train": (train, {}), "cli": (cli, {"WANDB_MODE": "disabled"})}


def run_science(args, seconds: float, stem: Path) -> dict:
    """The experiments in order, each an equal share of what is left when its turn comes but at least a minute of
    runs (the first ones first: hybrid_depth before the contested claims); on a dry run their plans
    (``--plan-only``) for an assumed GPU, nothing trained."""
    start, runs, names, least = time.monotonic(), {}, list(args.science), GRACE_S + 60
    for i, name in enumerate(names):
        left = seconds - (time.monotonic() - start)
        share = max(left / (len(names) - i), min(left, least))
        if left < least and not args.dry_run:
            runs[name] = {"status": f"not run: {max(0.0, left):.0f} s left"}
            continue
        budget_min = max(1, int((share - GRACE_S) // 60))
        cmd = [sys.executable, "-m", "normtrain.reproduce", name, "--scale", "gpu", "--budget", str(budget_min),
               *(["--plan-only"] if args.dry_run else ["--no-progress"])]
        runs[name] = run_phase(f"science {name}", cmd, share, Path(f"{stem}.science-{name}.log"),
                               {"WANDB_MODE": "disabled"})
        runs[name].update(budget_min=budget_min, plan_only=args.dry_run,
                          out=None if args.dry_run else str(ROOT / "experiments" / f"{name}-gpu"))
    ok = all(r["status"] == "ok" for r in runs.values())
    return {"status": "ok" if ok else "some unfinished or not run", "rc": 0 if ok else 1,
            "seconds": round(time.monotonic() - start, 1), "runs": runs}


def run_phases(args, cmds: dict, stem: Path) -> dict:
    """The phases in order, each its cap plus what earlier ones left unused, never more than the budget holds for
    it and the later phases; the science phase, last, gets all that remains."""
    start, carried, phases = time.monotonic(), 0.0, {}
    for phase, cap in CAPS.items():
        if phase not in args.only:
            phases[phase] = {"status": "not run (--only)"}
            continue
        left = args.budget - (time.monotonic() - start)
        later = sum(CAPS[p] for p in CAPS if p in args.only and list(CAPS).index(p) > list(CAPS).index(phase))
        seconds = min(cap + carried, left - min(later, left / 2))
        if phase == "science":
            phases[phase] = run_science(args, left, stem)
            continue
        cmd, env = cmds[phase]
        phases[phase] = run_phase(phase, cmd, seconds, Path(f"{stem}.{phase}.log"), env)
        carried = max(0.0, cap + carried - phases[phase]["seconds"])
    return phases


def write_table(args, name: str, dev: str, phases: dict, took: float, torch_version: str) -> str:
    stem = args.out / "kernels" / f"gpu_check-{dev}"
    rows = target_rows(args.out, dev, phases) + science_rows(phases)
    if args.dry_run:  # nothing a dry run printed is a measurement: no target is met or missed by it
        rows = [(what, value, None) for what, value, _ in rows]
    mark = {True: "met", False: "MISSED", None: "–"}
    dry = " (DRY RUN on CPU: the phases' paths only; no number here is a measurement)" if args.dry_run else ""
    lines = [f"GPU check on **{name}** (torch {torch_version}){dry}, {took:.0f} s of a {args.budget:.0f}-s budget. "
             "Phases: " + "; ".join(f"{p} {v['status']}" + (f" ({v['seconds']:.0f} s)" if "seconds" in v else "")
                                    for p, v in phases.items()), "",
             "| target (issues 36, 58) | measured | |", "|---|---|---|"]
    lines += [f"| {what} | {value} | {mark[met]} |" for what, value, met in rows]
    table = "\n".join(lines) + "\n"
    Path(f"{stem}.md").write_text(table)
    Path(f"{stem}.json").write_text(json.dumps({"device": name, "torch": torch_version, "dry_run": args.dry_run,
                                                "phases": phases, "targets": [{"target": w, "measured": v, "met": m}
                                                                              for w, v, m in rows]}, indent=2) + "\n")
    return table


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device; this check is for a GPU (on a CPU: --dry-run, or python -m pytest)",
              file=sys.stderr)
        return 2
    name = "CPU dry run" if args.dry_run else torch.cuda.get_device_name()
    dev = slug(name)
    (args.out / "kernels").mkdir(parents=True, exist_ok=True)
    (args.out / "throughput").mkdir(parents=True, exist_ok=True)
    stem = args.out / "kernels" / f"gpu_check-{dev}"
    cli_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"normtrain-gpu-check-{os.getpid()}"
    start = time.monotonic()
    phases = run_phases(args, commands(args, dev, stem, cli_dir), stem)
    summary = cli_dir / "summary.json"
    if summary.exists():
        Path(f"{stem}.cli-summary.json").write_text(summary.read_text())
    table = write_table(args, name, dev, phases, time.monotonic() - start, torch.__version__)
    print("\n" + table)
    return 0 if all(v.get("status") in ("ok", "not run (--only)") for v in phases.values()) else 1


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    sys.exit(main())
