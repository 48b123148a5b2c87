"""What normtrain-ablate costs beyond its runs, and what a T/2 decay branch costs against its T run.

Runs one small ablation (2 arms × 3 lrs × N seeds at T steps, and each run's T/2 WSD branch) in one process with
one thread, then reports, from the same invocation:

- **overhead**: the invocation's wall time over the sum of its runs' own wall times (``summary.json``'s
  ``wall_time_s``): planning, reading the runs, the analysis, the figures and the write-up on top of training
  (``--report``: and normtrain-compare's page, whose rendering costs seconds whatever the runs' size);
- **branch cost**: the median T/2 branch's own time over the median T run's (target ≤ 15%).

    python scripts/bench_ablate.py --steps 200 --seeds 2 --out /tmp/bench_ablate     # prints a table, writes JSON
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--out", default="/tmp/normtrain_bench_ablate")
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--report", action="store_true", help="count report/report.html too (normtrain-compare's page, "
                                                         "seconds of rendering whatever the runs' size)")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from normtrain.ablate.cli import main as ablate

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [f"model.d_model={args.d_model},{args.d_model // 2}", "model.n_layers=2", "model.n_heads=2",
           "model.seq_len=64", "train.batch_size=8", f"train.max_steps={args.steps}", "train.eval_every=0",
           "train.eval_windows=128", "optim.schedule=wsd", "optim.warmup_steps=10", "logger=none",
           "--seeds", str(args.seeds), "--grid", "3e-3,1e-2,3e-2", "--max-extensions", "0", "--jobs", "1",
           "--no-progress", "--allow-dirty", "--out", str(out), *([] if args.report else ["--no-report"])]
    t0 = time.perf_counter()
    if ablate(cmd) != 0:
        return 1
    wall = time.perf_counter() - t0
    own = {d: [json.loads(f.read_text())["wall_time_s"] for f in (out / d).glob("*/summary.json")]
           for d in ("runs", "runs_half")}
    total = sum(own["runs"]) + sum(own["runs_half"])
    found = {"runs": len(own["runs"]) + len(own["runs_half"]), "invocation_s": round(wall, 2),
             "runs_own_s": round(total, 2), "overhead": round(wall / total - 1, 4),
             "branch_over_t": round(statistics.median(own["runs_half"]) / statistics.median(own["runs"]), 4),
             "steps": args.steps, "seeds": args.seeds, "d_model": args.d_model, "threads": 1,
             "report": args.report}
    print("| runs | invocation s | runs' own s | overhead | T/2 branch / T run |")
    print("|---|---|---|---|---|")
    print(f"| {found['runs']} | {found['invocation_s']} | {found['runs_own_s']} | {found['overhead']:+.1%} | "
          f"{found['branch_over_t']:.1%} |")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
