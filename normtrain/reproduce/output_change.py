"""Liu et al. 2020 (Admin): how much the same small weight perturbation moves the output, against depth."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.runner import (
    PLACEMENT_ORDER,
    Experiment,
    Findings,
    Plan,
    Scale,
    each_run,
    present,
    validation_batches,
)
from normtrain.reproduce.writeup import markdown_table

if TYPE_CHECKING:
    import torch

NOISE = 1e-3  # δ per entry of every block matrix: N(0, NOISE²), the same for every model
DRAWS = 4  # perturbations averaged per model
NORM_ORDER = ("layernorm", "rmsnorm")
JUDGED_NORM = "layernorm"


def growth_fits(depths: list[int], values: list[float]) -> dict[str, float | None]:
    """The log-log slope, and R² of the two growth orders the paper contrasts: a + b·N and a + b·ln N."""
    return {"slope": stats.loglog_slope(depths, values),
            "r2_linear": stats.r_squared([float(d) for d in depths], values),
            "r2_log": stats.r_squared([math.log(d) for d in depths], values)}


class OutputChange(Experiment):
    name = "admin_output_change"
    title = "Output change under a weight perturbation, against depth (Liu et al. 2020, Admin)"
    paper = "Liu et al. 2020 (Admin), §4"
    reference = "**Liu et al. 2020**, *Understanding the Difficulty of Training Transformers* (Admin), §4, Thm. 3"
    method = (f"Forward passes only, at initialization: every block matrix W gets δ ~ N(0, {NOISE:g}²) per entry "
              "(the same absolute size for every model; embeddings and LM head untouched); we report "
              f"E‖F(x,W) − F(x,W+δ)‖² per token, F the final hidden state the LM head reads (after the final norm "
              f"for Pre-LN), averaged over {DRAWS} draws of δ and one batch of 8 × 128 validation bytes. 64-128-2 "
              "models at 6 depths from 6 to 192 layers, 5 seeds each; Post-LN, Pre-LN and DeepNorm.")
    gpu = Scale(overrides=("model.d_model=256", "model.n_heads=4", "model.d_ff=1024"),
                grid={"model.n_layers": "6,12,24,48,96,192,384"})

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        import normtrain
        from normtrain.training import seed_everything

        rows, batch = [], None
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for combo in each_run(plan):
            cfg = plan.compose(combo)
            if batch is None:  # one batch for every model
                batch = validation_batches(cfg)[0][0]
            seed_everything(cfg.train.seed)
            model = normtrain.build_model(cfg).eval()
            rows.append({**combo, "started_at": started, "sq_change": output_change(model, batch, cfg.train.seed)})
        return rows

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        norms = present(rows, "norm", NORM_ORDER)

        def series(p, n) -> dict[str, list[float]]:  # seed -> E‖ΔF‖² at each depth
            out: dict[str, list[float]] = {}
            for d in depths:
                at = stats.per_seed(rows, "sq_change", lambda r, d=d: (r["placement"], r["norm"],
                                                                       int(r["model.n_layers"])) == (p, n, d))
                for s, v in at.items():
                    out.setdefault(s, []).append(v)
            return {s: vs for s, vs in out.items() if len(vs) == len(depths)}

        fits = {(p, n): {s: growth_fits(depths, vs) for s, vs in series(p, n).items()} for p in places for n in norms}

        def per_seed(p, what, n=JUDGED_NORM):
            return {s: what(f) for s, f in fits.get((p, n), {}).items()}

        def deep_over_shallow(p, n=JUDGED_NORM):
            return {s: vs[-1] / vs[0] if vs[0] else None for s, vs in series(p, n).items()}

        def r2_diff(f, first, second):
            return None if f[first] is None or f[second] is None else f[first] - f[second]

        post_slope, pre_slope = per_seed("post", lambda f: f["slope"]), per_seed("pre", lambda f: f["slope"])
        measured = {
            "post_slope": {"": post_slope},
            "post_r2_linear_minus_log": {"": per_seed("post", lambda f: r2_diff(f, "r2_linear", "r2_log"))},
            "pre_r2_log_minus_linear": {"": per_seed("pre", lambda f: r2_diff(f, "r2_log", "r2_linear"))},
            "post_minus_pre_slope": {"": {s: v - pre_slope[s] if v is not None and pre_slope.get(s) is not None
                                          else None for s, v in post_slope.items()}},
            "deepnorm_deep_over_shallow": {"": deep_over_shallow("deepnorm")},
        }
        header = ["placement", "norm", *[f"L={d}" for d in depths], "log-log slope", "R² a+b·N", "R² a+b·ln N",
                  f"L={depths[-1]} / L={depths[0]}"]
        body = [[p, n, *[stats.spread(v[i] for v in series(p, n).values()) for i in range(len(depths))],
                 stats.spread(per_seed(p, lambda f: f["slope"], n).values()),
                 stats.spread(per_seed(p, lambda f: f["r2_linear"], n).values()),
                 stats.spread(per_seed(p, lambda f: f["r2_log"], n).values()),
                 stats.spread(deep_over_shallow(p, n).values())] for n in norms for p in places]
        table = ("E‖F(x,W) − F(x,W+δ)‖² per token and its growth with depth, mean ± std over seeds (n); the "
                 "checks read the LayerNorm rows:\n\n" + markdown_table(header, body))
        ours = (f"log-log slope: Post-LN {stats.spread(post_slope.values())}, Pre-LN "
                f"{stats.spread(pre_slope.values())}")
        key = (f"Growth of E‖ΔF‖² with depth, {ours}; DeepNorm L={depths[-1]}/L={depths[0]}: "
               f"{stats.spread(deep_over_shallow('deepnorm').values())}.")

        def draw(path):
            fig, (ax,) = plots.figure(width=5.6, height=3.8)
            for n in norms:
                for p in places:
                    plots.seeds_and_mean(ax, depths, list(series(p, n).values()), plots.PLACEMENT_COLORS[p],
                                         f"{p}, {n}", style=plots.NORM_STYLES[n])
            plots.log_axis(ax, depths)
            ax.set_yscale("log")
            plots.finish(ax, f"absolute perturbation σ = {NOISE:g} at init (thin: seeds)", "depth L",
                         "E‖F(x,W) − F(x,W+δ)‖² per token")
            plots.save(fig, path)

        return Findings(table=table, measured=measured, key=key, ours=ours, figures={"output_change.png": draw})


def output_change(model, x: torch.Tensor, seed: int) -> float:
    """E‖F(x,W) − F(x,W+δ)‖² per token over ``DRAWS`` perturbations of every block matrix."""
    import torch

    with torch.no_grad():
        return _output_change(model, x, seed)


def _output_change(model, x, seed: int) -> float:
    import torch

    clean = model(x, hidden_only=True).float()
    matrices = [p for block in model.blocks for p in block.parameters() if p.dim() >= 2]
    saved = [p.detach().clone() for p in matrices]
    gen = torch.Generator(device=x.device).manual_seed(10_000 + seed)
    total = 0.0
    for _ in range(DRAWS):
        for p, w in zip(matrices, saved, strict=True):
            p.copy_(w + NOISE * torch.randn(w.shape, generator=gen, device=w.device, dtype=w.dtype))
        total += (model(x, hidden_only=True).float() - clean).pow(2).sum(-1).mean().item()
    for p, w in zip(matrices, saved, strict=True):
        p.copy_(w)
    return total / DRAWS
