"""Find run folders and read them, forgiving whatever a killed or half-written run left behind.

A run folder holds ``summary.json`` (written once, at the end) and ``metrics.jsonl`` (one JSON object per
logged step, appended as the run goes). A run killed mid-way has no summary: it is read from its metrics
(status ``incomplete``) and, where Hydra wrote it, ``.hydra/config.yaml`` (which also restores the config
values that summary.json, being strict JSON, wrote as null: inf, -inf, nan). Nothing here raises on a bad
folder; each problem becomes a ``skipped`` entry or a note on the run, for the report to show.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from normtrain.loggers.base import HEAD_KEY, LAYER_KEY  # noqa: F401 - also compare's names for them (figdata, specs)

RUN_FILES = ("summary.json", "metrics.jsonl")
PROBE_DIR, PROBE_JSON = "probe", "probe.json"  # RUN_DIR/probe/probe.json: what normtrain-probe writes
PROBE_FORMAT = 1  # probe.json's layout (normtrain-probe writes this one); bumped on a change that breaks reading it
NOT_RUNS = {"wandb", "compare", PROBE_DIR, "__pycache__"}  # folders that never hold runs of their own


@dataclass
class Run:
    """One run folder, read: its summary (possibly rebuilt from metrics), config and logged rows."""

    path: Path
    summary: dict[str, Any]
    config: dict[str, Any] | None
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # metrics.jsonl's event rows (rollbacks)
    probe: dict[str, Any] | None = None  # probe/probe.json, when normtrain-probe has probed the run
    label: str = ""
    group: str = ""  # the label of its seed group (normtrain.compare.groups)
    color: str = ""  # its group's colour, the same in every figure

    @property
    def status(self) -> str:
        return str(self.summary.get("status") or "incomplete")

    @property
    def diverged_at(self) -> int | None:
        return self.summary.get("diverged_at_step")

    @property
    def seed(self) -> Any:
        """Its ``train.seed`` (None without a config)."""
        train = (self.config or {}).get("train")
        return train.get("seed") if isinstance(train, dict) else None

    @property
    def rollbacks(self) -> list[dict[str, Any]]:
        """The run's rollbacks (normtrain/training/rollback.py): summary.json's record, or, from a run killed before it
        wrote one, metrics.jsonl's event rows."""
        recorded = self.summary.get("rollbacks")
        if isinstance(recorded, list) and recorded:
            return [r for r in recorded if isinstance(r, dict) and isinstance(r.get("step"), int)]
        return [{"step": e["step"], **{k.removeprefix("rollback/"): v for k, v in e.items()
                                       if k.startswith("rollback/")}}
                for e in self.events if e.get("event") == "rollback"]

    def keys(self) -> set[str]:
        return {k for row in self.rows for k in row}

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of the rows that logged ``key``; null (non-finite) values become NaN."""
        pairs = [(row["step"], _number(row[key])) for row in self.rows if key in row]
        if not pairs:
            return np.empty(0), np.empty(0)
        steps, values = zip(*pairs, strict=True)
        return np.asarray(steps, dtype=float), np.asarray(values, dtype=float)

    def last(self, key: str) -> float | None:
        """The last finite value logged for ``key``."""
        _, values = self.series(key)
        finite = values[np.isfinite(values)]
        return float(finite[-1]) if finite.size else None

    def layer_keys(self, prefix: str) -> list[str]:
        """``prefix/layer_0``, ``prefix/layer_1``, ... as logged, in layer order."""
        found = {}
        for key in self.keys():
            m = LAYER_KEY.match(key)
            if m and m["prefix"] == prefix:
                found[int(m["index"])] = key
        return [found[i] for i in sorted(found)]

    def head_keys(self, prefix: str) -> dict[tuple[int, int], str]:
        """``{(layer, head): "prefix/layer_i/head_j"}`` as logged (per-head values: attn_logit_max)."""
        return {(int(m["layer"]), int(m["head"])): key for key in self.keys()
                if (m := HEAD_KEY.match(key)) and m["prefix"] == prefix}

    def layer_matrix(self, prefix: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values[step, layer]) over the rows that logged any ``prefix/layer_i``; gaps are NaN."""
        keys = self.layer_keys(prefix)
        rows = [row for row in self.rows if any(k in row for k in keys)]
        steps = np.asarray([row["step"] for row in rows], dtype=float)
        values = np.asarray([[_number(row.get(k)) for k in keys] for row in rows], dtype=float)
        return steps, values.reshape(len(rows), len(keys))

    def tokens_per_s(self) -> float | None:
        """Median of the logged throughputs (the first log step has none)."""
        _, values = self.series("tokens_per_s")
        finite = values[np.isfinite(values)]
        return float(np.median(finite)) if finite.size else None


def natural_key(text: str) -> list:
    """Sort key that puts ``L6`` before ``L12`` and job ``2_...`` before ``10_...``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def find_run_dirs(paths: list[str], exclude: Path | None = None) -> tuple[list[Path], list[str]]:
    """Run folders under ``paths`` (folders, run folders or globs, searched recursively), and what was skipped.

    A folder is a run when it holds ``summary.json`` or ``metrics.jsonl``; the search does not go into runs.
    A job folder of a multirun (a sibling of ``multirun.yaml``) or a Hydra run folder (``.hydra/``) that
    holds neither is reported as skipped: that is a job killed before its first log step.
    """
    found: dict[Path, Path] = {}  # the resolved folder (one entry per run) -> the folder as the user named it
    skipped: list[str] = []
    exclude = exclude.resolve() if exclude else None
    for pattern in paths:
        matches = sorted(glob.glob(pattern, recursive=True), key=natural_key) if glob.has_magic(pattern) else [pattern]
        if not matches:
            skipped.append(f"{pattern}: no such file or folder")
            continue
        for match in matches:
            before = len(skipped)
            if not _walk(Path(match), found, skipped, exclude, top=True) and len(skipped) == before \
                    and Path(match).is_dir():
                skipped.append(f"{match}: no run folders (no summary.json or metrics.jsonl) in it")
    return list(found.values()), skipped


def _found(found: dict[Path, Path], folder: Path) -> bool:
    """Keep a run once however it was reached, under the path it was reached by: a symlinked multirun/ stays
    relative to the checkout in the report instead of turning into the link's target."""
    found.setdefault(folder.resolve(), folder.absolute())
    return True


def _walk(path: Path, found: dict[Path, Path], skipped: list[str], exclude: Path | None, top: bool) -> bool:
    """Whether ``path`` is or holds a run (found now or already)."""
    if not path.exists():
        skipped.append(f"{path}: no such file or folder")
        return False
    if path.is_file():  # a summary.json or metrics.jsonl named directly
        if path.name in RUN_FILES:
            return _found(found, path.parent)
        skipped.append(f"{path}: not a run folder or run file")
        return False
    if exclude is not None and path.resolve() == exclude:
        return False
    if any((path / name).is_file() for name in RUN_FILES):
        return _found(found, path)
    try:
        children = sorted((p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")),
                          key=lambda p: natural_key(p.name))
    except OSError as err:
        skipped.append(f"{path}: cannot be read ({err.strerror or err})")
        return False
    is_sweep = (path / "multirun.yaml").is_file()
    if (path / ".hydra").is_dir():
        skipped.append(f"{path}: no summary.json or metrics.jsonl (killed before its first log step?)")
        return False
    if top and not children:
        skipped.append(f"{path}: no summary.json or metrics.jsonl")
        return False
    held = False
    for child in children:
        if child.name in NOT_RUNS:
            continue
        if is_sweep and not _holds_runs(child, exclude):
            skipped.append(f"{child}: no summary.json or metrics.jsonl (killed before its first log step?)")
            continue
        held = _walk(child, found, skipped, exclude, top=False) or held
    return held


def _holds_runs(path: Path, exclude: Path | None) -> bool:
    if exclude is not None and path.resolve() == exclude:
        return True  # not a job; nothing to report
    return any(name in files for _, _, files in os.walk(path) for name in RUN_FILES)


def read_metrics(path: Path, notes: list[str], events: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Rows of ``metrics.jsonl`` in step order. Unreadable lines (a truncated last line) are noted and dropped;
    a run resumed from a checkpoint, or rolled back to one, logs from that step again, and its new rows replace
    the old ones (the curve as trained). Event rows (``"event"``: a rollback) go to ``events``."""
    rows: list[dict[str, Any]] = []
    bad: list[int] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        notes.append(f"{path.name} cannot be read ({err.strerror or err})")
        return rows
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            bad.append(n)
            continue
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            bad.append(n)
            continue
        if "event" in row:
            if events is not None:
                events.append(row)
            continue
        while rows and rows[-1]["step"] >= row["step"]:
            rows.pop()
        rows.append(row)
    if bad:
        where = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        notes.append(f"{path.name}: {len(bad)} unreadable line(s) ignored (line {where}; truncated?)")
    return rows


def read_object(path: Path, name: str, instead: str, notes: list[str]) -> dict[str, Any] | None:
    """The JSON object in ``path``; None for no file, and for one that cannot be read or holds something else
    with a note naming the file (``name``) and what is done ``instead``."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        notes.append(f"{name} is unreadable ({type(err).__name__}); {instead}")
        return None
    if not isinstance(value, dict):
        notes.append(f"{name} is not a JSON object; {instead}")
        return None
    return value


def read_hydra_config(run_dir: Path) -> dict[str, Any] | None:
    """``.hydra/config.yaml`` when PyYAML is installed (it comes with Hydra); None otherwise."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return None
    try:
        import yaml
    except ImportError:
        return None
    try:
        value = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return value if isinstance(value, dict) else None


def with_non_finite(config: Any, hydra_config: Any) -> Any:
    """``config`` (from summary.json) with each null that Hydra's config.yaml holds as inf, -inf or nan.

    Strict JSON has no inf or nan, so summary.json records a config value ``optim.lr=inf`` as null, which would
    read as "not set"; YAML keeps it (``.inf``). Everything else comes from the summary: its config is the
    resolved one, while config.yaml may hold interpolations.
    """
    if config is None and isinstance(hydra_config, float) and not math.isfinite(hydra_config):
        return hydra_config
    if isinstance(config, dict) and isinstance(hydra_config, dict):
        return {k: with_non_finite(v, hydra_config.get(k)) for k, v in config.items()}
    if isinstance(config, list) and isinstance(hydra_config, list) and len(config) == len(hydra_config):
        return [with_non_finite(v, h) for v, h in zip(config, hydra_config, strict=True)]
    return config


def load_run(run_dir: Path) -> Run | str:
    """The run in ``run_dir``, or why it cannot be used."""
    notes: list[str] = []
    summary = read_object(run_dir / "summary.json", "summary.json", "read from metrics.jsonl instead", notes)
    metrics = run_dir / "metrics.jsonl"
    events: list[dict[str, Any]] = []
    rows = read_metrics(metrics, notes, events) if metrics.is_file() else []
    if summary is None and not rows:
        why = "; ".join(notes) if notes else "metrics.jsonl has no rows yet"
        return f"{run_dir}: {why}"
    config = summary.get("config") if summary else None
    hydra_config = read_hydra_config(run_dir)
    config = with_non_finite(config, hydra_config) if isinstance(config, dict) else hydra_config
    if summary is not None and summary.get("error"):
        notes.append(f"{summary.get('status', 'failed')}: {summary['error']}")
    if summary is not None and summary.get("status") == "running":
        notes.append("status running: still training, or killed mid-way (rerun it to resume): read from metrics.jsonl")
    if summary is None:
        notes.append("no summary.json (killed mid-way, or still running): read from metrics.jsonl")
        summary = {"status": "incomplete"}
    if not rows:
        notes.append("metrics.jsonl is missing or empty: no curves")
    run = Run(path=run_dir, summary=dict(summary), config=config, rows=rows, notes=notes, events=events,
              probe=read_probe(run_dir, notes))
    _fill_from_metrics(run)
    return run


def read_probe(run_dir: Path, notes: list[str]) -> dict[str, Any] | None:
    """The run's probe/probe.json (normtrain-probe), or None; one that cannot be read costs a note."""
    probe = read_object(run_dir / PROBE_DIR / PROBE_JSON, f"{PROBE_DIR}/{PROBE_JSON}",
                        "no probe figures (rerun normtrain-probe on the run)", notes)
    if probe is not None and probe.get("format") != PROBE_FORMAT:
        notes.append(f"{PROBE_DIR}/{PROBE_JSON} was written by another normtrain-probe (format "
                     f"{probe.get('format')}, not {PROBE_FORMAT}): rerun normtrain-probe on the run for its figures")
        return None
    return probe


def _fill_from_metrics(run: Run) -> None:
    """Summary values a killed run never wrote, taken from its metrics."""
    s = run.summary
    if s.get("steps") is None and run.rows:
        s["steps"] = run.rows[-1]["step"]
    _, val = run.series("val/loss")
    finite = val[np.isfinite(val)]
    if s.get("final_val_loss") is None and val.size and s["status"] in ("incomplete", "running"):
        s["final_val_loss"] = float(val[-1]) if math.isfinite(val[-1]) else None
    if s.get("best_val_loss") is None and finite.size:
        s["best_val_loss"] = float(finite.min())
    if s.get("final_val_bpb") is None and s.get("final_val_loss") is not None:
        s["final_val_bpb"] = s["final_val_loss"] / math.log(2)


def load_runs(paths: list[str], exclude: Path | None = None) -> tuple[list[Run], list[str]]:
    """Every readable run under ``paths`` and a ``<path>: <why>`` line for each folder skipped."""
    dirs, skipped = find_run_dirs(paths, exclude)
    runs: list[Run] = []
    for run_dir in dirs:
        loaded = load_run(run_dir)
        if isinstance(loaded, str):
            skipped.append(loaded)
        else:
            runs.append(loaded)
    return runs, skipped
