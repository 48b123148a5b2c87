"""The normtrain-probe command line: RUN_DIR [--out DIR]; prints the per-block table and where the files went. Given a
folder of runs (a sweep) instead, probes each run folder in it (normtrain.probe.sweep), a line per run.

Exit codes as every normtrain command (normtrain.commands): 0 done, 2 with a one-paragraph message for a folder
that cannot be probed, 130 when interrupted. ``--help`` imports neither torch nor Hydra.
"""

from __future__ import annotations

import argparse
import sys


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="normtrain-probe",
        description="Per-layer anatomy of a trained run, on its own validation windows: the eval loss with each "
                    "block skipped (which layers does the model use?), each block's input/output cosine, the "
                    "residual stream's rms and max |x|, and each norm's input → output curve with its fitted "
                    "γ·tanh(α·x) (the S-curve DyT is built on). Writes probe.json and PNGs.",
        epilog="Examples: normtrain-probe outputs/2026-01-01/12-00-00_pre-rmsnorm-L6; normtrain-probe "
               "multirun/2026-01-01/12-00-00 (every run folder in the sweep; one that cannot be probed, such as a "
               "diverged run that kept no finite checkpoint, is named and skipped). normtrain-compare shows the "
               "probe's figures for every run folder that holds a probe/ folder.")
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="a finished run folder (with ckpt.pt), or a folder of them (a sweep): each is probed")
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default: RUN_DIR/probe; for a sweep, DIR/<run folder> for each run)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="where to run the model (default: auto, the GPU when there is one)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="validation windows per forward pass (default: the run's train.batch_size)")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.batch_size is not None and args.batch_size < 1:
        parser().error(f"--batch-size {args.batch_size}: must be at least 1")

    from normtrain.commands import run_command

    run_command("normtrain-probe", lambda: probe_path(args), checkpoint_advice="The probe reads the run's final "
                "weights from that file: probe another run folder, or train this run again (its summary.json holds "
                "the config) to write a readable checkpoint")


def probe_path(args: argparse.Namespace) -> None:
    """One run folder: its table; a folder of runs: each of them, a line per run."""
    from normtrain.probe.sweep import probe_sweep, run_folders, summary

    if run_folders(args.run_dir) is None:
        probe_one(args)
        return
    done = probe_sweep(args.run_dir, out=args.out, say=lambda line: print(f"normtrain-probe: {line}", flush=True),
                       device=args.device, batch_size=args.batch_size)
    for result in done.results:
        for note in result["notes"]:
            print(f"normtrain-probe: note: {result['run_dir']}: {note}")
    print(f"normtrain-probe: {summary(done)}")


def probe_one(args: argparse.Namespace) -> None:
    from normtrain.probe.run import probe, table

    result = probe(args.run_dir, out=args.out, device=args.device, batch_size=args.batch_size)
    print(f"normtrain-probe: {result['run_dir']} (step {result['step']}, {result['status'] or 'no summary'}): "
          f"{result['eval_windows']} validation windows of {result['seq_len']} tokens on {result['device']}, "
          f"{result['wall_time_s']:.1f} s")
    print(table(result), end="")
    for note in result["notes"]:
        print(f"normtrain-probe: note: {note}")
    print(f"normtrain-probe: wrote probe.json, {', '.join(result['figures'])} to {result['out_dir']}")


if __name__ == "__main__":
    main(sys.argv[1:])
