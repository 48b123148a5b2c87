"""The normtrain-probe command line: RUN_DIR [--out DIR]; prints the per-block table and where the files went.

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
        epilog="Example: normtrain-probe outputs/2026-01-01/12-00-00_pre-rmsnorm-L6. normtrain-compare shows the "
               "probe's figures for every run folder that holds a probe/ folder.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a finished run folder (with ckpt.pt)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: RUN_DIR/probe)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="where to run the model (default: auto, the GPU when there is one)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="validation windows per forward pass (default: the run's train.batch_size)")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.batch_size is not None and args.batch_size < 1:
        parser().error(f"--batch-size {args.batch_size}: must be at least 1")

    def body() -> None:
        from normtrain.probe.run import probe, table

        result = probe(args.run_dir, out=args.out, device=args.device, batch_size=args.batch_size)
        print(f"normtrain-probe: {result['run_dir']} (step {result['step']}, {result['status'] or 'no summary'}): "
              f"{result['eval_windows']} validation windows of {result['seq_len']} tokens on {result['device']}, "
              f"{result['wall_time_s']:.1f} s")
        print(table(result), end="")
        for note in result["notes"]:
            print(f"normtrain-probe: note: {note}")
        print(f"normtrain-probe: wrote probe.json, {', '.join(result['figures'])} to {result['out_dir']}")

    from normtrain.commands import run_command

    run_command("normtrain-probe", body, checkpoint_advice="The probe reads the run's final weights from that file: "
                "probe another run folder, or train this run again (its summary.json holds the config) to write a "
                "readable checkpoint")


if __name__ == "__main__":
    main(sys.argv[1:])
