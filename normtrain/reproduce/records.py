"""``result.json``: what a reproduction measured and decided, and where it came from.

Beside the checks and the verdict (normtrain/study/verdicts.py) the record says how far it is new evidence:
the registration's label and whether the pilot's outcome was known (``pilot_outcome_known``), the pilot's seeds
rerun (a v4 verdict is then inconclusive), how each run executed (thread counts, determinism switches, devices),
and, when the folder held an earlier result of the same declared configuration, which checked per-seed values
moved between the two (``rerun``): a rerun that moves a checked number is a finding, reported with its size, not
a silent overwrite. At ``--scale gpu`` it also holds the plan, what the runs measured against its assumptions, and
whether the verdict agrees with the committed CPU result's.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from normtrain.reproduce.runner import Experiment, Findings
from normtrain.study import stats
from normtrain.study.plan import SEED_AXIS, Plan
from normtrain.study.preregistration import preregistered, registered_then_changed
from normtrain.study.verdicts import Judgement

MOVED = 1e-9  # a checked value that changed by more than this between two results of one configuration moved


def first_run_at(rows: list[dict[str, Any]], fallback: str) -> str:
    """When the earliest run of the result started (a forward-only experiment: when the measurement began)."""
    starts = [r["started_at"] for r in rows if r.get("started_at")]
    return min(starts) if starts else fallback


def code_provenance(rows: list[dict[str, Any]], analysis: dict[str, Any]) -> dict[str, Any]:
    """The code that ran the runs (each row carries its run's commit; forward-only rows the measuring process's),
    and the code that analysed them now."""
    commits = Counter(r["code_commit"] for r in rows if r.get("code_commit"))
    known = [r.get("code_dirty") for r in rows if r.get("code_dirty") is not None]
    record = {"code_commit": commits.most_common(1)[0][0] if commits else analysis.get("code_commit"),
              "code_dirty": any(known) if known else analysis.get("code_dirty"),
              "run_commits": dict(commits), "analysis_commit": analysis.get("code_commit"),
              "analysis_dirty": analysis.get("code_dirty")}
    if analysis.get("why_unknown") and not commits:
        record["why_unknown"] = analysis["why_unknown"]
    if found := analysis.get("analysis_code"):  # the experiment's module, the engine and outcome.py
        record["analysis_code"] = {k: found.get(k) for k in ("files", "digest", "commit", "committed_at", "dirty")}
        record["analysis_code"]["history"] = found.get("history") or []  # trimmed by result_record
    if runs := analysis.get("runs_code"):  # protocol v5: the runs' training code, checked to be one and committed
        record["runs_code"] = runs
    return record


def analysis_changed_after(provenance: dict[str, Any], first: str) -> None:
    """Keep, of the analysis code's history, the commits that changed it after the first run began."""
    found = provenance.get("analysis_code")
    if found is not None:
        found["changed_after_runs"] = registered_then_changed(found, first)["changed"]
        del found["history"]


def execution(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How the runs executed: every thread count, determinism setting and device seen, with how many runs each
    (runs made before these were recorded count under ``unknown``)."""
    def tally(key: str) -> dict[str, int]:
        return dict(Counter("unknown" if r.get(key) is None else str(r[key]) for r in rows))

    return {"threads": tally("threads"), "deterministic": tally("deterministic"), "device_name": tally("device_name")}


def result_record(exp: Experiment, plan: Plan, rows: list[dict[str, Any]], findings: Findings, judged: Judgement,
                  *, timing: dict[str, Any], device: str, declared: dict[str, Any], code: dict[str, Any],
                  started_at: str) -> dict[str, Any]:
    """What ``result.json`` holds."""
    reg = exp.registration
    first = first_run_at(rows, started_at)
    declaration = {**declared, "first_run_at": first, "before_runs": preregistered(declared, first)}
    if not declaration["before_runs"]:
        declaration.update(registered_then_changed(declared, first))
    axes = [a for a in plan.grid if a != SEED_AXIS]
    trained = any("status" in r for r in rows)
    seeds = sorted(int(s) for s in plan.grid.get(SEED_AXIS, ["0"]))
    record = {
        "name": exp.name, "title": exp.title, "paper": exp.paper, "reference": exp.reference, "claim": reg.claim,
        "paper_number": reg.paper_number, "norm": reg.norm, "ours": findings.ours, "protocol": judged.protocol,
        "verdict": judged.verdict, "verdict_why": judged.why, "key": findings.key, "scale": plan.scale,
        "smoke": plan.smoke, "runs": len(plan.combos()) * (2 if exp.half_budget else 1),  # half_budget: T and T/2
        "seeds": seeds, "grid": plan.grid, "base": plan.base,
        "unigram_val_loss": stats.unigram_of(rows),
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in timing.items()},
        "device": device, "command": plan.command, "registration": reg.label,
        "pilot": asdict(reg.pilot) if reg.pilot else None, "pilot_outcome_known": reg.label == "after_pilot",
        "pilot_seeds_rerun": reg.reused_seeds(seeds), "reported": list(reg.reported),
        "provenance": {**code_provenance(rows, code), "declaration": declaration},
        **({"v5": judged.v5} if judged.v5 else {}),
        "execution": execution(rows) if rows else None,
        "guard": judged.guard.as_dict() if judged.guard else None,
        "checks": [c.as_dict() for c in judged.checks],
        "cells": stats.cell_counts(rows, axes) if trained else None,
        "budget": training_budget(plan, rows) if trained and exp.half_budget else None,  # the budgets v5 reads
    }
    analysis_changed_after(record["provenance"], first)
    if judged.protocol >= 4:
        record.update(primary=judged.role("primary")[0].as_dict(),
                      secondary=[c.as_dict() for c in judged.role("secondary")],
                      preconditions=[c.as_dict() for c in judged.role("precondition")])
    if plan.budget is not None:
        record.update(gpu_plan=asdict(plan.budget), **cpu_agreement(plan, exp.name, judged.verdict))
    return record


def training_budget(plan: Plan, rows: list[dict[str, Any]]) -> dict[str, int | None]:
    """The budget a v5 verdict holds at: T in steps (the runs' largest ``steps``, else the config's) and in tokens
    (steps × sequences per step × sequence length), and T/2 where the runs measured it."""
    from normtrain.study.branches import STEPS

    cfg = plan.compose(plan.combos()[0])
    measured = sorted({int(r[STEPS]) for r in rows if r.get(STEPS) is not None})
    steps = measured[-1] if measured else int(cfg.train.max_steps)
    sequences = cfg.train.get("global_batch_size") or cfg.train.batch_size
    return {"steps": steps, "half_steps": measured[0] if len(measured) > 1 else None,
            "tokens": steps * int(sequences) * int(cfg.model.seq_len)}


def previous(path: Path) -> dict[str, Any] | None:
    """The result.json an earlier invocation left (read before it is overwritten); None when there is none."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def same_configuration(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether two results come from one declared configuration: the same declaration (its files' digest), scale,
    grid and overrides (older records without a grid: the same command)."""
    digest = [((r.get("provenance") or {}).get("declaration") or {}).get("digest") for r in (before, after)]
    if digest[0] is None or digest[0] != digest[1] or before.get("scale") != after.get("scale"):
        return False
    if "grid" in before:
        return before["grid"] == after["grid"] and before.get("base") == after.get("base")
    return before.get("command") == after.get("command")


def rerun(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, Any] | None:
    """Which checked per-seed values moved between an earlier result of the same configuration and this one, and
    by how much: the largest move per check (None: no earlier result of this configuration to compare)."""
    if not before or before.get("smoke") or not same_configuration(before, after):
        return None
    old = {c["id"]: c for c in before.get("checks") or []}
    compared, moved, largest = 0, 0, {}
    for check in after.get("checks") or []:
        for cond, c in check["conditions"].items():
            was = ((old.get(check["id"]) or {}).get("conditions") or {}).get(cond, {}).get("per_seed") or {}
            for seed, value in c["per_seed"].items():
                delta = _delta(was.get(seed), value)
                if delta is None:
                    continue
                compared += 1
                if abs(delta) > MOVED:
                    moved += 1
                    best = largest.get(check["id"])
                    if best is None or abs(delta) > abs(best["delta"]):
                        largest[check["id"]] = {"delta": delta, "condition": cond, "seed": seed,
                                                "before": was.get(seed), "after": value}
    prov = before.get("provenance") or {}
    return {"compared": compared, "moved": moved, "largest": largest,
            "before": {"run_commits": prov.get("run_commits"), "analysis_commit": prov.get("analysis_commit"),
                       "execution": before.get("execution")}}


def _delta(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return b - a


def cpu_agreement(plan: Plan, name: str, verdict: str) -> dict[str, Any]:
    """The committed CPU result's verdict beside this GPU one: a disagreement is reported, never hidden."""
    cpu = previous(plan.out.parent / name / "result.json")
    if cpu is None:
        return {"cpu_verdict": None, "agrees_with_cpu": None}
    return {"cpu_verdict": cpu.get("verdict"), "agrees_with_cpu": cpu.get("verdict") == verdict}
