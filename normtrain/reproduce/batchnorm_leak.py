"""Why causal transformers do not use BatchNorm: its training statistics see the future.

Pre-LN models train with BatchNorm (statistics over batch × all positions: leaky) or LayerNorm, at several batch
sizes, each at 4 learning rates (compared at each arm's best: normtrain/study/best_lr.py). Each trained
BatchNorm model measures its own leak against a matched control (registration v5, :func:`matched_swap_gain`): in
training mode, the loss at a position t with the futures of its own half of the batch swapped for other real text
against the loss with the other half's swapped: the statistics are disturbed alike, and only whether t's own future
is in the batch differs; the untrained model gives the control's null. v4's plain swap (every future at once,
:func:`future_swap_gain`) is kept as a reported number: its null is not zero. Each model also scores the
validation windows in evaluation mode (running statistics: what generation sees), and a direct causality check
changes only the last token of every sequence and measures how far the log-probabilities at the earlier positions
move. v3's causal twin (``batchnorm_causal``) is still read when present.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from normtrain.compare.runs import Run
from normtrain.reproduce.carry import status_of
from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.kept import kept_measurement
from normtrain.reproduce.runner import Experiment, Findings, present, validation_batches
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, branches, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.plan import Plan
from normtrain.training.outcome import line_labels

NORMS = ("batchnorm", "batchnorm_causal", "layernorm")
MODES = {"own": "training mode, own batch's statistics", "eval": "evaluation mode (running statistics)"}
COLORS = {"batchnorm": plots.NORM_COLORS["batchnorm"], "batchnorm_causal": "#e6a23c", "layernorm": "#1f77b4"}
CUTS = (0.25, 0.5, 0.75)  # the scored positions t = ⌊T·f⌋ − 1: 31, 63, 95 for T = 128
LRS = (1e-3, 4e-3, 1.6e-2, 6.4e-2)  # the registered lr grid at every batch size (v5), factor 4
CPU_EXTENSION: dict[str, tuple[float, ...]] = {}  # batch size -> lrs the registered edge rule added (CHECK_HISTORY)
PRIMARY_QUANTITY = "matched_leak_gain_at_best"
NULL_CHECK_BATCHES = 4  # LayerNorm's matched gain (0 by construction) is checked on this many batches
SCORES = "scores.json"  # a trained model's scores, in its run folder (score_two_ways)


def in_grid(combo: dict[str, str], extension: dict[str, tuple[float, ...]] | None = None) -> bool:
    """The registered lrs at every batch size, and the ``extension``'s at its batch sizes."""
    if "optim.lr" not in combo:
        return True
    lrs = (*LRS, *(extension or {}).get(str(combo.get("train.batch_size")), ()))
    return any(math.isclose(float(combo["optim.lr"]), lr) for lr in lrs)


def arm_of(row: dict[str, Any]) -> str:
    """An arm of the best-lr rule: a norm at one batch size (each has its own best lr)."""
    return f"{row['norm']}, batch {row['train.batch_size']}"


class BatchNormLeak(Experiment):
    name = "batchnorm_leak"
    title = "Why transformers do not use BatchNorm: the leak through batch statistics"
    paper = "why not BatchNorm (PowerNorm, Shen et al. 2020, §3)"
    reference = ("**Shen et al. 2020**, *PowerNorm: Rethinking Batch Normalization in Transformers*, §3; "
                 "the causal-LM leak is the classic answer to 'why not BatchNorm?'")
    method = ("Pre-LN, 6 layers, d 64, 4 heads, GELU FFN 256, AdamW (50-step warm-up, WSD: the peak to step 800, "
              "then linearly to 10%) at peak lrs 1e-3, 4e-3, 1.6e-2 and 6.4e-2, 1000 steps, and again at T/2 (500 "
              "steps, a decay branch from step 400), with `norm=batchnorm` (statistics over batch × positions) or "
              "LayerNorm, at batch sizes 1, 2 and 8 sequences of 128 bytes, seeds 10–14; each norm × batch size is "
              "read at its own best lr: " + best_lr.HELD_OUT_RULE + ". Each final model scores the same 512 "
              "validation windows in batches of its own batch size: in training mode (own batch's statistics), "
              "with the futures of positions 31, 63 and 95 of one half of the batch swapped for the next batch's, "
              "then of the other half (the matched gain; the untrained model of the same seed gives its control), "
              "with every future swapped (v4's plain gain), and in evaluation mode (running statistics).")
    # the batch size is the design: longer windows instead of more sequences; each model scored two ways after it
    gpu_recipe = Recipe(batch=1, seq=2, extra_steps=200)
    keep_checkpoints = True
    checkpoint_stand_in = SCORES  # all the analysis reads of a model: a scored run travels in a pack without it
    stand_in_of_pairs = True  # each pair scored as soon as it is trained, at T and at T/2
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch), each scored

    def keeps(self, combo: dict[str, str]) -> bool:
        return in_grid(combo)

    def keeps_at(self, scale: str) -> Callable[[dict[str, str]], bool]:
        """The CPU scale runs the registered grid and its extension (``CPU_EXTENSION``); --scale gpu the
        registered grid (its own edges are its own to extend)."""
        return (lambda combo: in_grid(combo, CPU_EXTENSION)) if scale == "cpu" else self.keeps

    def row(self, run: Run, combo: dict[str, str]) -> dict[str, Any]:
        """A diverged run kept no finite weights to score: its scores are missing (its seed drops out of the
        comparisons that need them) and the cell counts it as diverged. A scored run's line labels (collapsed,
        above the line) read its training-mode loss, the one the leak is about; whether it was still falling reads
        its evaluation-mode validation curve, the only one logged."""
        base = {**super().row(run, combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}
        if run.status == "diverged":
            return {**base, "own_loss": None, "eval_loss": None, "leak": None, "swap_gain": None,
                    "matched_gain": None, "matched_gain_init": None}
        row = {**base, **score_two_ways(run)}
        if row["unigram_val_loss"] is not None:  # labelled on the loss it is judged by: training mode, own batch
            row.update(line_labels(row["own_loss"], row["unigram_val_loss"], row["val_quarter_drop"]))
        return row

    def make_stand_ins(self, runs: Plan, combos: list[dict[str, str]]) -> None:
        """Score the finished runs of these grid points, at T and at T/2, ``runs.jobs`` at a time (a run already
        scored is re-read): the next machine has no checkpoint to score."""
        from dataclasses import replace

        from normtrain.study.grid import map_grid

        for plan in (runs, replace(runs, runs_dir=branches.half_runs_dir(runs.runs_dir))):
            todo = [c for c in combos if (status_of(plan.run_dir(c)) or {}).get("status") == "completed"]
            map_grid(plan, score_folder, todo, "scorings of trained models", "model")

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        for r in rows:
            r["arm"] = arm_of(r)
        rows, half = robustness.budgets(rows)
        sizes = sorted({int(r["train.batch_size"]) for r in rows})
        norms = present(rows, "norm", NORMS)
        arms = [f"{n}, batch {b}" for n in norms for b in sizes]
        best = best_lr.best_lrs(rows, "arm", arms, select_or_inf)
        unigram = stats.unigram_of(rows)

        def at(n, b, value):  # {seed: value} of norm n at batch b, at that arm's best lr
            return best_lr.at_best(rows, "arm", best[f"{n}, batch {b}"], value)

        measured = measure(at, sizes, best, unigram)
        paired = [s for s in sizes if s >= 2]
        measured.update(robustness.primary_again(
            PRIMARY_QUANTITY, lambda rs, bs: {f"batch {b}": best_lr.at_best(rs, "arm", bs[f"batchnorm, batch {b}"],
                                                                            "matched_gain") for b in paired},
            rows, half, "arm", arms, [f"batchnorm, batch {b}" for b in paired]))
        gain, plain = measured[PRIMARY_QUANTITY], measured["plain_swap_gain_at_best"]
        ours = ("the leak's matched gain in BatchNorm's training-mode loss (own half's futures swapped − the other "
                "half's, at its best lr): " + ", ".join(f"{stats.spread(gain[f'batch {b}'].values())} (batch {b})"
                                                       for b in paired))
        gap = {b: stats.paired(at("batchnorm", b, "eval_loss"), at("layernorm", b, "eval_loss"), stats.difference)
               for b in sizes}
        key = (f"{ours}; v4's plain swap gain (reported): "
               + ", ".join(f"{stats.spread(plain[f'batch {b}'].values())} (batch {b})" for b in sizes)
               + "; BatchNorm − LayerNorm in evaluation mode, each at its best lr: "
               + ", ".join(f"{stats.spread(gap[b].values())} (batch {b})" for b in sizes) + ".")
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *best_lr.rule_notes(rows, "arm", best),
                 *(["At batch 1 the matched control cannot be formed (no other sequence shares the statistics): "
                    "the leak there is v4's plain swap alone, with its non-zero null."] if 1 in sizes else [])]
        table = self.table(rows, norms, sizes, best, at) + cut_table(rows, sizes, at)
        return Findings(table=table, measured=measured, key=key, ours=ours,
                        notes=notes, figures={"batchnorm_leak.png": lambda path: self.draw(rows, norms, sizes, best,
                                                                                           at, unigram, path)})

    @staticmethod
    def table(rows, norms, sizes, best, at) -> str:
        body = [[n, b, best[f"{n}, batch {b}"].lr, *[stats.spread(at(n, b, f"{m}_loss").values()) for m in MODES],
                 stats.spread(at(n, b, mode_gap).values()), stats.spread(at(n, b, "matched_gain").values()),
                 stats.spread(at(n, b, "matched_gain_init").values()), stats.spread(at(n, b, "swap_gain").values()),
                 stats.spread(at(n, b, "leak").values())] for n in norms for b in sizes]
        curves = {m: best_lr.curve_table(rows, "arm", best, lambda r, m=m: r.get(f"{m}_loss")) for m in MODES}
        gains = best_lr.curve_table(rows, "arm", {a: b for a, b in best.items() if a.startswith("batchnorm,")},
                                    lambda r: r.get("matched_gain"))
        return ("At each arm's best lr (norm × batch size; the rule in the notes), mean ± sd over seeds (n). Matched "
                "gain: the training-mode loss at positions 31, 63, 95 with the futures of the scored sequence's own "
                "half of the batch swapped for other text minus with the other half's swapped (> 0: the model reads "
                "its own future; none at batch 1), of the trained model and of the untrained one (the control); "
                "plain gain (v4's): swapped − intact, every sequence's future at once (its null is not 0); leak: the "
                "largest change of a log-probability at positions 0…126 when only position 127 changes (0 = "
                "causal):\n\n"
                + markdown_table(["norm", "batch", "best lr", *[f"val loss: {t}" for t in MODES.values()],
                                  "eval − own", "matched gain", "matched gain, untrained", "plain gain",
                                  "leak (max |Δ log p|)"], body)
                + "\n\nThe loss-vs-lr curves: median [min, max] (n) over seeds, **bold** the arm's best lr by the "
                f"rule. Training mode, own batch's statistics (BatchNorm is judged and labelled by it):\n\n"
                f"{curves['own']}\n\nEvaluation mode (running statistics):\n\n{curves['eval']}\n\nThe leak's "
                f"matched gain at every lr:\n\n{gains}\n\nEvery run: {stats.CELL_NOTE}:\n\n"
                + markdown_table(["norm", "batch", "lr", "val loss: training mode"],
                                 [[n, b, lr, stats.cell(stats.per_seed(mine, "own_loss").values(), mine)]
                                  for n in norms for b in sizes
                                  for lr in sorted({r["optim.lr"] for r in rows}, key=float)
                                  if (mine := stats.select(rows, norm=n, train__batch_size=b, optim__lr=lr))]))

    @staticmethod
    def draw(rows, norms, sizes, best, at, unigram, path) -> None:
        fig, axes = plots.figure(ncols=3, width=4.2, height=3.5)
        for n in norms:
            for m, marker in zip(MODES, ("o", "^"), strict=True):
                per_seed = list(zip(*[list(at(n, b, f"{m}_loss").values()) for b in sizes], strict=True))
                plots.seeds_and_mean(axes[0], sizes, per_seed, COLORS[n], f"{n}, {m}", marker=marker,
                                     style="-" if m == "own" else "--")
        for value, style, label in (("matched_gain", "-", "matched (own half − other half)"),
                                    ("swap_gain", "--", "plain (swapped − intact, v4)")):
            shown = [b for b in sizes if any(v is not None for v in at("batchnorm", b, value).values())]
            per_seed = list(zip(*[list(at("batchnorm", b, value).values()) for b in shown], strict=True))
            if shown:
                plots.seeds_and_mean(axes[1], shown, per_seed, COLORS["batchnorm"], label, style=style)
        axes[1].axhline(0, color="k", lw=0.8)
        for ax in axes[:2]:
            plots.log_axis(ax, sizes)
        best_lr.draw_curves(axes[2], rows, "arm", {a: b for a, b in best.items() if a.endswith(f"batch {sizes[0]}")},
                            {f"{n}, batch {sizes[0]}": COLORS[n] for n in norms},
                            value=lambda r: r.get("own_loss"), unigram=unigram)
        plots.unigram_line(axes[0], unigram)
        plots.finish(axes[0], "at each arm's best lr (thin: seeds)", "batch size (sequences)", "val loss (nats/byte)")
        plots.finish(axes[1], "BatchNorm's leak gain at its best lr", "batch size (sequences)", "nats")
        axes[2].set_title(f"training-mode loss against lr, batch {sizes[0]}")
        plots.save(fig, path)


def cut_table(rows, sizes, at) -> str:
    """The leak's gain per cut point t, BatchNorm at each batch size's best lr (reported)."""
    prefix = "swap_gain_t"
    cuts = sorted({k for r in rows for k in r if k.startswith(prefix)}, key=lambda k: int(k[len(prefix):]))
    if not cuts or "batchnorm" not in {r["norm"] for r in rows}:
        return ""
    body = [[b, *[stats.spread(at("batchnorm", b, k).values()) for k in cuts]] for b in sizes]
    return ("\n\nThe leak's gain per scored position t (swapped − intact future), BatchNorm at its best lr, mean ± sd "
            "over seeds (n):\n\n" + markdown_table(["batch", *[f"t = {k[len(prefix):]}" for k in cuts]], body))


def measure(at, sizes, best, unigram) -> dict[str, dict[str, dict[str, float | None]]]:
    """Every quantity the registrations name, per condition and seed, each arm at its best lr."""
    small, large = sizes[0], sizes[-1]
    paired = [b for b in sizes if b >= 2]  # the matched control needs two halves of a batch
    gain = {f"batch {b}": at("batchnorm", b, "matched_gain") for b in paired}
    bn_vs_ln = {b: stats.paired(at("batchnorm", b, "eval_loss"), at("layernorm", b, "eval_loss"), stats.difference)
                for b in sizes}
    return {
        PRIMARY_QUANTITY: gain,
        "matched_gain_at_init": {f"batch {b}": at("batchnorm", b, "matched_gain_init") for b in paired},
        "plain_swap_gain_at_best": {f"batch {b}": at("batchnorm", b, "swap_gain") for b in sizes},
        "bn_gap_small_minus_large": {"": stats.paired(bn_vs_ln[small], bn_vs_ln[large], stats.difference)},
        "matched_gain_small_minus_large": {"": stats.paired(gain[f"batch {paired[0]}"], gain[f"batch {paired[-1]}"],
                                                            stats.difference) if len(paired) > 1 else {}},
        "bn_leak_at_best": {f"batch {b}": at("batchnorm", b, "leak") for b in sizes},
        "ln_swap_gain_abs": {f"batch {b}": {s: stats.absolute(v) for s, v in at("layernorm", b, "matched_gain").items()}
                             for b in paired},
        "best_lr_inside_grid": best_lr.inside_grid(best),
        "reference_margin": {f"layernorm, batch {b}": stats.margin_below(unigram, at("layernorm", b, "eval_loss"))
                             for b in sizes},
    }


def mode_gap(row: dict[str, Any]) -> float | None:
    """Evaluation mode's loss minus training mode's (own batch), None for a run without scores."""
    if row.get("eval_loss") is None or row.get("own_loss") is None:
        return None
    return row["eval_loss"] - row["own_loss"]


def score_two_ways(run: Run) -> dict[str, float]:
    """Val loss with own-batch statistics and in evaluation mode, the causality leak and the leak's gain.

    Scoring v5's 240 models took about 19 min on 2 cores, so the scores are kept in the run's folder
    (``scores.json``): a rerun re-reads them while the checkpoint and the scoring code are the ones that made them,
    and they stand in for the checkpoint of a run restored from a pack (normtrain/reproduce/kept.py)."""
    import inspect

    import torch

    def scored() -> dict[str, float]:
        with torch.no_grad():
            return _score_two_ways(run)

    code = "\n".join([repr(CUTS), *(inspect.getsource(f) for f in SCORING_CODE)])
    return kept_measurement(run.path, SCORES, code, scored)


def score_folder(_overrides: list[str], run_dir: str) -> None:
    """A worker of ``make_stand_ins``: the scores of the run in ``run_dir``, into its folder."""
    from pathlib import Path

    from normtrain.compare.runs import load_run

    if isinstance(run := load_run(Path(run_dir)), Run):
        score_two_ways(run)


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
    leaky, at_t = cfg.norm.name == "batchnorm", not branches.is_half_run(run.path)
    scores = {"own_loss": sum(training(x, y)[1].item() for x, y in full) / len(full),
              "eval_loss": sum(model(x, y)[1].item() for x, y in full) / len(full),
              "leak": (logp[0] - logp[1]).abs().max().item(), "swap_gain": None,
              # a causal model's matched gain is 0 by construction: a few batches check the code that computes it
              "matched_gain": matched_swap_gain(training, full if leaky else full[:NULL_CHECK_BATCHES]),
              "matched_gain_init": init_gain(cfg, full, run.path.parent) if leaky and at_t else None}
    if leaky and at_t:  # v4's plain swap, reported at T only (the primary alone is read at T/2)
        scores.update(future_swap_gain(training, full))
    return scores


def cut_positions(seq_len: int) -> list[int]:
    """The scored positions t = ⌊T·f⌋ − 1 for f in ``CUTS`` (31, 63, 95 at T = 128), each with a future to swap."""
    return sorted({min(max(int(seq_len * f) - 1, 0), seq_len - 2) for f in CUTS})


def future_swap_gain(model, batches: list[tuple[Any, Any]]) -> dict[str, float | None]:
    """The leak's gain of a model in training mode (batch statistics): at each cut t, every sequence of a batch
    gets the tokens after t from the next batch's sequences (cyclically; real text, so the statistics stay those of
    real text), and the loss at t on its true target with that swapped future minus with its own; the mean over
    cuts and batches (``swap_gain``, > 0: the model reads its own future through the statistics) and per cut
    (``swap_gain_t{t}``). 0 for a causal model up to fp32 rounding (nothing after t reaches position t). Needs two
    batches."""
    import torch.nn.functional as F

    if len(batches) < 2:
        return {"swap_gain": None}
    cuts = cut_positions(batches[0][0].shape[1])
    per_cut: dict[int, list[float]] = {t: [] for t in cuts}
    for i, (x, y) in enumerate(batches):
        other = batches[(i + 1) % len(batches)][0]
        intact = model(x)[0].float()
        for t in cuts:
            swapped = x.clone()
            swapped[:, t + 1:] = other[:, t + 1:]
            lost = F.cross_entropy(model(swapped)[0][:, t].float(), y[:, t], reduction="none")
            per_cut[t].append((lost - F.cross_entropy(intact[:, t], y[:, t], reduction="none")).mean().item())
    gains = {f"swap_gain_t{t}": sum(v) / len(v) for t, v in per_cut.items()}
    return {"swap_gain": sum(gains.values()) / len(gains), **gains}


def matched_swap_gain(model, batches: list[tuple[Any, Any]]) -> float | None:
    """The leak's gain against a matched control (protocol v5, issue 59): each batch is split into halves; at each
    cut t the futures (the tokens after t) of one half are swapped for the next batch's same sequences', then the
    other half's. A sequence's gain is its loss at t with its own half swapped minus with the other half swapped:
    the same number of real-text futures replaced, the batch statistics disturbed alike, and only whether its own
    continuation is still in the batch differs. The mean over sequences, cuts and batches; 0 for a causal model;
    None at batch 1 (no other half to swap: the leak cannot be told from the disturbance there)."""
    import torch
    import torch.nn.functional as F

    size = batches[0][0].shape[0] if batches else 0
    if size < 2 or len(batches) < 2:
        return None
    half = size // 2
    parts, gains = (slice(0, half), slice(half, 2 * half)), []  # an odd batch's last sequence is never swapped
    for i, (x, y) in enumerate(batches):
        other = batches[(i + 1) % len(batches)][0]
        for t in cut_positions(x.shape[1]):
            lost = []
            for part in parts:
                swapped = x.clone()
                swapped[part, t + 1:] = other[part, t + 1:]
                lost.append(F.cross_entropy(model(swapped)[0][:, t].float(), y[:, t], reduction="none"))
            own = torch.cat([lost[0][:half], lost[1][half:2 * half]])
            others = torch.cat([lost[1][:half], lost[0][half:2 * half]])
            gains.append((own - others).mean().item())
    return sum(gains) / len(gains)


INIT_GAINS = ".init_gains"  # the untrained models' matched gains, in the runs folder: one file per seed and shape


def init_gain(cfg, batches: list[tuple[Any, Any]], runs_dir) -> float | None:
    """The negative control: the matched gain of the untrained model (the run's seed, the run's architecture), which
    has learned nothing to read; a measure biased by the disturbance alone shows its bias here. It depends on the
    seed, the shape and the windows, not the lr: kept in ``runs_dir / INIT_GAINS``, where the scoring of each lr, in
    any worker, finds it."""
    import inspect
    import json

    import torch

    import normtrain
    from normtrain.reproduce.kept import digest
    from normtrain.util.atomic import write_json

    key = json.dumps([cfg.train.seed, cfg.train.batch_size, cfg.train.eval_windows, str(cfg.model), str(cfg.norm),
                      str(cfg.data), *(inspect.getsource(f) for f in (matched_swap_gain, cut_positions))])
    path = runs_dir / INIT_GAINS / f"{digest(key)}.json"
    try:
        return json.loads(path.read_text())["gain"]
    except (OSError, ValueError, KeyError):
        pass
    torch.manual_seed(int(cfg.train.seed))
    with torch.no_grad():
        gain = matched_swap_gain(normtrain.build_model(cfg).train(), batches)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"gain": gain})
    return gain


SCORING_CODE = (_score_two_ways, future_swap_gain, matched_swap_gain, init_gain, cut_positions,
                validation_batches)  # the code the kept scores are keyed by
