"""``probe``: one run folder in, ``probe.json`` and the PNGs out (default ``RUN_DIR/probe/``), and the table the
command prints."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from normtrain.compare.runs import PROBE_DIR, PROBE_FORMAT, PROBE_JSON  # where compare looks for it
from normtrain.probe import figures
from normtrain.probe.inputs import load_probe_run
from normtrain.probe.layers import anatomy, skip_losses
from normtrain.probe.norm_curves import norm_curves
from normtrain.util.atomic import write_json

SKIP_MEANS = ("block i replaced by the identity: the stream that enters it leaves it unchanged (for placements "
              "that norm the stream after the add, such as Post-LN, that norm is skipped with the block)")


def probe(run_dir: str | Path, out: str | Path | None = None, device: str = "auto",
          batch_size: int | None = None) -> dict[str, Any]:
    """Probe the trained model of ``run_dir``; write probe.json and the figures into ``out``; return the result."""
    started = time.perf_counter()
    run = load_probe_run(run_dir, device, batch_size)
    loss, stats = anatomy(run)
    skips = skip_losses(run)
    layers = [{"layer": i, "skip_val_loss": s, "skip_delta": s - loss,
               **{k: v[i] for k, v in stats.items()}} for i, s in enumerate(skips)]
    result = {
        "format": PROBE_FORMAT, "run_dir": str(run.path), "step": run.step, "status": run.status,
        "label": f"{run.config.placement.name}-{run.config.norm.name}-L{run.config.model.n_layers}",
        "device": str(run.device), "eval_windows": run.n_windows, "seq_len": run.config.model.seq_len,
        "val_loss": loss, "run_final_val_loss": run.summary.get("final_val_loss"), "skip_means": SKIP_MEANS,
        "layers": layers, "norms": norm_curves(run), "notes": run.notes,
    }
    result["out_dir"] = str(Path(out) if out is not None else run.path / PROBE_DIR)
    write(result, Path(result["out_dir"]), started)
    return result


def write(result: dict[str, Any], out: Path, started: float) -> None:
    """The PNGs, then probe.json (with their names and the wall time, figures included) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    result["figures"] = [p.name for p in figures.write(result, out)]
    result["wall_time_s"] = round(time.perf_counter() - started, 3)
    write_json(out / PROBE_JSON, result)


def table(result: dict[str, Any]) -> str:
    """The per-block numbers and the norms' fits as plain text."""
    lines = [f"{'block':>5}  {'skip loss':>9}  {'Δ loss':>8}  {'cos(in,out)':>11}  {'rms':>9}  {'max |x|':>9}"]
    for r in result["layers"]:
        lines.append(f"{r['layer']:>5}  {r['skip_val_loss']:9.4f}  {r['skip_delta']:+8.4f}  {r['block_cos']:11.4f}  "
                     f"{r['act_rms']:9.4g}  {r['act_absmax']:9.4g}")
    final = result["run_final_val_loss"]
    lines.append(f"full model: {result['val_loss']:.4f}" + (f" (the run's final val loss: {final:.4f})"
                                                           if final is not None else ""))
    if result["norms"]:
        lines.append(f"{'norm':<24}  {'kind':<22}  {'α':>8}  {'γ':>8}  {'R² tanh':>7}  {'R² line':>7}")
        for n in result["norms"]:
            f = n["fit"]
            lines.append(f"{n['name']:<24}  {n['kind']:<22}  {f['alpha']:8.4g}  {f['gamma']:8.4g}  {f['r2']:7.4f}  "
                         f"{f['r2_line']:7.4f}")
    return "\n".join(lines) + "\n"
