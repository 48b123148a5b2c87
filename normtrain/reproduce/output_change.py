"""Liu et al. 2020 (Admin): how much a small weight perturbation moves the output, against depth."""

from __future__ import annotations

from typing import Any

import torch

from normtrain.reproduce.runner import (
    PLACEMENT_ORDER,
    Check,
    Experiment,
    Findings,
    Plan,
    Scale,
    figure,
    loglog_slope,
    mean_over_seeds,
    present,
    save,
    validation_batches,
)
from normtrain.reproduce.writeup import fmt, markdown_table

RELATIVE_NOISE = 0.01  # δ per matrix: N(0, (0.01 · rms(W))²)
DRAWS = 4  # perturbations averaged per model


class OutputChange(Experiment):
    name = "admin_output_change"
    title = "Output change under a weight perturbation, against depth (Liu et al. 2020, Admin)"
    paper = "Liu et al. 2020 (Admin), §4"
    reference = "**Liu et al. 2020**, *Understanding the Difficulty of Training Transformers* (Admin), §4, Thm. 3"
    claim = ("A small perturbation δ of the parameters changes a Post-LN model's output by "
             "E‖F(x,W) − F(x,W+δ)‖² = O(N) in its depth N, a Pre-LN model's by only O(log N): Post-LN amplifies "
             "parameter updates with depth, which is why it is unstable. DeepNorm's α keeps the change bounded.")
    method = (f"Forward passes only, at initialization: each block matrix W gets δ ~ N(0, ({RELATIVE_NOISE}·rms(W))²) "
              f"(embeddings and LM head untouched); we report E‖F(x,W) − F(x,W+δ)‖² per token, F = the final hidden "
              f"state the LM head reads (after the final norm for Pre-LN), averaged over {DRAWS} draws of δ, one "
              "batch of 16 × 128 validation bytes, and the seeds. Tiny models: d 64, FFN 128, 2 heads.")
    gpu = Scale(overrides=("model.d_model=256", "model.n_heads=4", "model.d_ff=1024"),
                grid={"model.n_layers": "6,12,24,48,96,192,384", "train.seed": "0,1,2,3,4"})

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        from tqdm.auto import tqdm

        import normtrain

        rows, batch = [], None
        for combo in tqdm(plan.combos(), desc=plan.name, disable=not plan.progress, dynamic_ncols=True):
            cfg = plan.compose(combo)
            if batch is None:  # one batch for every model
                batch = validation_batches(cfg, 1)[0][0]
            torch.manual_seed(cfg.train.seed)
            model = normtrain.build_model(cfg).eval()
            rows.append({**combo, "sq_change": output_change(model, batch, cfg.train.seed)})
        return rows

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        depths = sorted({int(r["model.n_layers"]) for r in rows})
        places = present(rows, "placement", PLACEMENT_ORDER)
        change = mean_over_seeds(rows, ("placement", "model.n_layers"), "sq_change")

        def series(p):
            return [change.get((p, str(d))) for d in depths]

        slopes = {p: loglog_slope(depths, series(p)) for p in places}
        growth = {p: (series(p)[-1] / series(p)[0]) if series(p)[0] and series(p)[-1] else None for p in places}
        table = "E‖F(x,W) − F(x,W+δ)‖² per token (mean over seeds):\n\n" + markdown_table(
            ["placement", *[f"L={d}" for d in depths], "log-log slope", f"L={depths[-1]} / L={depths[0]}"],
            [[p, *series(p), slopes[p], growth[p]] for p in places])
        pre = series("pre")
        steps = [b - a for a, b in zip(pre, pre[1:], strict=False) if a is not None and b is not None]
        per_doubling = steps[-1] / steps[0] if len(steps) >= 2 and steps[0] > 0 else None
        faster = (slopes.get("post") is not None and slopes.get("pre") is not None
                  and slopes["post"] > slopes["pre"] + 0.5)
        checks = [
            Check("Post-LN: the change grows about linearly with depth (log-log slope in [0.6, 1.4])",
                  f"slope {fmt(slopes.get('post'))}", None if slopes.get("post") is None
                  else 0.6 <= slopes["post"] <= 1.4),
            Check("Pre-LN: it grows about logarithmically: the same increase for every doubling of L (the last "
                  "doubling's increase ≤ 2× the first's; linear growth would multiply it by 2 per doubling)",
                  f"increases {', '.join(fmt(v) for v in steps)}: last/first {fmt(per_doubling)}",
                  None if per_doubling is None else per_doubling <= 2),
            Check("Post-LN amplifies a perturbation much more with depth than Pre-LN (slopes differ by > 0.5)",
                  f"slopes {fmt(slopes.get('post'))} vs {fmt(slopes.get('pre'))}",
                  None if slopes.get("post") is None or slopes.get("pre") is None else faster),
            Check("DeepNorm: the change stays bounded (deepest ≤ 2× shallowest)",
                  f"×{fmt(growth.get('deepnorm'))}", None if growth.get("deepnorm") is None
                  else growth["deepnorm"] <= 2),
        ]
        key = ("Growth of E‖ΔF‖² with depth (log-log slope): "
               + ", ".join(f"{p} {fmt(slopes[p])}" for p in places) + ".")

        def draw(path):
            fig, (ax,) = figure(width=5.2)
            for p in places:
                ax.plot(depths, series(p), marker="o", label=p)
            ax.set(xscale="log", yscale="log", xlabel="depth L", ylabel="E‖F(x,W) − F(x,W+δ)‖² per token",
                   title=f"relative perturbation {RELATIVE_NOISE} at init")
            ax.set_xticks(depths, [str(d) for d in depths])
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            save(fig, path)

        return Findings(table=table, checks=checks, key=key, figures={"output_change.png": draw})


@torch.no_grad()
def output_change(model, x: torch.Tensor, seed: int) -> float:
    """E‖F(x,W) − F(x,W+δ)‖² per token over ``DRAWS`` perturbations of every block matrix."""
    clean = model(x, hidden_only=True).float()
    matrices = [p for block in model.blocks for p in block.parameters() if p.dim() >= 2]
    saved = [p.detach().clone() for p in matrices]
    gen = torch.Generator(device=x.device).manual_seed(10_000 + seed)
    total = 0.0
    for _ in range(DRAWS):
        for p, w in zip(matrices, saved, strict=True):
            noise = torch.randn(w.shape, generator=gen, device=w.device, dtype=w.dtype)
            p.copy_(w + RELATIVE_NOISE * w.pow(2).mean().sqrt() * noise)
        total += (model(x, hidden_only=True).float() - clean).pow(2).sum(-1).mean().item()
    for p, w in zip(matrices, saved, strict=True):
        p.copy_(w)
    return total / DRAWS
