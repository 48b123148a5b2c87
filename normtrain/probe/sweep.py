"""``normtrain-probe SWEEP_DIR``: every run folder under a folder (a Hydra multirun, or any folder of runs), one
after the other, with a line per run as it starts and ends.

A run that cannot be probed (a diverged run that kept no finite checkpoint, a job killed before its first log
step, a corpus no longer there) is named with the reason and skipped, and the others go on: a sweep with a
diverged run is the usual case, not an error. Only a folder where nothing could be probed fails (exit 2, every
reason listed). The run folders are found as normtrain-compare finds them (``normtrain.compare.runs``), so the
runs probed are the runs the report shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normtrain.compare.runs import PROBE_DIR, find_run_dirs
from normtrain.probe.inputs import RUN_MARKERS, ProbeError
from normtrain.util.errors import NormtrainError


@dataclass
class SweepProbe:
    """What probing a folder of runs did: each probed run's result, and each folder skipped with why."""

    folder: Path
    results: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def run_folders(folder: str | Path) -> tuple[list[Path], list[str]] | None:
    """The run folders under ``folder`` and the folders skipped on the way (job folders with nothing in them);
    None when ``folder`` is itself a run folder, or not a folder (the single-run probe says what is wrong)."""
    path = Path(folder).expanduser()
    if not path.is_dir() or any((path / name).exists() for name in RUN_MARKERS):
        return None
    return find_run_dirs([str(path)])


def probe_sweep(folder: str | Path, out: str | Path | None = None, say: Callable[[str], None] = print,
                **options: Any) -> SweepProbe:
    """Probe every run folder under ``folder`` (``options``: ``probe``'s device and batch_size), writing each
    into its own ``probe/`` (or ``out``/<its path under ``folder``>); ``say`` hears a line per run. Raises
    ProbeError when ``folder`` holds no run folder, or none of them could be probed."""
    from normtrain.probe.run import probe

    path = Path(folder).expanduser()
    dirs, skipped = run_folders(path) or ([], [])
    done = SweepProbe(path, skipped=list(skipped))
    if not dirs:
        raise ProbeError(f"{path} is not a run folder, nor a folder of run folders: it holds none of "
                         f"{', '.join(RUN_MARKERS)}, and none of its folders holds summary.json or metrics.jsonl. "
                         "Give the folder of one run, or a folder of them (a multirun)" + _reasons(done.skipped))
    for line in skipped:
        say(f"skipped: {line}")
    for i, run_dir in enumerate(dirs, 1):
        name = str(run_dir.relative_to(path.absolute())) if run_dir.is_relative_to(path.absolute()) else str(run_dir)
        say(f"[{i}/{len(dirs)}] {name}: probing ...")
        try:
            result = probe(run_dir, out=Path(out) / name if out is not None else None, **options)
        except NormtrainError as err:  # this run cannot be probed; the others can
            done.skipped.append(f"{name}: {err}")
            say(f"[{i}/{len(dirs)}] {name}: skipped: {err}")
            continue
        done.results.append(result)
        say(f"[{i}/{len(dirs)}] {name}: step {result['step']}, full model {result['val_loss']:.4f}, "
            f"{len(result['layers'])} blocks, {result['wall_time_s']:.1f} s; wrote {result['out_dir']}")
    if not done.results:
        raise ProbeError(f"none of the {len(dirs)} run folders in {path} could be probed" + _reasons(done.skipped))
    return done


def _reasons(skipped: list[str]) -> str:
    return "".join(f"\n  skipped: {line}" for line in skipped)


def summary(done: SweepProbe) -> str:
    """The closing line: how many were probed, how many skipped, and where the figures can be seen together."""
    skipped = f", skipped {len(done.skipped)} (above)" if done.skipped else ""
    runs = "run folder" if len(done.results) == 1 else "run folders"
    return (f"probed {len(done.results)} {runs} in {done.folder}{skipped}. The report shows the probe's figures of "
            f"every run whose folder holds {PROBE_DIR}/probe.json: normtrain-compare {done.folder}")
