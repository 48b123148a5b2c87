"""Zhang & Sennrich 2019: RMSNorm (and pRMSNorm) against LayerNorm, quality over seeds and speed like with like."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from normtrain.reproduce import plots, stats
from normtrain.reproduce.runner import Experiment, Findings, Plan, Scale, curve_points, present, train_grid
from normtrain.reproduce.writeup import markdown_table

NORM_ORDER = ("layernorm", "rmsnorm", "prmsnorm")
REPEATS, CALLS = 7, 30  # timing: interleaved repeats, each the median of this many forward + backward calls


def composite(norm: str, d: int, eps: float) -> Callable:
    """Every norm in the same plain torch ops (what the paper's cost argument is about)."""
    import torch

    k = max(1, math.ceil(0.0625 * d))
    if norm == "layernorm":
        return lambda x, w, b: ((x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True)
                                                                              + eps) * w + b)
    stat = (lambda x: x) if norm == "rmsnorm" else (lambda x: x[..., :k])
    return lambda x, w, b: x * torch.rsqrt(stat(x).pow(2).mean(-1, keepdim=True) + eps) * w


def best(norm: str, d: int, eps: float) -> tuple[str, Callable]:
    """Each norm's fastest implementation here: torch's fused ops, and normtrain's kernel where the model uses it."""
    import torch
    import torch.nn.functional as F

    from normtrain.ops import rms_norm

    k = max(1, math.ceil(0.0625 * d))
    if norm == "layernorm":
        return "torch.nn.functional.layer_norm", lambda x, w, b: F.layer_norm(x, (d,), w, b, eps)
    cuda = torch.cuda.is_available()
    if norm == "rmsnorm" and not cuda:
        return "torch.nn.functional.rms_norm", lambda x, w, b: F.rms_norm(x, (d,), w, eps)
    name = "normtrain.ops.rms_norm (" + ("Triton kernel" if cuda else "torch path") + ")"
    return name, lambda x, w, b: rms_norm(x, w, eps, n_stat=None if norm == "rmsnorm" else k)


def time_norms(tokens: int, d: int, device: str = "cpu") -> list[dict[str, Any]]:
    """Forward + backward time (ms) of one call per norm and form, ``REPEATS`` interleaved repeats."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, d, generator=gen).to(device).requires_grad_()
    w, b = torch.ones(d, device=device, requires_grad=True), torch.zeros(d, device=device, requires_grad=True)
    grad = torch.randn(tokens, d, generator=gen).to(device)
    fns = {(n, "composite"): ("composite torch ops", composite(n, d, 1e-5)) for n in NORM_ORDER}
    fns.update({(n, "best"): best(n, d, 1e-5) for n in NORM_ORDER})
    times: dict[tuple, list[float]] = {key: [] for key in fns}
    for _ in range(REPEATS):
        for key, (_, fn) in fns.items():  # round robin: drift in the machine's speed hits every form alike
            times[key].append(_median_call(fn, x, w, b, grad, device))
    return [{"norm": n, "form": form, "implementation": fns[(n, form)][0], "times_ms": times[(n, form)]}
            for (n, form) in fns]


def _median_call(fn, x, w, b, grad, device) -> float:
    import torch

    samples = []
    for i in range(CALLS + 3):
        x.grad = w.grad = b.grad = None
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(x, w, b).backward(grad)
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 3:  # warm-up calls left out
            samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


class NormTypes(Experiment):
    name = "norm_types"
    title = "LayerNorm vs RMSNorm vs pRMSNorm under Pre-LN (Zhang & Sennrich 2019)"
    paper = "Zhang & Sennrich 2019"
    reference = "**Zhang & Sennrich 2019**, *Root Mean Square Layer Normalization*, Tables 1–5"
    method = ("Quality: Pre-LN, the default model (6 layers, d 128, 4 heads, SwiGLU, RoPE), AdamW lr 1e-3 with a "
              "20-step warm-up and cosine decay, 200 steps of 16 × 128 bytes, 5 seeds; diagnostics off. Speed: "
              f"forward + backward of one norm call on 2048 × 128 fp32 activations, {REPEATS} interleaved repeats "
              f"of the median of {CALLS} calls, in two forms: the same composite torch ops for every norm, and "
              "each norm's best implementation on this device (named in the table).")
    gpu = Scale(overrides=("model=gpt2_small", "train.max_steps=2000", "train.batch_size=16", "train.eval_every=250"))

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        """Train the grid; then time the norms (kept in ``self.timings`` for the analysis, and in timings.csv)."""
        import torch

        rows = [{**combo, **self.row(run, combo)} for combo, run in train_grid(plan)]
        cfg = plan.compose(plan.combos()[0])
        device = "cuda" if torch.cuda.is_available() and cfg.train.device != "cpu" else "cpu"
        self.timings = [{"norm": t["norm"], "timing": t["form"], "implementation": t["implementation"],
                         "repeat": str(i), "time_ms": ms}
                        for t in time_norms(cfg.train.batch_size * cfg.model.seq_len, cfg.model.d_model, device)
                        for i, ms in enumerate(t["times_ms"])]
        return rows

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        runs, timings = rows, getattr(self, "timings", [])
        norms = present(runs, "norm", NORM_ORDER)
        unigram = next((r["unigram_val_loss"] for r in runs if r.get("unigram_val_loss") is not None), None)

        def loss(n):
            return stats.per_seed(runs, "final_val_loss", lambda r: r["norm"] == n)

        def minus_ln(n):
            ln = loss("layernorm")
            return {s: v - ln[s] if v is not None and ln.get(s) is not None else None for s, v in loss(n).items()}

        def timing(n, form):
            return stats.per_seed(timings, "time_ms", lambda r: r["timing"] == form and r["norm"] == n, key="repeat")

        def over_ln(n, form):
            ln = timing("layernorm", form)
            return {s: v / ln[s] for s, v in timing(n, form).items() if ln.get(s)}

        impl = {(r["norm"], r["timing"]): r["implementation"] for r in timings}
        measured = {"rms_minus_ln": {"": minus_ln("rmsnorm")}, "prms_minus_ln": {"": minus_ln("prmsnorm")},
                    "rms_over_ln_composite_time": {"": over_ln("rmsnorm", "composite")}}
        quality = markdown_table(["norm", "final val loss", "Δ vs LayerNorm (per seed)", "collapsed"],
                                 [[n, stats.spread(loss(n).values()), stats.spread(minus_ln(n).values()),
                                   f"{sum(bool(r.get('collapsed')) for r in runs if r['norm'] == n)}/"
                                   f"{len(loss(n))}"] for n in norms])
        speed = markdown_table(["norm", "form", "implementation", "fwd+bwd ms per call", "time / LayerNorm's"],
                               [[n, form, impl.get((n, form), "–"), stats.spread(timing(n, form).values()),
                                 stats.spread(over_ln(n, form).values())]
                                for form in ("composite", "best") for n in norms if timing(n, form)])
        table = (f"Quality, mean ± std over seeds (n):\n\n{quality}\n\nSpeed on this device, mean ± std over the "
                 f"{REPEATS} interleaved repeats (n):\n\n{speed}")
        rms_best = stats.spread(over_ln("rmsnorm", "best").values())
        ours = (f"RMSNorm − LayerNorm {stats.spread(minus_ln('rmsnorm').values())} nats; time ratio "
                f"{stats.spread(over_ln('rmsnorm', 'composite').values())} (same composite ops), {rms_best} "
                "(each norm's best implementation)")
        key = f"{ours}; pRMSNorm − LayerNorm {stats.spread(minus_ln('prmsnorm').values())} nats."
        bests = ", ".join(f"{n}: {impl[(n, 'best')]}" for n in norms if (n, "best") in impl)
        notes = [f"Best implementations here: {bests}."]
        if "torch.nn.functional.rms_norm" in bests:
            notes.append("On a CPU, torch's `layer_norm` is one fused kernel while its `rms_norm` is not, so the "
                         "best-vs-best ratio measures the libraries, not the algorithms; the composite form compares "
                         "like with like.")

        def draw(path):
            fig, axes = plots.figure(ncols=2, width=4.6, height=3.6)
            for n in norms:
                mine = [r for r in runs if r["norm"] == n]
                plots.curves(axes[0], [curve_points(r["val_curve"]) for r in mine if r["val_curve"]],
                             plots.NORM_COLORS[n], n)
                for i, form in enumerate(("composite", "best")):
                    vals = list(over_ln(n, form).values())
                    x = i * (len(norms) + 1) + norms.index(n)
                    axes[1].scatter([x] * len(vals), vals, color=plots.NORM_COLORS[n], s=12, alpha=0.6)
                    if vals:
                        axes[1].hlines(statistics.median(vals), x - 0.3, x + 0.3, color=plots.NORM_COLORS[n], lw=2.5)
            plots.unigram_line(axes[0], unigram)
            axes[0].set_ylim(top=(unigram or 4) + 0.4)
            plots.finish(axes[0], "Pre-LN val loss (thin: seeds)", "step", "val loss (nats/byte)")
            axes[1].set_xticks([i * (len(norms) + 1) + j for i in range(2) for j in range(len(norms))],
                               [f"{n}\n{form}" for form in ("composite", "best") for n in norms], fontsize=6)
            axes[1].axhline(1, color="k", lw=0.8)
            plots.finish(axes[1], "norm time / LayerNorm's (bar: median)", "", "ratio", legend=False)
            plots.save(fig, path)

        return Findings(table=table, measured=measured, key=key, ours=ours, notes=notes,
                        figures={"norm_types.png": draw}, csv={"timings.csv": timings})
