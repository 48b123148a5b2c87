"""Clean distributed exits, counted: N consecutive two-process gloo runs of a tiny model under torchrun.

    python scripts/ddp_exit_tally.py                        # 50 runs, a tally on stdout (about 15 s a run on 2 cores)
    python scripts/ddp_exit_tally.py --runs 20 --json tally.json

Runs alternate between DDP and FSDP, and every third one is given a learning rate that diverges (a diverged run
is a result and must exit 0 too). A run is clean when torchrun and both ranks exit 0, ``summary.json`` says
``completed`` or ``diverged`` as intended, and no thread of the process group is left when the interpreter
starts to exit. That last check is the cause of the teardown aborts this script was written for: gloo's worker
threads (``pt_gloo_runloop``, ``gloo_tcp_loop``) still running while Python finalizes, because the model wrapper
kept the group alive after ``destroy_process_group``, sometimes ended a finished run with "terminate called
without an active exception" and torchrun's ChildFailedError. Each rank reports its native threads from an
``atexit`` hook (run as the script's own ``--worker`` mode), so the check does not depend on that race firing.

Exit status: 0 when every run was clean, 1 otherwise.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TINY = ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.seq_len=32", "train.max_steps=8",
        "train.batch_size=4", "train.eval_every=4", "train.eval_batches=2", "monitor.every=2", "logger=none",
        "train.progress=false"]
DIVERGE = ["optim.lr=1e4", "optim.warmup_steps=0", "optim.grad_clip=0", "placement=post"]
GROUP_THREADS = ("pt_gloo", "gloo_", "pt_nccl")  # name prefixes of the process group's native threads


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50, help="consecutive torchrun runs (default 50)")
    ap.add_argument("--diverge-every", type=int, default=3,
                    help="every k-th run diverges (0: none); default 3")
    ap.add_argument("--strategies", default="ddp,fsdp", help="train.strategy of the runs, in turn (default ddp,fsdp)")
    ap.add_argument("--json", type=Path, default=None, help="also write the tally and every run's record here")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a run may take (default 300)")
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)  # a rank: report threads here
    ap.add_argument("overrides", nargs="*", help="further config overrides for every run")
    return ap.parse_args(argv)


def native_threads() -> list[str] | None:
    """Names of this process's native threads other than the calling one (Linux's /proc; None elsewhere)."""
    tasks = Path(f"/proc/{os.getpid()}/task")
    if not tasks.is_dir():
        return None
    names = []
    for task in tasks.iterdir():
        if int(task.name) == threading.get_native_id():
            continue
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # it ended while we looked
            pass
    return sorted(names)


def worker(report_dir: Path, overrides: list[str]) -> None:
    """One rank: normtrain's CLI, with an atexit hook (registered first, so it runs after every other one)
    writing the threads still alive as the interpreter begins to finalize."""
    rank = os.environ.get("RANK", "0")

    def report() -> None:
        (report_dir / f"rank{rank}.json").write_text(json.dumps({"rank": int(rank), "threads": native_threads()}))

    atexit.register(report)
    from normtrain.cli import run

    sys.argv = [sys.argv[0], *overrides]
    run()


def write_corpus(folder: Path) -> Path:
    """A small folder of Python-like text files (about 60 KB): tokenized in well under a second."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(40):
        lines = [f"def function_{i}_{j}(x):\n    return x * {j} + {i}  # line {j}\n" for j in range(40)]
        (folder / f"file_{i:02d}.py").write_text("".join(lines))
    return folder


def one_run(index: int, args: argparse.Namespace, root: Path, corpus: Path) -> dict:
    strategies = args.strategies.split(",")
    strategy = strategies[index % len(strategies)]
    diverge = args.diverge_every > 0 and index % args.diverge_every == args.diverge_every - 1
    run_dir, reports = root / f"run{index:03d}", root / f"threads{index:03d}"
    reports.mkdir()
    overrides = [*TINY, "data=local_text", f"data.path={corpus}", f"train.strategy={strategy}",
                 *(DIVERGE if diverge else []), *args.overrides, f"hydra.run.dir={run_dir}"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
           str(Path(__file__).resolve()), "--worker", str(reports), *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "WANDB_MODE": "offline"}
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=args.timeout)
        rc, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as err:
        rc, stderr = None, f"timed out after {args.timeout} s\n{err.stderr or ''}"
    summary = run_dir / "summary.json"
    status = json.loads(summary.read_text()).get("status") if summary.exists() else None
    ranks = [json.loads(p.read_text()) for p in sorted(reports.glob("rank*.json"))]
    left = {r["rank"]: [t for t in r["threads"] or [] if t.startswith(GROUP_THREADS)] for r in ranks}
    record = {"run": index, "strategy": strategy, "expected": "diverged" if diverge else "completed",
              "returncode": rc, "status": status, "seconds": round(time.perf_counter() - start, 1),
              "ranks_reported": len(ranks), "group_threads_at_exit": {k: v for k, v in left.items() if v}}
    record["clean"] = (rc == 0 and status == record["expected"] and len(ranks) == 2
                       and not record["group_threads_at_exit"])
    if not record["clean"]:
        record["stderr_tail"] = stderr[-2000:] if isinstance(stderr, str) else str(stderr)[-2000:]
    return record


def tally(records: list[dict]) -> dict:
    return {"runs": len(records),
            "all_ranks_exit_0": sum(r["returncode"] == 0 for r in records),
            "status_as_intended": sum(r["status"] == r["expected"] for r in records),
            "diverged_runs": sum(r["expected"] == "diverged" for r in records),
            "group_threads_alive_at_exit": sum(bool(r["group_threads_at_exit"]) for r in records),
            "clean": sum(r["clean"] for r in records),
            "failures": [r for r in records if not r["clean"]]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.overrides)
        return 0
    records = []
    with tempfile.TemporaryDirectory(prefix="ddp-exit-tally-") as tmp:
        root = Path(tmp)
        corpus = write_corpus(root / "corpus")
        for i in range(args.runs):
            record = one_run(i, args, root, corpus)
            records.append(record)
            print(f"run {i + 1}/{args.runs} {record['strategy']} {record['expected']}: "
                  f"{'clean' if record['clean'] else 'NOT CLEAN'} (exit {record['returncode']}, "
                  f"status {record['status']}, {record['seconds']} s)", flush=True)
    result = tally(records)
    for r in result["failures"]:
        print(f"\nrun {r['run']} ({r['strategy']}, {r['expected']}): exit {r['returncode']}, status {r['status']}, "
              f"group threads at exit {r['group_threads_at_exit'] or 'none'}\n{r['stderr_tail']}")
    print(f"\nruns {result['runs']}; all ranks exit 0: {result['all_ranks_exit_0']}; status as intended: "
          f"{result['status_as_intended']} ({result['diverged_runs']} meant to diverge); process-group threads "
          f"alive at interpreter exit: {result['group_threads_alive_at_exit']}; clean: {result['clean']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**result, "records": records}, indent=1))
    return 0 if result["clean"] == result["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
