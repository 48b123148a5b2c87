"""Liu et al. 2020 (Admin): how much the same small weight perturbation moves the output, against depth."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.grid import measure_grid
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, present, validation_batches
from normtrain.reproduce.writeup import markdown_table

if TYPE_CHECKING:
    import torch

SIGMAS = (1e-3, 1e-2)  # δ per entry of every block matrix: N(0, σ²), the same for every model; an order apart
DRAWS = 16  # perturbations averaged per model and σ
NORM_ORDER = ("layernorm", "rmsnorm")
JUDGED_NORM = "layernorm"


def growth_fits(depths: list[int], values: list[float]) -> dict[str, float | None]:
    """The log-log slope, and R² of the two growth orders the paper contrasts: a + b·N and a + b·ln N."""
    return {"slope": stats.loglog_slope(depths, values),
            "r2_linear": stats.r_squared([float(d) for d in depths], values),
            "r2_log": stats.r_squared([math.log(d) for d in depths], values)}


def key(sigma: float) -> str:
    return f"sq_change_{sigma:g}"


class OutputChange(Experiment):
    name = "admin_output_change"
    title = "Output change under a weight perturbation, against depth (Liu et al. 2020, Admin)"
    paper = "Liu et al. 2020 (Admin), §4"
    reference = "**Liu et al. 2020**, *Understanding the Difficulty of Training Transformers* (Admin), §4, Thm. 3"
    method = ("Forward passes only, at initialization: every block matrix W gets δ ~ N(0, σ²) per entry, σ = "
              f"{SIGMAS[0]:g} and {SIGMAS[1]:g} (the same absolute size for every model; embeddings and LM head "
              "untouched); we report E‖F(x,W) − F(x,W+δ)‖² per token, F the final hidden state the LM head reads "
              f"(after the final norm for Pre-LN), averaged over {DRAWS} draws of δ per σ and one batch of 8 × 128 "
              "validation bytes. 64-128-2 models at 6 depths from 6 to 192 layers; Post-LN, Pre-LN and DeepNorm, "
              "20 seeds with LayerNorm, 5 with RMSNorm (a labelled variant).")
    gpu_recipe = Recipe(lengthen=False, extra_steps=16)  # forward passes at initialization: 16 draws × 2 σ

    def keeps(self, combo: dict[str, str]) -> bool:
        return combo.get("norm") == JUDGED_NORM or int(combo.get("train.seed", 0)) < 5

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        return [{**combo, **{k: m[k] for k in ("started_at", "wall_time_s", "code_commit", "code_dirty")},
                 **m["value"]} for combo, m in zip(plan.combos(), measure_grid(plan, output_changes), strict=True)]

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        norms = present(rows, "norm", NORM_ORDER)
        fits = {(p, n, s): {seed: growth_fits(depths, vs) for seed, vs in self.series(rows, p, n, s, depths).items()}
                for p in places for n in norms for s in SIGMAS}

        def fit(p, what, sigma=SIGMAS[0], n=JUDGED_NORM):
            return {seed: what(f) for seed, f in fits.get((p, n, sigma), {}).items()}

        slope = lambda f: f["slope"]  # noqa: E731
        r2_gap = lambda a, b: (lambda f: None if f[a] is None or f[b] is None else f[a] - f[b])  # noqa: E731
        sub = lambda a, b: a - b  # noqa: E731
        measured = {
            "post_slope": {"": fit("post", slope)},
            "slope_change_with_sigma": {p: stats.paired(fit(p, slope, SIGMAS[1]), fit(p, slope), sub) for p in places},
            "post_r2_linear_minus_log": {"": fit("post", r2_gap("r2_linear", "r2_log"))},
            "pre_r2_log_minus_linear": {"": fit("pre", r2_gap("r2_log", "r2_linear"))},
            "post_minus_pre_slope": {"": stats.paired(fit("post", slope), fit("pre", slope), sub)},
            "deepnorm_deep_over_shallow": {"": self.deep_over_shallow(rows, "deepnorm", JUDGED_NORM, depths)},
        }
        table = self.table(rows, places, norms, depths, fits)
        ours = (f"log-log slope (σ = {SIGMAS[0]:g}): Post-LN {self.median_ci(fit('post', slope))}, Pre-LN "
                f"{self.median_ci(fit('pre', slope))}")
        key_text = (f"Growth of E‖ΔF‖² with depth, {ours}; DeepNorm L={depths[-1]}/L={depths[0]}: "
                    f"{self.median_ci(measured['deepnorm_deep_over_shallow'][''])}.")
        return Findings(table=table, measured=measured, key=key_text, ours=ours,
                        figures={"output_change.png": lambda path: self.draw(rows, places, norms, depths, path)})

    @staticmethod
    def series(rows, p, n, sigma, depths) -> dict[str, list[float]]:
        """seed -> E‖ΔF‖² at each depth, for one σ."""
        out: dict[str, list[float]] = {}
        for d in depths:
            for seed, v in stats.seeds(rows, key(sigma), placement=p, norm=n, model__n_layers=d).items():
                out.setdefault(seed, []).append(v)
        return {seed: vs for seed, vs in out.items() if len(vs) == len(depths)}

    def deep_over_shallow(self, rows, p, n, depths, sigma=SIGMAS[0]) -> dict[str, float | None]:
        return {s: vs[-1] / vs[0] if vs[0] else None for s, vs in self.series(rows, p, n, sigma, depths).items()}

    @staticmethod
    def median_ci(per_seed: dict[str, float | None]) -> str:
        """The median and its interval, named for what it is (the per-seed slopes are heavy-tailed: the median, not
        the mean): the range of the seeds with 5 or fewer (the RMSNorm variant), the 95% bootstrap CI from 6 on."""
        return stats.median_and_interval(per_seed.values())

    def table(self, rows, places, norms, depths, fits) -> str:
        header = ["placement", "norm", "σ", *[f"L={d}" for d in depths], "log-log slope", "R² a+b·N", "R² a+b·ln N",
                  f"L={depths[-1]} / L={depths[0]}"]
        body = []
        for n in norms:
            for p in places:
                for s in SIGMAS:
                    series = self.series(rows, p, n, s, depths)
                    f = fits.get((p, n, s), {})
                    body.append([p, n, f"{s:g}", *[stats.spread(v[i] for v in series.values())
                                                   for i in range(len(depths))],
                                 self.median_ci({k: v["slope"] for k, v in f.items()}),
                                 stats.spread(v["r2_linear"] for v in f.values()),
                                 stats.spread(v["r2_log"] for v in f.values()),
                                 stats.spread(self.deep_over_shallow(rows, p, n, depths, s).values())])
        return ("E‖F(x,W) − F(x,W+δ)‖² per token (mean ± sd over seeds, n) and its growth with depth (slopes: the "
                "median over seeds and its interval: the 95% bootstrap CI of the median with 6 seeds or more, the "
                "range of the seeds with fewer); forward passes only, so no run can diverge or collapse. "
                "The checks read the LayerNorm rows:\n\n" + markdown_table(header, body))

    def draw(self, rows, places, norms, depths, path) -> None:
        fig, axes = plots.figure(ncols=len(SIGMAS), width=5.0, height=3.8)
        for ax, s in zip(axes, SIGMAS, strict=True):
            for n in norms:
                for p in places:
                    plots.seeds_and_mean(ax, depths, list(self.series(rows, p, n, s, depths).values()),
                                         plots.PLACEMENT_COLORS[p], f"{p}, {n}", style=plots.NORM_STYLES[n])
            plots.log_axis(ax, depths)
            ax.set_yscale("log")
            plots.finish(ax, f"perturbation σ = {s:g} at init (thin: seeds)", "depth L",
                         "E‖F(x,W) − F(x,W+δ)‖² per token")
        plots.save(fig, path)


def output_changes(overrides: list[str]) -> dict[str, float]:
    """E‖F(x,W) − F(x,W+δ)‖² per token for each σ of ``SIGMAS`` (keyed ``key(σ)``), over ``DRAWS`` perturbations of
    every block matrix of the seeded fresh model, on the first validation batch."""
    import torch

    import normtrain
    from normtrain.config import compose
    from normtrain.training.trainer import seed_everything

    cfg = compose(overrides)
    x = validation_batches(cfg)[0][0]
    seed_everything(cfg.train.seed)
    model = normtrain.build_model(cfg).eval()
    with torch.no_grad():
        return {key(s): _output_change(model, x, cfg.train.seed, s) for s in SIGMAS}


def _output_change(model, x: torch.Tensor, seed: int, sigma: float) -> float:
    import torch

    clean = model(x, hidden_only=True).float()
    matrices = [p for block in model.blocks for p in block.parameters() if p.dim() >= 2]
    saved = [p.detach().clone() for p in matrices]
    gen = torch.Generator(device=x.device).manual_seed(10_000 + seed)  # the same draws for every σ: paired
    total = 0.0
    for _ in range(DRAWS):
        for p, w in zip(matrices, saved, strict=True):
            p.copy_(w + sigma * torch.randn(w.shape, generator=gen, device=w.device, dtype=w.dtype))
        total += (model(x, hidden_only=True).float() - clean).pow(2).sum(-1).mean().item()
    for p, w in zip(matrices, saved, strict=True):
        p.copy_(w)
    return total / DRAWS
