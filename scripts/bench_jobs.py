"""Why ``normtrain-reproduce`` runs one single-threaded run per core (``--jobs``): the same runs, two ways.

    python scripts/bench_jobs.py [--jobs 2] [--repeats 3] [--steps 200] [--out FILE.json] [overrides...]

Both ways train ``--jobs`` identical runs (default: ``experiment=lr_sensitivity`` at 8 layers, the tiny models the
reproductions train), each a fresh ``python -m normtrain.cli`` process, timed as whole processes from outside:

  parallel    the runs at once, each with one thread (``OMP_NUM_THREADS=1``): what ``--jobs N`` does;
  sequential  the runs one after another, each with ``--jobs`` threads: what ``--jobs 1`` does with torch's threads.

The two alternate (parallel, sequential, parallel, ...) so that drift on the machine hits both. The figure is the
ratio of elapsed times sequential / parallel, pair by pair (above 1: running them side by side is faster). Small
models parallelise badly inside one step (each matmul is a few MFLOP), so the expectation is a ratio near the
number of cores; what it is on a given machine is what this measures.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def launch(overrides: list[str], run_dir: Path, threads: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    return subprocess.Popen([sys.executable, "-m", "normtrain.cli", *overrides, f"hydra.run.dir={run_dir}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"a training run failed (exit {proc.returncode}):\n{err[-2000:]}")


def elapsed(overrides: list[str], folder: Path, jobs: int, parallel: bool) -> float:
    """Seconds to finish ``jobs`` runs, side by side with one thread each or one by one with ``jobs`` threads."""
    start = time.perf_counter()
    dirs = [folder / f"run{i}" for i in range(jobs)]
    if parallel:
        procs = [launch(overrides, d, 1) for d in dirs]
        try:
            for proc in procs:
                finish(proc)
        finally:  # one run failed: stop its siblings rather than leave them training into a deleted folder
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    else:
        for d in dirs:
            finish(launch(overrides, d, jobs))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs (and threads); default: cores")
    parser.add_argument("--repeats", type=int, default=3, help="pairs of (parallel, sequential)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("overrides", nargs="*", help="config overrides (default: lr_sensitivity's model, 8 layers)")
    args = parser.parse_args()
    if args.jobs < 2 or args.repeats < 1 or args.steps < 1:
        parser.error("need --jobs ≥ 2, --repeats ≥ 1 and --steps ≥ 1")
    overrides = [*(args.overrides or ["experiment=lr_sensitivity", "model.n_layers=8", "optim.lr=1e-3"]),
                 f"train.max_steps={args.steps}", f"train.eval_every={args.steps}", "logger=none",
                 "train.progress=false"]
    times: dict[str, list[float]] = {"parallel": [], "sequential": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for way in times:
                times[way].append(elapsed(overrides, Path(tmp) / f"{way}{i}", args.jobs, way == "parallel"))
            print(f"pair {i}: {args.jobs} runs side by side, 1 thread each {times['parallel'][-1]:6.1f} s; "
                  f"one by one, {args.jobs} threads each {times['sequential'][-1]:6.1f} s", flush=True)
    ratios = [s / p for p, s in zip(times["parallel"], times["sequential"], strict=True)]
    result = {"ratio_median": statistics.median(ratios), "ratios": ratios, "elapsed_s": times, "jobs": args.jobs,
              "steps": args.steps, "overrides": overrides, "python": platform.python_version(),
              "torch": importlib.metadata.version("torch"),
              "device": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores",
              "load_average": os.getloadavg()}
    print(f"one by one / side by side: {result['ratio_median']:.2f} (median of {args.repeats} pairs: "
          f"{', '.join(f'{r:.2f}' for r in ratios)})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
