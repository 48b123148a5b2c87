"""Xiong et al. 2020, Fig. 3: where the gradient of the FFN's second matrix sits at initialization, per layer."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.runner import PLACEMENT_ORDER, Experiment, Findings, Plan, Scale, each_run, present
from normtrain.reproduce.writeup import markdown_table

NORM_ORDER = ("layernorm", "rmsnorm")
JUDGED_NORM = "layernorm"  # the paper's; the checks read it alone


class GradInit(Experiment):
    name = "xiong_grad_init"
    title = "Gradient of the FFN's second matrix per layer at initialization (Xiong et al. 2020, Fig. 3)"
    paper = "Xiong et al. 2020, Fig. 3"
    reference = "**Xiong et al. 2020**, *On Layer Normalization in the Transformer Architecture*, Fig. 3 and Thm. 1"
    method = ("No training: each model is built from its seed (Xavier-normal init, unit-variance embeddings: d 64, "
              "FFN 128 GELU, 2 heads, learned positions), takes one forward and backward pass on the first training "
              "batch its seed draws (16 × 128 bytes of the default corpus), and we read ‖∇W‖ of every block's FFN "
              "down-projection. Post-LN, Pre-LN and DeepNorm (shown, not judged) at 4 depths, 10 seeds each.")
    gpu = Scale(overrides=("model.d_model=256", "model.n_heads=4", "model.d_ff=1024", "train.batch_size=64"),
                grid={"model.n_layers": "6,12,24,48,96,192"})

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        rows = []
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for combo in each_run(plan):
            profile = fc2_gradients(plan.compose(combo))
            rows.append({**combo, "started_at": started, "first": profile[0], "last": profile[-1],
                         "last_over_first": profile[-1] / profile[0], "profile": " ".join(f"{v:.5g}" for v in profile)})
        return rows

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        norms = present(rows, "norm", NORM_ORDER)

        def select(p, n, d=None):
            return lambda r: r["placement"] == p and r["norm"] == n and (d is None or int(r["model.n_layers"]) == d)

        def seeds(p, n, d, key):
            return stats.per_seed(rows, key, select(p, n, d))

        def across_depths(p, n, summarize):  # per seed, one number from the depth series of that seed
            by_seed: dict[str, list] = {}
            for d in depths:
                for s, v in seeds(p, n, d, "last").items():
                    by_seed.setdefault(s, []).append(v)
            return {s: summarize(vs) for s, vs in by_seed.items() if len(vs) == len(depths)}

        slope = lambda vs: stats.loglog_slope(depths, vs)  # noqa: E731
        max_over_min = lambda vs: max(vs) / min(vs)  # noqa: E731
        ln = JUDGED_NORM
        measured = {
            "post_last_over_first": {f"L={d}": seeds("post", ln, d, "last_over_first") for d in depths},
            "post_last_max_over_min": {"": across_depths("post", ln, max_over_min)},
            "pre_last_slope": {"": across_depths("pre", ln, slope)},
            "pre_last_over_first": {f"L={d}": seeds("pre", ln, d, "last_over_first") for d in depths},
        }
        header = ["placement", "norm", *[f"last block, L={d}" for d in depths], "slope vs L",
                  *[f"last/first, L={d}" for d in depths]]
        body = [[p, n, *[stats.spread(seeds(p, n, d, "last").values()) for d in depths],
                 stats.spread(across_depths(p, n, slope).values()),
                 *[stats.spread(seeds(p, n, d, "last_over_first").values()) for d in depths]]
                for n in norms for p in places]
        table = ("‖∇W‖ of the FFN's down-projection at init, mean ± std over seeds (n); the checks read the LayerNorm "
                 "rows:\n\n" + markdown_table(header, body))
        post_ratio = seeds("post", ln, depths[-1], "last_over_first").values()
        pre_slope = measured["pre_last_slope"][""].values()
        ours = (f"Post-LN last/first block at L={depths[-1]}: {stats.spread(post_ratio)}; Pre-LN last-block slope vs "
                f"L: {stats.spread(pre_slope)}")
        key = (f"Post-LN's fc2 gradient rises toward the output (last/first {stats.spread(post_ratio)} at "
               f"L={depths[-1]}); Pre-LN's last block falls with depth, log-log slope {stats.spread(pre_slope)}.")

        def draw_profiles(path):
            fig, axes = plots.figure(ncols=len(places), width=4.0)
            for ax, p in zip(axes, places, strict=True):
                for k, d in enumerate(depths):
                    profs = [[float(v) for v in r["profile"].split()] for r in rows if select(p, ln, d)(r)]
                    xs = [(i + 1) / d for i in range(d)]
                    color = plots.shade(plots.PLACEMENT_COLORS[p], 0.3 + 0.7 * (k + 1) / len(depths))
                    plots.seeds_and_mean(ax, xs, profs, color, f"L={d}", marker="")
                ax.set_yscale("log")
                plots.finish(ax, f"{p} (LayerNorm)", "block index / L", "‖∇W_fc2‖ at init")
            plots.save(fig, path)

        def draw_last(path):
            fig, (ax,) = plots.figure(width=5.4, height=3.6)
            for n in norms:
                for p in places:
                    per_seed = list(zip(*[list(seeds(p, n, d, "last").values()) for d in depths], strict=True))
                    plots.seeds_and_mean(ax, depths, per_seed, plots.PLACEMENT_COLORS[p], f"{p}, {n}",
                                         style=plots.NORM_STYLES[n])
            ref = stats.mean(seeds("pre", ln, depths[0], "last").values())
            if ref:
                ax.plot(depths, [ref * (d / depths[0]) ** -0.5 for d in depths], "k:", lw=1, label="∝ L^-1/2")
            plots.log_axis(ax, depths)
            ax.set_yscale("log")
            plots.finish(ax, "last block's ‖∇W_fc2‖ at init (thin: seeds)", "depth L", "gradient norm")
            plots.save(fig, path)

        return Findings(table=table, measured=measured, key=key, ours=ours,
                        figures={"grad_profile.png": draw_profiles, "last_layer_vs_depth.png": draw_last})


def fc2_gradients(cfg) -> list[float]:
    """‖∇W‖ of each block's FFN down-projection after one forward/backward of the seeded, fresh model on the
    first training batch its seed draws (what step 0 of a training run would see)."""
    import torch

    import normtrain
    from normtrain.data import BatchSampler, load_corpus
    from normtrain.training import seed_everything

    d = cfg.data
    corpus = load_corpus(d.name, d.path, d.val_fraction, d.cache_dir, progress=False)
    seed_everything(cfg.train.seed)
    model = normtrain.build_model(cfg)
    x, y = BatchSampler(corpus.train, cfg.train.batch_size, cfg.model.seq_len, cfg.train.seed).next_batch()
    model(x, y)[1].backward()
    with torch.no_grad():
        return [block.mlp.down.weight.grad.norm().item() for block in model.blocks]
