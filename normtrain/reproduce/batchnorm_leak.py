"""Why causal transformers do not use BatchNorm: its training statistics see the future.

Each trained model scores the same validation windows three ways: in training mode with its own batch's
statistics (which include every later token: what the training loss saw), in training mode with the statistics
of *another* batch of the same size (the control: batch statistics, but none of this batch's future), and in
evaluation mode (running statistics, what a model meets at generation time). Own-batch better than other-batch
is the leak being exploited; a direct causality check changes only the last token of every sequence and
measures how far the log-probabilities at the earlier positions move.
"""

from __future__ import annotations

import contextlib
import copy
from typing import TYPE_CHECKING, Any

from normtrain.compare.runs import Run
from normtrain.reproduce import plots, stats
from normtrain.reproduce.runner import Experiment, Findings, Plan, Scale, curve_points, validation_batches
from normtrain.reproduce.writeup import markdown_table

if TYPE_CHECKING:
    import torch

NORMS = ("batchnorm", "layernorm")
MODES = ("own", "other", "eval")
MODE_TITLES = {"own": "training mode, own batch's statistics", "other": "training mode, another batch's statistics",
               "eval": "evaluation mode (running statistics)"}


class BatchNormLeak(Experiment):
    name = "batchnorm_leak"
    title = "Why transformers do not use BatchNorm: the leak through batch statistics"
    paper = "why not BatchNorm (PowerNorm, Shen et al. 2020, §3)"
    reference = ("**Shen et al. 2020**, *PowerNorm: Rethinking Batch Normalization in Transformers*, §3; "
                 "the causal-LM leak is the classic answer to 'why not BatchNorm?'")
    method = ("Pre-LN, 6 layers, d 64, 4 heads, GELU FFN 256, AdamW lr 1e-3 (50-step warm-up, cosine), 1000 steps, "
              "with `norm=batchnorm` (over batch × positions, running statistics for evaluation) or the LayerNorm "
              "control, at batch sizes 1, 2, 8 and 16 sequences of 128 bytes, 3 seeds. Each final model scores "
              "the same 512 validation windows in batches of its own batch size, three ways (see the metric).")
    gpu = Scale(overrides=("model.d_model=256", "model.d_ff=1024", "train.max_steps=4000", "train.eval_every=500"),
                grid={"train.batch_size": "1,2,8,32,128"})
    keep_checkpoints = True

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), **score_three_ways(run)}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        sizes = sorted({int(r["train.batch_size"]) for r in rows})
        small, large = sizes[0], sizes[-1]
        unigram = next((r["unigram_val_loss"] for r in rows if r.get("unigram_val_loss") is not None), None)

        def seeds(n, b, value):
            return stats.per_seed(rows, value, lambda r: r["norm"] == n and int(r["train.batch_size"]) == b)

        def other_minus_own(r):
            return r["other_loss"] - r["own_loss"]

        def eval_minus_own_abs(r):
            return abs(r["eval_loss"] - r["own_loss"])

        def eval_gap(b):  # per seed: BatchNorm's eval-mode loss minus LayerNorm's
            bn, ln = seeds("batchnorm", b, "eval_loss"), seeds("layernorm", b, "eval_loss")
            return {s: v - ln[s] for s, v in bn.items() if ln.get(s) is not None}

        small_gap, large_gap = eval_gap(small), eval_gap(large)
        measured = {
            "bn_leak": {f"batch {b}": seeds("batchnorm", b, "leak") for b in sizes},
            "ln_leak": {f"batch {b}": seeds("layernorm", b, "leak") for b in sizes},
            "bn_other_minus_own_smallest": {f"batch {small}": seeds("batchnorm", small, other_minus_own)},
            "bn_abs_eval_minus_own": {f"batch {b}": seeds("batchnorm", b, eval_minus_own_abs) for b in sizes},
            "bn_gap_small_minus_large": {"": {s: v - large_gap[s] for s, v in small_gap.items()
                                              if large_gap.get(s) is not None}},
            "ln_max_mode_difference": {f"batch {b}": seeds("layernorm", b, lambda r: max(
                r[f"{m}_loss"] for m in MODES) - min(r[f"{m}_loss"] for m in MODES)) for b in sizes},
        }
        table = markdown_table(
            ["norm", "batch", *[f"val loss: {MODE_TITLES[m]}" for m in MODES], "other − own (the leak's gain)",
             "leak (max |Δ log p|)"],
            [[n, b, *[stats.spread(seeds(n, b, f"{m}_loss").values()) for m in MODES],
              stats.spread(seeds(n, b, other_minus_own).values()), stats.spread(seeds(n, b, "leak").values())]
             for n in NORMS for b in sizes])
        table = ("Validation loss (nats per byte) on the same 512 windows, mean ± std over seeds (n); leak: the "
                 "largest change of a log-probability at positions 0…126 when only position 127 changes (0 = "
                 "causal):\n\n"
                 + table)
        gain = stats.spread(measured["bn_other_minus_own_smallest"][f"batch {small}"].values())
        ours = f"the leak's gain at batch {small} (other − own batch statistics): {gain} nats"
        key = (f"BatchNorm: {ours}; eval − own-batch training mode "
               + ", ".join(f"{stats.spread(seeds('batchnorm', b, lambda r: r['eval_loss'] - r['own_loss']).values())}"
                           f" (batch {b})" for b in sizes) + ".")

        def draw(path):
            fig, axes = plots.figure(ncols=3, width=4.2, height=3.5)
            for n in NORMS:
                for m, marker in zip(MODES, ("o", "s", "^"), strict=True):
                    per_seed = list(zip(*[list(seeds(n, b, f"{m}_loss").values()) for b in sizes], strict=True))
                    plots.seeds_and_mean(axes[0], sizes, per_seed, plots.NORM_COLORS[n], f"{n}, {m}",
                                         style=plots.NORM_STYLES[n], marker=marker)
                mine = [r for r in rows if r["norm"] == n and int(r["train.batch_size"]) == small]
                plots.curves(axes[2], [curve_points(r["val_curve"]) for r in mine if r["val_curve"]],
                             plots.NORM_COLORS[n], f"{n}, batch {small}")
            gains = list(zip(*[list(seeds("batchnorm", b, other_minus_own).values()) for b in sizes], strict=True))
            plots.seeds_and_mean(axes[1], sizes, gains, plots.NORM_COLORS["batchnorm"], "batchnorm")
            axes[1].axhline(0, color="k", lw=0.8)
            for ax in axes[:2]:
                plots.log_axis(ax, sizes)
            plots.log_axis(axes[2], (2, 3, 5, 10, 20, 40), axis="y")  # step 0 of BatchNorm sits near 35 nats
            for ax in (axes[0], axes[2]):
                plots.unigram_line(ax, unigram)
            plots.finish(axes[0], "three ways to score (thin: seeds)", "batch size (sequences)", "val loss (nats/byte)")
            plots.finish(axes[1], "the leak's gain: other − own batch", "batch size (sequences)", "nats")
            plots.finish(axes[2], "val loss in training (evaluation mode)", "step", "val loss (nats/byte)")
            plots.save(fig, path)

        return Findings(table=table, measured=measured, key=key, ours=ours, figures={"batchnorm_leak.png": draw})


@contextlib.contextmanager
def borrowed_statistics(model: torch.nn.Module, source: torch.Tensor):
    """Inside, every BatchNorm layer normalizes with the batch statistics it saw on ``source`` (training mode,
    layer by layer) instead of its own batch's: batch statistics without the batch's own future tokens."""
    import torch
    import torch.nn.functional as F

    layers = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm1d)]
    captured: dict = {}  # layer -> (mean, var) over the source batch

    def capture(module, args):
        x = args[0]
        captured[module] = (x.mean(0), x.var(0, unbiased=False))

    handles = [m.register_forward_pre_hook(capture) for m in layers]
    model(source)
    for h in handles:
        h.remove()
    originals = {m: m.forward for m in layers}
    for m in layers:
        mean, var = captured[m]
        m.forward = lambda x, m=m, mean=mean, var=var: F.batch_norm(x, mean, var, m.weight, m.bias, False, 0.0, m.eps)
    try:
        yield
    finally:
        for m, forward in originals.items():
            m.forward = forward


def score_three_ways(run: Run) -> dict[str, float]:
    """Val loss with own-batch statistics, with another batch's, in evaluation mode; and the causality leak."""
    import torch

    with torch.no_grad():
        return _score_three_ways(run)


def _score_three_ways(run: Run) -> dict[str, float]:
    from omegaconf import OmegaConf

    import normtrain
    from normtrain.checkpoint import load_checkpoint

    cfg = OmegaConf.create(run.summary["config"])
    model = normtrain.build_model(cfg)
    model.load_state_dict(load_checkpoint(run.path / "ckpt.pt")["model"])
    batches = validation_batches(cfg)
    full = [b for b in batches if len(b[0]) == cfg.train.batch_size]  # a short last batch has its own statistics
    training = copy.deepcopy(model).train()  # a copy: training mode would update the running statistics

    def mean_loss(use) -> float:
        return sum(use(i, x, y) for i, (x, y) in enumerate(full)) / len(full)

    def other(i, x, y):
        with borrowed_statistics(training, full[(i + 1) % len(full)][0]):
            return training(x, y)[1].item()

    x = full[0][0]
    changed = x.clone()
    changed[:, -1] = (changed[:, -1] + 128) % 256
    logp = [training(v)[0].float().log_softmax(-1)[:, :-1] for v in (x, changed)]
    model.eval()
    return {"own_loss": mean_loss(lambda i, x, y: training(x, y)[1].item()),
            "other_loss": mean_loss(other),
            "eval_loss": mean_loss(lambda i, x, y: model(x, y)[1].item()),
            "leak": (logp[0] - logp[1]).abs().max().item()}
