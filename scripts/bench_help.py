"""How long ``--help`` takes for each command (the target: at most 1.5 s), and whether it loads torch.

    python scripts/bench_help.py [--repeat 7] [--out experiments/cli_help.json]

Each command runs ``--repeat`` times in a fresh process (after one untimed warm-up run that fills the OS file
cache); the median wall time is reported with the minimum and maximum. One more, untimed run of each entry
point's function says which heavy modules (torch, torch._dynamo, wandb, datasets) printing help loaded. The
numbers depend on the machine and its load: the JSON records the CPU count and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = ("normtrain", "normtrain-compare", "normtrain-reproduce", "normtrain-probe")
ENTRY_POINTS = {"normtrain": "normtrain.cli:run", "normtrain-compare": "normtrain.compare.cli:main",
                "normtrain-reproduce": "normtrain.reproduce.cli:main", "normtrain-probe": "normtrain.probe.cli:main"}
TARGET_S = 1.5
PROBE = """import sys
sys.argv = ['prog', '--help']
from {module} import {function}
try:
    {function}()
except SystemExit:
    pass
print('HEAVY:' + ','.join(sorted({{'torch', 'torch._dynamo', 'wandb', 'datasets'}} & set(sys.modules))))
"""


def executable(command: str) -> str:
    """The console script beside this interpreter (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).with_name(command)
    return str(beside) if beside.exists() else shutil.which(command) or command


def time_help(command: str, repeat: int) -> list[float]:
    argv = [executable(command), "--help"]
    subprocess.run(argv, capture_output=True, check=True)  # warm-up: the file cache, .pyc files
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def heavy_imports(command: str) -> list[str]:
    module, function = ENTRY_POINTS[command].split(":")
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module, function=function)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    found = [line.removeprefix("HEAVY:") for line in out if line.startswith("HEAVY:")]
    return [m for m in (found[-1] if found else "").split(",") if m]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    results = []
    for command in COMMANDS:
        times = time_help(command, args.repeat)
        results.append({"command": f"{command} --help", "median_s": round(statistics.median(times), 3),
                        "min_s": round(min(times), 3), "max_s": round(max(times), 3),
                        "imports": heavy_imports(command)})
    print(f"{'command':28s} {'median':>8s} {'min':>7s} {'max':>7s}  heavy imports")
    for r in results:
        flag = "" if r["median_s"] <= TARGET_S else f"  (over {TARGET_S} s)"
        print(f"{r['command']:28s} {r['median_s']:7.2f}s {r['min_s']:6.2f}s {r['max_s']:6.2f}s  "
              f"{', '.join(r['imports']) or '-'}{flag}")
    if args.out:
        machine = {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
                   "python": sys.version.split()[0], "repeat": args.repeat}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"machine": machine, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
