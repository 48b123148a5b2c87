"""Liu et al. 2020 (Admin): how much the same small weight perturbation moves the output, against depth."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, present, validation_batches
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import plots, stats
from normtrain.study.grid import measure_grid
from normtrain.study.plan import Plan

if TYPE_CHECKING:
    import torch

SIGMAS = (1e-4, 1e-3)  # δ per entry of every block matrix: N(0, σ²), the same for every model; an order apart
FIT_SIGMA = SIGMAS[0]  # the σ the growth fits read; the larger one tests that they are in the linear regime
# The fit window (part of the measurement, declared in the registration's metric before the v4 runs): a depth enters
# a seed's fit at a σ only while E‖ΔF‖² / E‖F‖² ≤ LINEAR_MAX there and at every shallower depth. F is a LayerNorm's
# output, so ‖F + ΔF‖ = ‖F‖: a change that bends around that sphere saturates, and saturation flattens the growth.
LINEAR_MAX = 0.01  # ‖ΔF‖ within 10% of ‖F‖
DRAWS = 16  # perturbations averaged per model and σ
NORM_ORDER = ("layernorm", "rmsnorm")
JUDGED_NORM = "layernorm"
VARIANT_BELOW = 33  # the RMSNorm variant runs the seeds below this: the first 3 of the YAML's v5 seeds (30-39)


def growth_fits(depths: list[int], values: list[float]) -> dict[str, float | None]:
    """The log-log slope, and R² of the two growth orders the paper contrasts: a + b·N and a + b·ln N; ``depths``:
    how many depths the fit read."""
    return {"slope": stats.loglog_slope(depths, values),
            "r2_linear": stats.r_squared([float(d) for d in depths], values),
            "r2_log": stats.r_squared([math.log(d) for d in depths], values), "depths": len(depths)}


def linear_window(changes: list[float], sizes: list[float]) -> int:
    """How many depths, from the shallowest, enter the fit: each change below ``LINEAR_MAX`` of its ‖F‖², the
    first one above it and every deeper depth left out."""
    for i, (c, f) in enumerate(zip(changes, sizes, strict=True)):
        if not f or c / f > LINEAR_MAX:
            return i
    return len(changes)


def windowed_fits(depths: list[int], changes: list[float], sizes: list[float], keep: int | None = None
                  ) -> dict[str, float | None]:
    """``growth_fits`` over the depths in the linear window (or the first ``keep`` depths)."""
    n = linear_window(changes, sizes) if keep is None else keep
    return growth_fits(depths[:n], changes[:n])


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
              "validation bytes, and E‖F‖² per token. 64-128-2 models at 6 depths from 6 to 192 layers; Post-LN, "
              "Pre-LN and DeepNorm, 10 seeds with LayerNorm, 3 with RMSNorm (a labelled variant). A depth enters a "
              f"seed's growth fit at a σ only while E‖ΔF‖² ≤ {LINEAR_MAX:g}·E‖F‖² there and at every shallower "
              f"depth (fixed before the runs): the fits read σ = {FIT_SIGMA:g}. The models are measured at "
              "initialization and nothing is trained, so no learning-rate grid is needed: comparing arms each at "
              "its own best learning rate applies to trained models, not to a perturbation at init.")
    gpu_recipe = Recipe(lengthen=False, extra_steps=16)  # forward passes at initialization: 16 draws × 2 σ

    def keeps(self, combo: dict[str, str]) -> bool:
        return combo.get("norm") == JUDGED_NORM or int(combo.get("train.seed", 0)) < VARIANT_BELOW

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        return [{**combo, **{k: m[k] for k in ("started_at", "wall_time_s", "code_commit", "code_dirty")},
                 **m["value"]} for combo, m in zip(plan.combos(), measure_grid(plan, output_changes), strict=True)]

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        norms = present(rows, "norm", NORM_ORDER)
        fits = {(p, n, s): self.fits(rows, p, n, s, depths) for p in places for n in norms for s in SIGMAS}

        def fit(p, what, sigma=FIT_SIGMA, n=JUDGED_NORM):
            return {seed: what(f) for seed, f in fits.get((p, n, sigma), {}).items()}

        slope = lambda f: f["slope"]  # noqa: E731
        r2_gap = lambda a, b: (lambda f: stats.minus(f[a], f[b]))  # noqa: E731
        measured = {
            "post_minus_pre_slope": {"": stats.paired(fit("post", slope), fit("pre", slope), stats.minus)},
            "post_slope": {"": fit("post", slope)},
            "post_r2_linear_minus_log": {"": fit("post", r2_gap("r2_linear", "r2_log"))},
            "pre_r2_log_minus_linear": {"": fit("pre", r2_gap("r2_log", "r2_linear"))},
            "deepnorm_deep_over_shallow": {"": self.deep_over_shallow(rows, "deepnorm", JUDGED_NORM, depths)},
            "slope_change_with_sigma": {p: self.slope_change(rows, p, JUDGED_NORM, depths) for p in places},
            "fit_depths": {p: fit(p, lambda f: f["depths"]) for p in places},
        }
        table = self.table(rows, places, norms, depths, fits)
        ours = (f"log-log slope (σ = {FIT_SIGMA:g}, unsaturated depths), Post-LN − Pre-LN "
                f"{self.median_ci(measured['post_minus_pre_slope'][''])}: Post-LN {self.median_ci(fit('post', slope))}"
                f", Pre-LN {self.median_ci(fit('pre', slope))}")
        key_text = (f"Growth of E‖ΔF‖² with depth, {ours}; DeepNorm L={depths[-1]}/L={depths[0]}: "
                    f"{self.median_ci(measured['deepnorm_deep_over_shallow'][''])}.")
        return Findings(table=table, measured=measured, key=key_text, ours=ours,
                        figures={"output_change.png": lambda path: self.draw(rows, places, norms, depths, path)})

    @staticmethod
    def series(rows, p, n, column, depths) -> dict[str, list[float]]:
        """seed -> ``column`` (``key(σ)``: E‖ΔF‖² at that σ; ``"clean_sq"``: E‖F‖²) at each depth."""
        out: dict[str, list[float]] = {}
        for d in depths:
            for seed, v in stats.seeds(rows, column, placement=p, norm=n, model__n_layers=d).items():
                out.setdefault(seed, []).append(v)
        return {seed: vs for seed, vs in out.items() if len(vs) == len(depths) and None not in vs}

    def fits(self, rows, p, n, sigma, depths) -> dict[str, dict[str, float | None]]:
        """seed -> the growth fits at ``sigma`` over that seed's linear window."""
        sizes = self.series(rows, p, n, "clean_sq", depths)
        return {seed: windowed_fits(depths, vs, sizes[seed])
                for seed, vs in self.series(rows, p, n, key(sigma), depths).items() if seed in sizes}

    def slope_change(self, rows, p, n, depths) -> dict[str, float | None]:
        """Per seed: the log-log slope at the larger σ minus that at ``FIT_SIGMA``, both over the larger σ's linear
        window (a window of fewer than two depths: None)."""
        big, small = (self.series(rows, p, n, key(s), depths) for s in (SIGMAS[1], FIT_SIGMA))
        sizes = self.series(rows, p, n, "clean_sq", depths)
        out = {}
        for seed in big.keys() & small.keys() & sizes.keys():
            keep = linear_window(big[seed], sizes[seed])
            out[seed] = stats.minus(windowed_fits(depths, big[seed], sizes[seed], keep)["slope"],
                                    windowed_fits(depths, small[seed], sizes[seed], keep)["slope"])
        return out

    def deep_over_shallow(self, rows, p, n, depths, sigma=FIT_SIGMA) -> dict[str, float | None]:
        return {s: vs[-1] / vs[0] if vs[0] else None for s, vs in self.series(rows, p, n, key(sigma), depths).items()}

    @staticmethod
    def median_ci(per_seed: dict[str, float | None]) -> str:
        """The median and its interval, named for what it is (the per-seed slopes are heavy-tailed: the median, not
        the mean): the range of the seeds with 5 or fewer (the RMSNorm variant), the 95% bootstrap CI from 6 on."""
        return stats.median_and_interval(per_seed.values())

    def table(self, rows, places, norms, depths, fits) -> str:
        header = ["placement", "norm", "σ", *[f"L={d}" for d in depths], "log-log slope", "depths in the fit",
                  "R² a+b·N", "R² a+b·ln N", f"L={depths[-1]} / L={depths[0]}"]
        body = []
        for n in norms:
            for p in places:
                for s in SIGMAS:
                    series = self.series(rows, p, n, key(s), depths)
                    f = fits.get((p, n, s), {})
                    body.append([p, n, f"{s:g}", *[stats.spread(v[i] for v in series.values())
                                                   for i in range(len(depths))],
                                 self.median_ci({k: v["slope"] for k, v in f.items()}),
                                 stats.spread(v["depths"] for v in f.values()),
                                 stats.spread(v["r2_linear"] for v in f.values()),
                                 stats.spread(v["r2_log"] for v in f.values()),
                                 stats.spread(self.deep_over_shallow(rows, p, n, depths, s).values())])
        return ("E‖F(x,W) − F(x,W+δ)‖² per token (mean ± sd over seeds, n) and its growth with depth over each "
                f"seed's unsaturated depths (E‖ΔF‖² ≤ {LINEAR_MAX:g}·E‖F‖²; slopes: the median over seeds and its "
                "interval: the 95% bootstrap CI of the median with 6 seeds or more, the range of the seeds with "
                "fewer); forward passes only, so no run can diverge or collapse. The checks read the LayerNorm "
                "rows:\n\n" + markdown_table(header, body))

    def draw(self, rows, places, norms, depths, path) -> None:
        fig, axes = plots.figure(ncols=len(SIGMAS), width=5.0, height=3.8)
        for ax, s in zip(axes, SIGMAS, strict=True):
            for n in norms:
                for p in places:
                    sizes = self.series(rows, p, n, "clean_sq", depths)
                    rel = [[c / f for c, f in zip(vs, sizes[seed], strict=True)]
                           for seed, vs in self.series(rows, p, n, key(s), depths).items() if seed in sizes]
                    plots.seeds_and_mean(ax, depths, rel, plots.PLACEMENT_COLORS[p], f"{p}, {n}",
                                         style=plots.NORM_STYLES[n])
            ax.axhline(LINEAR_MAX, color="k", ls=":", lw=1, label="fit window's edge")
            plots.log_axis(ax, depths)
            ax.set_yscale("log")
            plots.finish(ax, f"perturbation σ = {s:g} at init (thin: seeds)", "depth L", "E‖ΔF‖² / E‖F‖² per token")
        plots.save(fig, path)


def output_changes(overrides: list[str]) -> dict[str, float]:
    """E‖F(x,W) − F(x,W+δ)‖² per token for each σ of ``SIGMAS`` (keyed ``key(σ)``), over ``DRAWS`` perturbations of
    every block matrix of the seeded fresh model, on the first validation batch; ``clean_sq``: E‖F(x,W)‖²."""
    import torch

    import normtrain
    from normtrain.config import compose
    from normtrain.training.trainer import seed_everything

    cfg = compose(overrides)
    x = validation_batches(cfg)[0][0]
    seed_everything(cfg.train.seed)
    model = normtrain.build_model(cfg).eval()
    with torch.no_grad():
        clean = model(x, hidden_only=True).float().pow(2).sum(-1).mean().item()
        return {"clean_sq": clean, **{key(s): _output_change(model, x, cfg.train.seed, s) for s in SIGMAS}}


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
