"""Why causal transformers do not use BatchNorm: its training statistics see the future.

Each trained model is evaluated on the same validation batches twice: in training mode (statistics of
the batch itself, which include every later token) and in evaluation mode (running statistics, what a
model meets at generation time). A direct causality check changes only the last token of every
sequence and measures how far the log-probabilities at the earlier positions move.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from normtrain.compare.runs import Run
from normtrain.reproduce.runner import (
    Check,
    Experiment,
    Findings,
    Plan,
    Scale,
    figure,
    first_seed,
    save,
    validation_batches,
)
from normtrain.reproduce.writeup import fmt, markdown_table


class BatchNormLeak(Experiment):
    name = "batchnorm_leak"
    title = "Why transformers do not use BatchNorm: the leak through batch statistics"
    paper = "why not BatchNorm (PowerNorm, Shen et al. 2020, §3)"
    reference = ("**Shen et al. 2020**, *PowerNorm: Rethinking Batch Normalization in Transformers*, §3; "
                 "the causal-LM leak is the classic answer to 'why not BatchNorm?'")
    claim = ("BatchNorm normalizes each feature with statistics over batch × positions. In a causal language "
             "model those statistics include future tokens, so the training-mode output at position t depends "
             "on tokens after t (a leak), training and evaluation see different statistics, and small batches "
             "make the statistics noisy. LayerNorm and RMSNorm normalize each token on its own.")
    method = ("Pre-LN, 6 layers, d 64, 4 heads, GELU FFN 256, AdamW lr 1e-3 (20-step warm-up, cosine), 200 steps, "
              "with `norm=batchnorm` (over batch × positions, running statistics for evaluation) or the LayerNorm "
              "control, at batch sizes 2, 8 and 32 sequences of 128 bytes. Each final model is scored on the "
              "same 4 validation batches (of its own batch size) in training mode and in evaluation mode; the leak "
              "is the largest change of a log-probability at positions 0…126 when only position 127 changes.")
    gpu = Scale(overrides=("model.d_model=256", "model.d_ff=1024", "train.max_steps=2000", "train.eval_every=250"),
                grid={"train.batch_size": "2,8,32,128", "train.seed": "0,1,2"})
    keep_checkpoints = True

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), **score_both_modes(run)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        sizes = sorted({int(r["train.batch_size"]) for r in rows})
        by = {(r["norm"], int(r["train.batch_size"])): r for r in first_seed(rows)}
        for r in rows:
            r["gap"] = (r["eval_mode_loss"] - r["train_mode_loss"]
                        if r.get("eval_mode_loss") is not None and r.get("train_mode_loss") is not None else None)
        table = markdown_table(
            ["norm", "batch", "val loss, training mode", "val loss, eval mode", "gap (eval − train)", "leak"],
            [[n, b, by[(n, b)]["train_mode_loss"], by[(n, b)]["eval_mode_loss"], by[(n, b)]["gap"],
              by[(n, b)]["leak"]] for n in ("batchnorm", "layernorm") for b in sizes if (n, b) in by])
        table += ("\n\nleak: max |Δ log p| at the earlier positions when only the last token of each sequence "
                  "changes, in training mode (0 means causal).")

        def get(n, b, k):
            return (by.get((n, b)) or {}).get(k)

        bn_gaps = [get("batchnorm", b, "gap") for b in sizes]
        ln_gaps = [get("layernorm", b, "gap") for b in sizes]
        bn_leaks = [get("batchnorm", b, "leak") for b in sizes]
        ln_leaks = [get("layernorm", b, "leak") for b in sizes]
        behind = [get("batchnorm", b, "eval_mode_loss") - get("layernorm", b, "eval_mode_loss")
                  if get("batchnorm", b, "eval_mode_loss") is not None
                  and get("layernorm", b, "eval_mode_loss") is not None else None for b in sizes]
        checks = [
            Check("BatchNorm in training mode lets future tokens change earlier outputs; LayerNorm does not",
                  f"BatchNorm leak {', '.join(fmt(v) for v in bn_leaks)}; "
                  f"LayerNorm {', '.join(fmt(v) for v in ln_leaks)}",
                  None if None in bn_leaks + ln_leaks else min(bn_leaks) > 1e-3 and max(ln_leaks) < 1e-4),
            Check("Training and evaluation disagree: BatchNorm's two modes differ by ≥ 0.02 nats at every batch size",
                  "eval − training mode: " + ", ".join(f"{fmt(g)} (batch {b})" for g, b in zip(bn_gaps, sizes,
                                                                                               strict=True)),
                  None if None in bn_gaps else all(abs(g) >= 0.02 for g in bn_gaps)),
            Check("The leak makes training-mode loss optimistic (eval mode ≥ 0.05 nats worse) at the smallest batch",
                  f"eval − training mode {fmt(bn_gaps[0])} nats at batch {sizes[0]}",
                  None if bn_gaps[0] is None else bn_gaps[0] >= 0.05),
            Check("Small batches hurt: BatchNorm falls further behind LayerNorm at the smallest batch than at "
                  "the largest", "BatchNorm − LayerNorm (eval mode): "
                  + ", ".join(f"{fmt(v)} (batch {b})" for v, b in zip(behind, sizes, strict=True)),
                  None if None in behind or len(sizes) < 2 else behind[0] > behind[-1]),
            Check("LayerNorm control: no gap between the two modes (|gap| < 1e-3)",
                  "gap " + ", ".join(fmt(g) for g in ln_gaps),
                  None if None in ln_gaps else all(abs(g) < 1e-3 for g in ln_gaps)),
        ]
        key = (f"BatchNorm: eval-mode − training-mode val loss = {', '.join(fmt(g) for g in bn_gaps)} nats at batch "
               f"{', '.join(map(str, sizes))}; a change of the last token moves earlier log-probs by up to "
               f"{fmt(max((v for v in bn_leaks if v is not None), default=None))} (LayerNorm: 0).")

        def draw(path):
            fig, axes = figure(ncols=2, width=4.4)
            for n, style in (("batchnorm", "-"), ("layernorm", "--")):
                axes[0].plot(sizes, [get(n, b, "train_mode_loss") for b in sizes], style, marker="o",
                             label=f"{n}, training mode")
                axes[0].plot(sizes, [get(n, b, "eval_mode_loss") for b in sizes], style, marker="s",
                             label=f"{n}, eval mode")
            axes[0].set(xscale="log", xlabel="batch size (sequences)", ylabel="val loss (nats/byte)",
                        title="same val batches, two modes")
            axes[1].plot(sizes, bn_gaps, marker="o", label="batchnorm")
            axes[1].plot(sizes, ln_gaps, "--", marker="o", label="layernorm")
            axes[1].set(xscale="log", xlabel="batch size (sequences)", ylabel="eval − training mode (nats)",
                        title="the gap")
            for ax in axes:
                ax.set_xticks(sizes, [str(b) for b in sizes])
                ax.grid(alpha=0.3)
                ax.legend(fontsize=7)
            save(fig, path)

        return Findings(table=table, checks=checks, key=key, figures={"batchnorm_leak.png": draw})


@torch.no_grad()
def score_both_modes(run: Run) -> dict[str, float]:
    """Val loss in training and evaluation mode, and the causality leak, of the run's final checkpoint."""
    from omegaconf import OmegaConf

    import normtrain
    from normtrain.checkpoint import load_checkpoint

    cfg = OmegaConf.create(run.summary["config"])
    model = normtrain.build_model(cfg)
    model.load_state_dict(load_checkpoint(run.path / "ckpt.pt")["model"])
    batches = validation_batches(cfg, 4)

    def mean_loss(train_mode: bool) -> float:
        m = copy.deepcopy(model).train(train_mode)  # a copy: training mode would update the running statistics
        return sum(m(x, y)[1].item() for x, y in batches) / len(batches)

    x = batches[0][0]
    changed = x.clone()
    changed[:, -1] = (changed[:, -1] + 128) % 256
    m = copy.deepcopy(model).train()
    logp = [m(v)[0].float().log_softmax(-1)[:, :-1] for v in (x, changed)]
    return {"train_mode_loss": mean_loss(True), "eval_mode_loss": mean_loss(False),
            "leak": (logp[0] - logp[1]).abs().max().item()}
