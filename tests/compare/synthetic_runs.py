"""Hand-made run folders with every kind of metric a report must show: today's diagnostics, the new ones of the
catalog issue (``attn_logit_max/layer_i`` and per head ``attn_logit_max/layer_i/head_j``, ``output/log_z``,
``train/z_loss``, a prefix nobody knows yet),
seeds, a diverged run, a collapsed one and the unigram baseline; and a probe.json as normtrain-probe writes it
(``probe_result``, also tests/probe's)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

PREFIXES = ("grad_norm", "act_std", "act_mean", "resid_norm", "attn_entropy", "update", "attn_logit_max",
            "brand_new_stat")
SCALARS = ("grad_norm/total", "update/output_change", "output/log_z", "output/logit_max", "train/z_loss")
UNIGRAM = 4.2
HEADS = 2


def config(placement: str, norm: str, layers: int, seed: int) -> dict:
    return {"model": {"n_layers": layers, "d_model": 64}, "norm": {"name": norm, "eps": 1e-5},
            "placement": {"name": placement}, "optim": {"lr": 1e-3}, "train": {"seed": seed},
            "logger": {"name": "none"}}


def rows(rng: np.random.Generator, layers: int, steps: int, every: int, eval_every: int, scale: float,
         diverge_at: int | None, factor: float = 1.0) -> list[dict]:
    out = []
    for step in range(0, steps + 1, every):
        dead = diverge_at is not None and step >= diverge_at
        loss = math.nan if dead else 2.5 + scale * math.exp(-step / 30) + 0.05 * rng.standard_normal()
        row = {"step": step, "train/loss": loss, "lr": 1e-3 * min(1, (step + 1) / 10), "tokens_per_s": 1e4 + step}
        if step % eval_every == 0:
            row["val/loss"] = loss + 0.1
        draws = factor * 10 ** rng.uniform(-3, 0, size=(len(PREFIXES), layers)) * np.arange(1, layers + 1)
        for prefix, values in zip(PREFIXES, draws.tolist(), strict=True):
            for i, value in enumerate(values):
                row[f"{prefix}/layer_{i}"] = math.nan if dead else value if prefix != "act_mean" else value - 0.5
        heads = np.random.default_rng(step).uniform(0, 10, size=(layers, HEADS))  # apart from rng: same draws above
        row.update({f"attn_logit_max/layer_{i}/head_{h}": math.nan if dead else float(heads[i, h])
                    for i in range(layers) for h in range(HEADS)})
        for key, value in zip(SCALARS, (10 ** rng.uniform(-2, 1, size=len(SCALARS))).tolist(), strict=True):
            row[key] = math.nan if dead else value
        out.append({k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()})
    return out


def summary(p: str, n: str, layers: int, seed: int, logged: list[dict], steps: int, at: int | None,
            collapsed: bool, undertrained: bool = False) -> dict:
    vals = [r["val/loss"] for r in logged if r.get("val/loss") is not None]
    return {"status": "diverged" if at else "completed", "steps": steps, "diverged_at_step": at,
            "final_val_loss": None if at else vals[-1], "best_val_loss": min(vals), "n_params": 1000 * layers,
            "wall_time_s": 12.5, "unigram_val_loss": UNIGRAM, "collapsed": collapsed,
            "undertrained": undertrained,
            "config": config(p, n, layers, seed)}


def many_runs(n_placements: int, n_norms: int, depth: int, n_seeds: int, steps: int, every: int) -> list:
    """Runs in memory (no folders): a large sweep for size checks."""
    from normtrain.compare.runs import Run

    rng = np.random.default_rng(1)
    runs = []
    for p in [f"placement{i}" for i in range(n_placements)]:
        for n in [f"norm{i}" for i in range(n_norms)]:
            for seed in range(n_seeds):
                logged = rows(rng, depth, steps, every, 10 * every, 2.0, None)
                runs.append(Run(Path(f"/sweep/{p}-{n}-{seed}"), summary(p, n, depth, seed, logged, steps, None, False),
                                config(p, n, depth, seed), logged))
    return runs


def write_sweep(root: Path, placements=("pre", "post"), norms=("layernorm", "rmsnorm"), depths=(4,),
                seeds=(0, 1, 2), steps: int = 60, every: int = 5, eval_every: int = 20,
                diverged=("post", "rmsnorm", 1), collapsed=("post", "layernorm"),
                undertrained=("pre", "rmsnorm", 2), exploded=()) -> list[Path]:
    """One run folder per combination; the run ``diverged`` (placement, norm, seed) diverges half-way, the
    runs of ``collapsed`` (placement, norm) are marked collapsed and the run ``undertrained`` undertrained. The run
    ``exploded`` (placement, norm, seed) blows up from the start, as ``placement=none`` does at depth 16 and lr 3e-2
    (a loss near 10⁴, per-layer values 10⁸ times the others'), and diverges at its third logged step."""
    rng = np.random.default_rng(0)
    folders = []
    for p in placements:
        for n in norms:
            for layers in depths:
                for seed in seeds:
                    folder = root / f"{len(folders)}_{p}-{n}-L{layers}"
                    folder.mkdir(parents=True)
                    blown = (p, n, seed) == tuple(exploded)
                    at = 2 * every if blown else steps // 2 if (p, n, seed) == tuple(diverged) else None
                    logged = rows(rng, layers, steps, every, eval_every,
                                  9490.0 if blown else 3.0 if p == "post" else 2.0, at, 1e8 if blown else 1.0)
                    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logged))
                    record = summary(p, n, layers, seed, logged, steps, at, (p, n) == tuple(collapsed),
                                     (p, n, seed) == tuple(undertrained))
                    (folder / "summary.json").write_text(json.dumps(record))
                    folders.append(folder)
    return folders


XS = [i / 10 - 3 for i in range(61)]


def norm(name: str, alpha: float) -> dict:
    return {"name": name, "kind": "rmsnorm", "layer": 0, "x": [0.9 * x for x in XS], "n_pairs": len(XS),
            "y": [math.tanh(alpha * x) for x in XS], "curve": {"x": XS, "y": [math.tanh(alpha * x) for x in XS]},
            "fit": {"alpha": alpha, "gamma": 1.0, "r2": 0.99, "r2_line": 0.9}}


def probe_result(run_dir) -> dict:
    layers = [{"layer": i, "skip_val_loss": 2.34567 + d, "skip_delta": d, "block_cos": 0.5 + 0.1 * i,
               "act_rms": 1.5 * (i + 1), "act_absmax": 10.0 * (i + 1)} for i, d in enumerate((0.7, 0.2, 0.05))]
    return {"format": 1, "run_dir": str(run_dir), "label": "pre-rmsnorm-L3", "val_loss": 2.34567, "layers": layers,
            "norms": [norm("blocks.0.norm1", 0.8), norm("final_norm", 1.5)]}
