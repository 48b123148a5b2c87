"""Zhang & Sennrich 2019: RMSNorm (and pRMSNorm) against LayerNorm, quality and step time, under Pre-LN."""

from __future__ import annotations

import statistics
from typing import Any

from normtrain.compare.runs import Run
from normtrain.reproduce.runner import Check, Experiment, Findings, Plan, Scale, figure, mean_over_seeds, present, save
from normtrain.reproduce.writeup import fmt, markdown_table

NORM_ORDER = ("layernorm", "rmsnorm", "prmsnorm")


class NormTypes(Experiment):
    name = "norm_types"
    title = "LayerNorm vs RMSNorm vs pRMSNorm under Pre-LN (Zhang & Sennrich 2019)"
    paper = "Zhang & Sennrich 2019"
    reference = "**Zhang & Sennrich 2019**, *Root Mean Square Layer Normalization*, Tables 1–5"
    claim = ("RMSNorm drops LayerNorm's re-centering and reaches the same quality (within a few hundredths of a "
             "nat here) while running 7%–64% faster depending on the model; pRMSNorm, which estimates the RMS "
             "from the first p = 6.25% of the features, performs comparably.")
    method = ("Pre-LN, 12 layers of the default model (d 128, 4 heads, SwiGLU, RoPE), AdamW lr 1e-3 with a 20-step "
              "warm-up and cosine decay, 200 steps of 16 × 128 bytes; diagnostics off so `tokens_per_s` times the "
              "training step alone (its median over the logged intervals, the first left out). RMSNorm runs "
              "`norm.impl=auto`: the torch path on CPU, the fused Triton kernel on CUDA.")
    gpu = Scale(overrides=("model=gpt2_small", "train.max_steps=2000", "train.batch_size=16", "train.eval_every=250"),
                grid={"train.seed": "0,1,2"})

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        _, tps = run.series("tokens_per_s")
        tps = [v for v in tps.tolist()[1:] if v == v]  # the first interval includes start-up
        return {**super().row(run, combo), "tokens_per_s": statistics.median(tps) if tps else None}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        norms = present(rows, "norm", NORM_ORDER)
        loss = mean_over_seeds(rows, ("norm",), "final_val_loss")
        speed = mean_over_seeds(rows, ("norm",), "tokens_per_s")
        ln_loss, ln_speed = loss.get(("layernorm",)), speed.get(("layernorm",))

        def step_ratio(n):  # step time of n over LayerNorm's
            return ln_speed / speed[(n,)] if ln_speed and speed.get((n,)) else None

        def delta(n):
            return loss[(n,)] - ln_loss if ln_loss is not None and (n,) in loss else None

        table = markdown_table(["norm", "final val loss", "Δ vs LayerNorm", "tokens/s", "step time / LayerNorm's"],
                               [[n, loss.get((n,)), delta(n), speed.get((n,)), step_ratio(n)] for n in norms])
        checks = [
            Check("RMSNorm's final loss within 0.05 nats of LayerNorm's",
                  f"Δ = {fmt(delta('rmsnorm'))} nats",
                  None if delta("rmsnorm") is None else abs(delta("rmsnorm")) <= 0.05),
            Check("RMSNorm's training step is faster than LayerNorm's (the paper: 7%–64%)",
                  f"step time ratio {fmt(step_ratio('rmsnorm'))} on {rows[0].get('device', 'this device')}",
                  None if step_ratio("rmsnorm") is None else step_ratio("rmsnorm") < 1),
            Check("pRMSNorm (p = 6.25%) within 0.1 nats of LayerNorm's",
                  f"Δ = {fmt(delta('prmsnorm'))} nats",
                  None if delta("prmsnorm") is None else abs(delta("prmsnorm")) <= 0.1),
        ]
        key = (f"RMSNorm − LayerNorm = {fmt(delta('rmsnorm'))} nats, pRMSNorm − LayerNorm = {fmt(delta('prmsnorm'))}; "
               f"step time RMSNorm / LayerNorm = {fmt(step_ratio('rmsnorm'))}.")

        def draw(path):
            fig, axes = figure(ncols=2, width=4.2)
            axes[0].bar(norms, [loss.get((n,)) or 0 for n in norms], color=["C0", "C1", "C2"][:len(norms)])
            low = min((v for v in loss.values()), default=0)
            axes[0].set(ylabel="final val loss (nats/byte)", ylim=(max(0, low - 0.2), None), title="quality")
            axes[1].bar(norms, [step_ratio(n) or 0 for n in norms], color=["C0", "C1", "C2"][:len(norms)])
            axes[1].axhline(1, color="k", lw=0.8)
            axes[1].set(ylabel="step time / LayerNorm's", title="speed")
            for ax in axes:
                ax.grid(alpha=0.3, axis="y")
            save(fig, path)

        return Findings(table=table, checks=checks, key=key, figures={"norm_types.png": draw})
