"""``normtrain-compare SWEEP --tune optim.lr --baseline KEY=V``: a sweep the user already ran, judged best against
best by the same engine as normtrain-ablate (normtrain/study/), and what the sweep cannot support said plainly.

The arms are the values of KEY among the runs; the tuned values, seeds (``train.seed``) and budgets
(``train.max_steps``) are read from each run's config. Runs at two lengths, one half the other, are T and T/2;
a sweep of one length has no budget check. A run trained with ``train.select_windows`` is picked by its held-out
selection loss; one without by the mean of its last 10% of training losses, which lags behind a decaying schedule
(the verdict says so). Writes ``verdict.md``, ``ablation.json`` and the figures into ``--out``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from normtrain.compare.runs import Run, load_runs
from normtrain.study import report
from normtrain.study.best_against_best import STEPS, analyse, study_row
from normtrain.study.decision import Protocol
from normtrain.study.question import Question
from normtrain.util.dotted import flatten
from normtrain.util.errors import StudyError

SEED = "train.seed"
IGNORED = ("train.seed", "train.max_steps", "train.select_windows", "train.keep_ckpt_at", "train.resume",
           "train.allow_changes", "train.progress", "logger", "data.cache_dir", "hydra")


def value(config: dict[str, Any], key: str) -> Any:
    return flatten(config).get(key)


def rows_of(runs: list[Run], arm_key: str, tune: str) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        config = run.summary.get("config") or run.config or {}
        rows.append({arm_key: str(value(config, arm_key)), tune: value(config, tune), SEED: str(value(config, SEED)),
                     STEPS: int(value(config, "train.max_steps") or 0), **study_row(run, tail_fallback=True)})
    return rows


def budgets(rows: list[dict[str, Any]]) -> tuple[int, int | None]:
    """T (the longest runs) and T/2 when some runs are half as long."""
    lengths = sorted({r[STEPS] for r in rows})
    steps = lengths[-1]
    return steps, steps // 2 if steps // 2 in lengths and steps % 2 == 0 else None


def limits(rows: list[dict[str, Any]], arms: list[str], arm_key: str, tune: str, runs: list[Run]) -> list[str]:
    """What the sweep cannot support, in words."""
    said = []
    steps, half = budgets(rows)
    full = [r for r in rows if r[STEPS] == steps]
    for arm in arms:
        mine = [r for r in full if r[arm_key] == arm]
        values = sorted({float(r[tune]) for r in mine})
        seeds = Counter(float(r[tune]) for r in mine)
        if len(values) < 3:
            said.append(f"{arm_key}={arm} has {len(values)} value(s) of {tune}: a best needs at least 3 around it "
                        "(its best is at an edge)")
        if max(seeds.values(), default=0) < 2:
            said.append(f"{arm_key}={arm} has one seed per value: no interval (inconclusive, underpowered)")
    if half is None:
        said.append(f"no runs at half the steps ({steps // 2}): the decision's budget stability is not measured; "
                    "normtrain-ablate runs them (a decay branch each, with optim.schedule=wsd)")
    others = varying(runs, [arm_key, tune])
    if others:
        said.append(f"the runs also differ in {', '.join(others)}: the arms are compared across them as if they "
                    "were one (give a sweep that varies only the arm key, the tuned key and the seed)")
    return said


def varying(runs: list[Run], keys: list[str]) -> list[str]:
    seen: dict[str, set[str]] = {}
    for run in runs:
        for k, v in flatten(run.summary.get("config") or run.config or {}).items():
            seen.setdefault(k, set()).add(repr(v))
    skip = set(keys) | set(IGNORED)
    return sorted(k for k, vs in seen.items() if len(vs) > 1 and not any(k == s or k.startswith(s + ".")
                                                                         for s in skip))


def compare_tuned(paths: list[str], tune: str, baseline: str, out: Path, margin: float, alpha: float
                  ) -> dict[str, Any]:
    """The analysis of a finished sweep; StudyError for input it cannot judge at all."""
    arm_key, eq, base = baseline.partition("=")
    if not eq:
        raise StudyError(f"--baseline {baseline}: give KEY=VALUE, the arm key and the reference arm, e.g. "
                         "--baseline placement=pre")
    runs, skipped = load_runs(paths, exclude=out)
    runs = [r for r in runs if r.status in ("completed", "diverged")]
    if not runs:
        raise StudyError(f"no finished runs in {', '.join(paths)}")
    rows = rows_of(runs, arm_key, tune)
    if missing := [r["run_dir"] for r in rows if r[tune] is None or r[arm_key] == "None"]:
        raise StudyError(f"{len(missing)} run(s) have no {arm_key if rows[0][arm_key] == 'None' else tune} in their "
                         f"config (e.g. {missing[0]}): name keys of the runs' config, e.g. --tune optim.lr "
                         "--baseline placement=pre")
    for r in rows:
        r[tune] = str(r[tune])
    arms = sorted({r[arm_key] for r in rows}, key=lambda a: (a != base, a))
    if base not in arms:
        raise StudyError(f"--baseline {baseline}: no run has {arm_key}={base}; the runs have {', '.join(arms)}")
    if len(arms) < 2:
        raise StudyError(f"every run has {arm_key}={base}: nothing to compare it with")
    steps, half = budgets(rows)
    protocol = Protocol(margin=margin, alpha=alpha)
    analysis = analyse(rows, arm_key, arms, base, tune, steps, half, protocol)
    said = limits(rows, arms, arm_key, tune, runs)
    analysis.notes += said
    question = Question(arm_key=arm_key, arms=tuple(arms), baseline=base, shared=(), tune=tune,
                        grid=tuple(sorted({float(r[tune]) for r in rows})),
                        seeds=tuple(sorted({int(r[SEED]) for r in rows if r[SEED].isdigit()})), steps=steps,
                        half_steps=half or steps // 2, branch=False, branch_step=None, margin=margin, alpha=alpha,
                        max_extensions=0)
    from normtrain.study.provenance import engine_digest, runs_code

    provenance = {**runs_code(rows), "engine_digest": engine_digest(), "allow_dirty": True}
    command = f"normtrain-compare {' '.join(paths)} --tune {tune} --baseline {baseline}"
    rec = report.record(question, analysis, {"values": {}, "extensions": {}}, rows, provenance, command, 0.0)
    out.mkdir(parents=True, exist_ok=True)
    report.draw(out, question, analysis)
    how = [f"- A sweep already run ({len(runs)} finished runs in {', '.join(paths)}): arms {arm_key} = "
           f"{', '.join(arms)}, baseline {base}, {tune} as found in each arm's runs, {steps} steps"
           + (f" and {half}." if half else "."),
           *(f"- Skipped: {s}" for s in skipped)]
    verdict = report.write_verdict(out, question, analysis, rec["grids"], rec, command, how=how)
    return {"record": rec, "verdict_md": verdict, "ablation_json": report.write_record(out, rec),
            "analysis": analysis, "question": question, "limits": said}
