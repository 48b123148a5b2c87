"""Xiong et al. 2020, Fig. 3: where the gradient of the FFN's second matrix sits at initialization, per layer."""

from __future__ import annotations

import math
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.probing import profile_text
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, present
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import plots, stats
from normtrain.study.grid import measure_grid
from normtrain.study.plan import Plan

NORM_ORDER = ("layernorm", "rmsnorm")
JUDGED_NORM = "layernorm"  # the paper's; the checks read it alone
BATCHES = 8  # the gradient is that of the mean loss over this many training batches
VARIANT_BELOW = 23  # the RMSNorm variant runs the seeds below this: the first 3 of the YAML's v5 seeds (20-29)


def profile_slope(profile: list[float]) -> float | None:
    """Least-squares slope of ln‖∇W_ℓ‖ against ℓ/L (ℓ = 1…L): about ln(last/first) of the fitted profile, so a
    depth-free number (> 0 rises toward the output)."""
    depth = len(profile)
    pts = [((i + 1) / depth, math.log(v)) for i, v in enumerate(profile) if v > 0]
    return stats.slope(pts)


class GradInit(Experiment):
    name = "xiong_grad_init"
    title = "Gradient of the FFN's second matrix per layer at initialization (Xiong et al. 2020, Fig. 3)"
    paper = "Xiong et al. 2020, Fig. 3"
    reference = "**Xiong et al. 2020**, *On Layer Normalization in the Transformer Architecture*, Fig. 3 and Thm. 1"
    method = ("No training: each model is built from its seed at the paper's width (d 512, FFN 1024 GELU, 4 heads, "
              "learned positions, Xavier-normal init, unit-variance embeddings), and we read ‖∇W‖ of every block's "
              f"FFN down-projection for the mean loss over {BATCHES} training batches of 4 × 128 bytes (4096 tokens, "
              "as fairseq's IWSLT batches) that its seed draws. Post-LN and Pre-LN (judged) and DeepNorm (shown) at "
              "6, 12, 24 and 48 layers, 10 seeds; RMSNorm as a labelled variant at 3 seeds. With Pre-LN we also read "
              "the residual stream that enters the final norm, E‖x_L‖²/d per token (Xiong's Lemma 1: it grows "
              "linearly with L, which is why Pre-LN's last-layer gradient shrinks). The models are measured at "
              "initialization and nothing is trained, so no learning-rate grid is needed: comparing arms each at "
              "its own best learning rate applies to trained models, not to gradients at init.")
    gpu_recipe = Recipe(lengthen=False, extra_steps=8)  # gradients at initialization: 8 batches, no training

    def keeps(self, combo: dict[str, str]) -> bool:
        return combo.get("norm") == JUDGED_NORM or int(combo.get("train.seed", 0)) < VARIANT_BELOW

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        rows = []
        for combo, m in zip(plan.combos(), measure_grid(plan, fc2_gradients), strict=True):
            p = m["value"]["grads"]
            rows.append({**combo, **{k: m[k] for k in ("started_at", "wall_time_s", "code_commit", "code_dirty")},
                         "first": p[0], "last": p[-1], "log_slope": profile_slope(p),
                         "stream_sq": m["value"]["stream_sq"], "profile": profile_text(p)})
        return rows

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        norms = present(rows, "norm", NORM_ORDER)
        ln = JUDGED_NORM
        measured = {
            "post_profile_slope": {f"L={d}": stats.seeds(rows, "log_slope", placement="post", norm=ln,
                                                         model__n_layers=d) for d in depths},
            "pre_profile_slope": {f"L={d}": stats.seeds(rows, "log_slope", placement="pre", norm=ln,
                                                        model__n_layers=d) for d in depths},
            "post_last_depth_slope": {"": self.depth_slopes(rows, "post", ln, depths)},
            "pre_last_depth_slope": {"": self.depth_slopes(rows, "pre", ln, depths)},
            "pre_stream_depth_slope": {"": self.depth_slopes(rows, "pre", ln, depths, "stream_sq")},
        }
        measured["post_minus_pre_last_depth_slope"] = {"": stats.paired(
            measured["post_last_depth_slope"][""], measured["pre_last_depth_slope"][""], stats.minus)}
        table = self.table(rows, places, norms, depths)
        post, pre = (measured[f"{p}_profile_slope"][f"L={depths[-1]}"].values() for p in ("post", "pre"))
        pre_depth = measured["pre_last_depth_slope"][""].values()
        gap = measured["post_minus_pre_last_depth_slope"][""].values()
        ours = (f"last-block slope vs L, Post-LN − Pre-LN: {stats.median_and_interval(gap)} (Pre-LN alone "
                f"{stats.spread(pre_depth)}); profile slope ln(last/first) at L={depths[-1]}: Post-LN "
                f"{stats.spread(post)}, Pre-LN {stats.spread(pre)}")
        key = f"Per-seed fitted profiles of ‖∇W_fc2‖ at init, {ours}."
        return Findings(table=table, measured=measured, key=key, ours=ours, figures={
            "grad_profile.png": lambda path: self.draw_profiles(rows, places, depths, path),
            "last_layer_vs_depth.png": lambda path: self.draw_last(rows, places, norms, depths, path)})

    @staticmethod
    def depth_slopes(rows, placement: str, norm: str, depths: list[int], value: str = "last"
                     ) -> dict[str, float | None]:
        """Per seed: the log-log slope against the depth L of the last block's gradient (or of ``value``)."""
        by_seed: dict[str, list] = {}
        for d in depths:
            for s, v in stats.seeds(rows, value, placement=placement, norm=norm, model__n_layers=d).items():
                by_seed.setdefault(s, []).append(v)
        return {s: stats.loglog_slope(depths, vs) for s, vs in by_seed.items() if len(vs) == len(depths)}

    def table(self, rows, places, norms, depths) -> str:
        header = ["placement", "norm", *[f"profile slope, L={d}" for d in depths],
                  *[f"last block, L={d}" for d in depths], "last-block slope vs L", "stream ‖x_L‖²/d slope vs L"]
        body = [[p, n, *[stats.spread(stats.seeds(rows, "log_slope", placement=p, norm=n, model__n_layers=d).values())
                         for d in depths],
                 *[stats.spread(stats.seeds(rows, "last", placement=p, norm=n, model__n_layers=d).values())
                   for d in depths],
                 stats.spread(self.depth_slopes(rows, p, n, depths).values()),
                 stats.spread(self.depth_slopes(rows, p, n, depths, "stream_sq").values())]
                for n in norms for p in places]
        return ("Profile slope: per seed, the least-squares slope of ln‖∇W_fc2‖ against ℓ/L (≈ ln(last/first); > 0 "
                "rises toward the output). Stream: E‖x_L‖²/d per token entering the final norm (Pre-LN only; the "
                "other placements end on a norm). Mean ± sd over seeds (n); forward and backward passes only, so no "
                "run can diverge or collapse. The checks read the LayerNorm rows:\n\n" + markdown_table(header, body))

    @staticmethod
    def draw_profiles(rows, places, depths, path) -> None:
        fig, axes = plots.figure(ncols=len(places), width=4.0)
        for ax, p in zip(axes, places, strict=True):
            for k, d in enumerate(depths):
                profs = [[float(v) for v in r["profile"].split()]
                         for r in stats.select(rows, placement=p, norm=JUDGED_NORM, model__n_layers=d)]
                xs = [(i + 1) / d for i in range(d)]
                color = plots.shade(plots.PLACEMENT_COLORS[p], 0.3 + 0.7 * (k + 1) / len(depths))
                plots.seeds_and_mean(ax, xs, profs, color, f"L={d}", marker="")
            ax.set_yscale("log")
            plots.finish(ax, f"{p} (LayerNorm, d 512)", "block index / L", "‖∇W_fc2‖ at init")
        plots.save(fig, path)

    @staticmethod
    def draw_last(rows, places, norms, depths, path) -> None:
        fig, (ax,) = plots.figure(width=5.4, height=3.6)
        for n in norms:
            for p in places:
                per_seed = list(zip(*[list(stats.seeds(rows, "last", placement=p, norm=n, model__n_layers=d).values())
                                      for d in depths], strict=True))
                plots.seeds_and_mean(ax, depths, per_seed, plots.PLACEMENT_COLORS[p], f"{p}, {n}",
                                     style=plots.NORM_STYLES[n])
        ref = stats.mean(stats.seeds(rows, "last", placement="pre", norm=JUDGED_NORM,
                                     model__n_layers=depths[0]).values())
        if ref:
            ax.plot(depths, [ref * (d / depths[0]) ** -0.5 for d in depths], "k:", lw=1, label="∝ L^-1/2")
        plots.log_axis(ax, depths)
        ax.set_yscale("log")
        plots.finish(ax, "last block's ‖∇W_fc2‖ at init (thin: seeds)", "depth L", "gradient norm")
        plots.save(fig, path)


def fc2_gradients(overrides: list[str]) -> dict[str, Any]:
    """``grads``: ‖∇W‖ of each block's FFN down-projection for the mean loss over ``BATCHES`` training batches that
    the seeded, fresh model's sampler draws first (what the first steps of a training run would see);
    ``stream_sq``: E‖x_L‖²/d per token of the residual stream entering the final norm over those batches (None
    for a placement without one: its stream leaves the last block normalized)."""
    import torch

    import normtrain
    from normtrain.config import compose
    from normtrain.data import BatchSampler, load_corpus
    from normtrain.training.trainer import seed_everything

    cfg = compose(overrides)
    d = cfg.data
    corpus = load_corpus(d.name, d.path, d.val_fraction, d.cache_dir, progress=False)
    seed_everything(cfg.train.seed)
    model = normtrain.build_model(cfg)
    sampler = BatchSampler(corpus.train, cfg.train.batch_size, cfg.model.seq_len, cfg.train.seed)
    streams: list[float] = []  # E‖x_L‖²/d per batch, read at the final norm's input
    hook = (model.final_norm.register_forward_hook(
        lambda _m, inp, _out: streams.append(inp[0].detach().float().pow(2).mean().item()))
        if model.final_norm is not None else None)
    for _ in range(BATCHES):
        x, y = sampler.next_batch()
        (model(x, y)[1] / BATCHES).backward()
    if hook is not None:
        hook.remove()
    with torch.no_grad():
        return {"grads": [block.mlp.down.weight.grad.norm().item() for block in model.blocks],
                "stream_sq": sum(streams) / len(streams) if streams else None}
