"""Why causal transformers do not use BatchNorm: its training statistics see the future.

Three arms train the same Pre-LN model: BatchNorm (statistics over batch × all positions: leaky), the causal
control (``batchnorm_causal``: statistics over batch × positions ≤ t, so the only difference is the leak) and
LayerNorm. Each trained model scores the same validation windows two ways: in training mode with its own batch's
statistics (what the training loss saw) and in evaluation mode (running statistics: what generation sees). A
direct causality check changes only the last token of every sequence and measures how far the log-probabilities
at the earlier positions move.
"""

from __future__ import annotations

from typing import Any

from normtrain.compare.runs import Run
from normtrain.reproduce import plots, stats
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.plan import Plan
from normtrain.reproduce.runner import Experiment, Findings, curve_points, present, validation_batches
from normtrain.reproduce.writeup import markdown_table
from normtrain.training.outcome import line_labels

NORMS = ("batchnorm", "batchnorm_causal", "layernorm")
MODES = {"own": "training mode, own batch's statistics", "eval": "evaluation mode (running statistics)"}
COLORS = {"batchnorm": plots.NORM_COLORS["batchnorm"], "batchnorm_causal": "#e6a23c", "layernorm": "#1f77b4"}


class BatchNormLeak(Experiment):
    name = "batchnorm_leak"
    title = "Why transformers do not use BatchNorm: the leak through batch statistics"
    paper = "why not BatchNorm (PowerNorm, Shen et al. 2020, §3)"
    reference = ("**Shen et al. 2020**, *PowerNorm: Rethinking Batch Normalization in Transformers*, §3; "
                 "the causal-LM leak is the classic answer to 'why not BatchNorm?'")
    method = ("Pre-LN, 6 layers, d 64, 4 heads, GELU FFN 256, AdamW lr 1e-3 (50-step warm-up, cosine), 1000 steps, "
              "with `norm=batchnorm` (statistics over batch × positions), its causal control `norm=batchnorm_causal` "
              "(statistics over batch × positions ≤ t) or LayerNorm, at batch sizes 1, 2, 8 and 16 sequences of 128 "
              "bytes, 5 seeds. Each final model scores the same 512 validation windows in batches of its own batch "
              "size, in training mode (own batch's statistics) and in evaluation mode (running statistics).")
    # the batch size is the design: longer windows instead of more sequences; each model scored two ways after it
    gpu_recipe = Recipe(batch=1, seq=2, extra_steps=200)
    keep_checkpoints = True

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        """A diverged run kept no finite weights to score: its scores are missing (its seed drops out of the
        comparisons that need them) and the cell counts it as diverged. A scored run's line labels (collapsed,
        above the line) read its training-mode loss, the one the leak is about; whether it was still falling reads
        its evaluation-mode validation curve, the only one logged."""
        if run.status == "diverged" or not (run.path / "ckpt.pt").is_file():
            return {**super().row(run, combo), "own_loss": None, "eval_loss": None, "leak": None}
        row = {**super().row(run, combo), **score_two_ways(run)}
        if row["unigram_val_loss"] is not None:  # labelled on the loss it is judged by: training mode, own batch
            row.update(line_labels(row["own_loss"], row["unigram_val_loss"], row["val_quarter_drop"]))
        return row

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        sizes = sorted({int(r["train.batch_size"]) for r in rows})
        norms = present(rows, "norm", NORMS)
        small, large = sizes[0], sizes[-1]
        unigram = stats.unigram_of(rows)

        def seeds(n, b, value):
            return stats.seeds(rows, value, norm=n, train__batch_size=b)

        def versus(a, b, size, mode):  # per seed: arm a's loss minus arm b's, in one scoring mode
            return stats.paired(seeds(a, size, f"{mode}_loss"), seeds(b, size, f"{mode}_loss"), lambda x, y: x - y)

        bn_vs_ln = {b: versus("batchnorm", "layernorm", b, "eval") for b in sizes}
        measured = {
            "bn_leak": {f"batch {b}": seeds("batchnorm", b, "leak") for b in sizes},
            "control_leak": {f"{n}, batch {b}": seeds(n, b, "leak") for n in ("batchnorm_causal", "layernorm")
                             for b in sizes},
            "leak_flatters_training_loss": {f"batch {b}": versus("batchnorm_causal", "batchnorm", b, "own")
                                            for b in sizes},
            "leak_hurts_evaluation": {f"batch {b}": versus("batchnorm", "batchnorm_causal", b, "eval")
                                      for b in sizes},
            "bn_gap_small_minus_large": {"": stats.paired(bn_vs_ln[small], bn_vs_ln[large], lambda x, y: x - y)},
            "ln_mode_difference": {f"batch {b}": seeds("layernorm", b, lambda r: stats.absolute(mode_gap(r)))
                                   for b in sizes},
            "reference_margin": {f"layernorm, batch {b}": stats.margin_below(unigram, seeds("layernorm", b,
                                                                                           "eval_loss"))
                                 for b in sizes},
        }
        flatters = measured["leak_flatters_training_loss"]
        ours = ("the leak's gain in training-mode loss (causal − leaky BatchNorm): "
                + ", ".join(f"{stats.spread(flatters[f'batch {b}'].values())} (batch {b})" for b in sizes))
        key = (f"BatchNorm: {ours}; in evaluation mode leaky − causal: "
               + ", ".join(f"{stats.spread(measured['leak_hurts_evaluation'][f'batch {b}'].values())} (batch {b})"
                           for b in sizes) + ".")
        return Findings(table=self.table(rows, norms, sizes, seeds), measured=measured, key=key, ours=ours,
                        figures={"batchnorm_leak.png": lambda path: self.draw(rows, norms, sizes, seeds, unigram,
                                                                              path)})

    @staticmethod
    def table(rows, norms, sizes, seeds) -> str:
        body = [[n, b, *[stats.cell(seeds(n, b, f"{m}_loss").values(), stats.select(rows, norm=n,
                                                                                    train__batch_size=b))
                         for m in MODES],
                 stats.spread(seeds(n, b, mode_gap).values()),
                 stats.spread(seeds(n, b, "leak").values())] for n in norms for b in sizes]
        return ("Validation loss (nats per byte) on the same 512 windows; " + stats.CELL_NOTE + ". Leak: the largest "
                "change of a log-probability at positions 0…126 when only position 127 changes (0 = causal):\n\n"
                + markdown_table(["norm", "batch", *[f"val loss: {t}" for t in MODES.values()],
                                  "eval − own", "leak (max |Δ log p|)"], body))

    @staticmethod
    def draw(rows, norms, sizes, seeds, unigram, path) -> None:
        fig, axes = plots.figure(ncols=3, width=4.2, height=3.5)
        for n in norms:
            for m, marker in zip(MODES, ("o", "^"), strict=True):
                per_seed = list(zip(*[list(seeds(n, b, f"{m}_loss").values()) for b in sizes], strict=True))
                plots.seeds_and_mean(axes[0], sizes, per_seed, COLORS[n], f"{n}, {m}", marker=marker,
                                     style="-" if m == "own" else "--")
            mine = stats.select(rows, norm=n, train__batch_size=sizes[0])
            plots.curves(axes[2], [curve_points(r["val_curve"]) for r in mine if r["val_curve"]], COLORS[n],
                         f"{n}, batch {sizes[0]}")
        for mode, style in (("own", "-"), ("eval", "--")):
            gains = list(zip(*[list(stats.paired(seeds("batchnorm_causal", b, f"{mode}_loss"),
                                                 seeds("batchnorm", b, f"{mode}_loss"), lambda x, y: x - y).values())
                               for b in sizes], strict=True))
            plots.seeds_and_mean(axes[1], sizes, gains, COLORS["batchnorm"], f"{mode} mode", style=style)
        axes[1].axhline(0, color="k", lw=0.8)
        for ax in axes[:2]:
            plots.log_axis(ax, sizes)
        plots.log_axis(axes[2], (2, 3, 5, 10, 20, 40), axis="y")  # step 0 of BatchNorm sits near 35 nats
        for ax in (axes[0], axes[2]):
            plots.unigram_line(ax, unigram)
        plots.finish(axes[0], "two ways to score (thin: seeds)", "batch size (sequences)", "val loss (nats/byte)")
        plots.finish(axes[1], "causal − leaky BatchNorm (> 0: the leak helps)", "batch size (sequences)", "nats")
        plots.finish(axes[2], "val loss in training (evaluation mode)", "step", "val loss (nats/byte)")
        plots.save(fig, path)


def mode_gap(row: dict[str, Any]) -> float | None:
    """Evaluation mode's loss minus training mode's (own batch), None for a run without scores."""
    if row.get("eval_loss") is None or row.get("own_loss") is None:
        return None
    return row["eval_loss"] - row["own_loss"]


def score_two_ways(run: Run) -> dict[str, float]:
    """Val loss with own-batch statistics and in evaluation mode, and the causality leak."""
    import torch

    with torch.no_grad():
        return _score_two_ways(run)


def _score_two_ways(run: Run) -> dict[str, float]:
    import copy

    from omegaconf import OmegaConf

    import normtrain
    from normtrain.checkpoint import load_checkpoint

    cfg = OmegaConf.create(run.summary["config"])
    model = normtrain.build_model(cfg)
    model.load_state_dict(load_checkpoint(run.path / "ckpt.pt")["model"])
    batches = validation_batches(cfg)
    full = [b for b in batches if len(b[0]) == cfg.train.batch_size]  # a short last batch has its own statistics
    training = copy.deepcopy(model).train()  # a copy: training mode would update the running statistics
    x = full[0][0]
    changed = x.clone()
    changed[:, -1] = (changed[:, -1] + 128) % 256
    logp = [training(v)[0].float().log_softmax(-1)[:, :-1] for v in (x, changed)]
    model.eval()
    return {"own_loss": sum(training(x, y)[1].item() for x, y in full) / len(full),
            "eval_loss": sum(model(x, y)[1].item() for x, y in full) / len(full),
            "leak": (logp[0] - logp[1]).abs().max().item()}
