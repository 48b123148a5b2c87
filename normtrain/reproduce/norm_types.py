"""Zhang & Sennrich 2019: RMSNorm (and pRMSNorm) against LayerNorm: quality over seeds, and the training step's time.

The speed claim is about training, so the timing is the whole training step (forward, backward, clipping, AdamW
update) of the model the quality runs train, once per norm with that norm's best implementation on this device,
in interleaved *repeats* (a repeat times every norm once, round robin, so drift in the machine's speed hits them
alike). Repeats are repeats of one measurement on one machine, not seeds. A per-call time of the norm alone (every
norm in the same composite torch ops, and each norm's best) is reported beside it, not judged.
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from normtrain.reproduce.gpu_scale import Recipe
from normtrain.reproduce.runner import Experiment, Findings, present
from normtrain.reproduce.writeup import markdown_table
from normtrain.study import best_lr, plots, robustness, stats
from normtrain.study.best_against_best import SELECT, select_or_inf
from normtrain.study.plan import Plan
from normtrain.util.provenance import code_state_at_start

NORM_ORDER = ("layernorm", "rmsnorm", "prmsnorm")
# Registration v7: each primary norm at v6's best lr and one step of the factor 2.5 either side (the YAML's lr axis;
# a norm not named here, e.g. pRMSNorm added by an override, runs the whole axis).
ARM_LRS = {"layernorm": (2e-3, 5e-3, 1.25e-2), "rmsnorm": (2e-3, 5e-3, 1.25e-2)}
EXTENSION_LRS: dict[str, tuple[float, ...]] = {}  # points the registered edge rule adds (CHECK_HISTORY.md)
PRIMARY_QUANTITY = "rms_minus_ln_at_best"
NOT_ON_CPU = "CPU scale (infeasible: torch fuses LayerNorm there, not RMSNorm)"  # the speed check's condition


@dataclass(frozen=True)
class Timing:
    """How much timing: whole-step repeats × (untimed, timed) steps per norm, and per-call repeats × calls."""

    repeats: int = 7
    warmup_steps: int = 5
    timed_steps: int = 20
    call_repeats: int = 7
    calls: int = 30

    def total(self, norms: int) -> int:
        """Measurements, for the progress display: one per norm and repeat, of a step and of each call form."""
        return norms * (self.repeats + 2 * self.call_repeats)


FULL = Timing()
SMOKE = Timing(repeats=2, warmup_steps=1, timed_steps=2, call_repeats=2, calls=3)  # checks the pipeline only
STAMP = ("device", "setup", "measured_at", "code_commit", "code_dirty")  # each row: where, what model, when, code


def best_impl(norm: str, cuda: bool) -> tuple[str, list[str]]:
    """Each norm's fastest implementation here, named, and the overrides that select it in the model. On a CPU
    torch's ``layer_norm`` is one fused kernel; RMSNorm's torch path is ``torch.nn.functional.rms_norm`` (since
    issue 36), which torch 2.13 does not fuse on a CPU (about as slow as the composite formula, 4× fused
    LayerNorm's time a call here, measured in ``call_times``); pRMSNorm's is normtrain's composite formula (torch
    has no partial RMS). On CUDA both use normtrain's fused Triton kernel."""
    if norm == "layernorm":
        return "torch.nn.functional.layer_norm (fused)", ["norm=layernorm"]
    if cuda:
        return "normtrain's fused Triton kernel", [f"norm={norm}", "norm.impl=triton"]
    if norm == "rmsnorm":
        return "torch.nn.functional.rms_norm (not fused on a CPU)", [f"norm={norm}", "norm.impl=torch"]
    return "normtrain's torch path (composite ops)", [f"norm={norm}", "norm.impl=torch"]


def step_times(base: list[str], device: str, timing: Timing = FULL, bar=None) -> list[dict[str, Any]]:
    """Milliseconds per training step of each norm's model, ``timing.repeats`` interleaved repeats (one thread on
    CPU); ``bar`` (a progress display) advances by one per measurement."""
    import torch

    from normtrain.config import compose

    steppers = {n: TrainingStep(compose([*base, *best_impl(n, device == "cuda")[1], f"train.device={device}"]))
                for n in NORM_ORDER}
    out = []
    for repeat in range(timing.repeats):
        for n, stepper in steppers.items():
            out.append({"norm": n, "timing": "training step", "implementation": best_impl(n, device == "cuda")[0],
                        "repeat": str(repeat), "time_ms": stepper.time(torch, timing)})
            if bar is not None:
                bar.update(1)
    return out


def saved_timings(path: Path, device: str, setup: str) -> list[dict[str, Any]]:
    """The timings an earlier invocation measured on this kind of device, to reuse: a re-analysis (a rerun that
    reuses the runs) must not re-time, or editing a write-up could change a verdict. Files without the stamp
    (when, at which code, of which model: ``setup``) or of another model are measured again; ``--fresh`` always
    measures."""
    try:
        with path.open(newline="") as f:
            saved = list(csv.DictReader(f))
    except OSError:
        return []
    if not saved or any(not t.get(k) for t in saved for k in STAMP) or saved[0]["device"] != device \
            or saved[0]["setup"] != setup:
        return []
    return [{**t, "time_ms": float(t["time_ms"])} for t in saved]


def setup_of(cfg) -> str:
    """The timed model and batch, stamped on each timing: timings of another model (an earlier design) are not
    reused."""
    m = cfg.model
    return f"{m.n_layers} layers, d {m.d_model}, batch {cfg.train.batch_size} × {m.seq_len}"


def timing_note(timings: list[dict[str, Any]]) -> list[str]:
    """When and at which code the timings were measured (they may come from an earlier invocation)."""
    if not timings or not timings[0].get("measured_at"):
        return []
    t = timings[0]
    dirty = ", a dirty tree" if str(t["code_dirty"]) == "True" else ""
    return [f"Timings measured at {t['measured_at']} on {t['device']}, code `{str(t['code_commit'])[:10]}`{dirty} "
            "(timings.csv); a rerun reuses them, `--fresh` times again."]


class TrainingStep:
    """A model, its optimizer and one fixed batch: the step the training loop runs, without its diagnostics."""

    def __init__(self, cfg):
        import torch

        import normtrain
        from normtrain.data import BatchSampler, load_corpus
        from normtrain.training.optim import build_optimizer

        torch.manual_seed(cfg.train.seed)
        device = torch.device("cuda" if cfg.train.device == "cuda" else "cpu")
        self.model = normtrain.build_model(cfg).to(device)
        o = cfg.optim
        self.opt = build_optimizer(self.model, o.lr, o.betas, o.eps, o.weight_decay)
        d = cfg.data
        corpus = load_corpus(d.name, d.path, d.val_fraction, d.cache_dir, progress=False)
        self.x, self.y = BatchSampler(corpus.train, cfg.train.batch_size, cfg.model.seq_len, 0,
                                      device=device).next_batch()
        self.clip, self.cuda = o.grad_clip, device.type == "cuda"

    def step(self, torch) -> None:
        _, loss = self.model(self.x, self.y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def time(self, torch, timing: Timing = FULL) -> float:
        """The median of ``timing.timed_steps`` steps after ``timing.warmup_steps`` untimed ones, in ms."""
        samples = []
        for i in range(timing.warmup_steps + timing.timed_steps):
            if self.cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            self.step(torch)
            if self.cuda:
                torch.cuda.synchronize()
            if i >= timing.warmup_steps:
                samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)


def call_times(tokens: int, d: int, device: str, timing: Timing = FULL, bar=None) -> list[dict[str, Any]]:
    """Forward + backward of one norm call (ms), every norm in the same composite ops and in its best form."""
    import torch
    import torch.nn.functional as F

    from normtrain.ops import rms_norm

    k = max(1, math.ceil(0.0625 * d))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, d, generator=gen).to(device).requires_grad_()
    w, b = torch.ones(d, device=device, requires_grad=True), torch.zeros(d, device=device, requires_grad=True)
    grad = torch.randn(tokens, d, generator=gen).to(device)
    ln = lambda x, w, b: (x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True)  # noqa: E731
                                                                       + 1e-5) * w + b
    fns: dict[tuple[str, str], Callable] = {
        ("layernorm", "composite"): ln,
        ("rmsnorm", "composite"): lambda x, w, b: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w,
        ("prmsnorm", "composite"): lambda x, w, b: x * torch.rsqrt(x[:, :k].pow(2).mean(-1, keepdim=True) + 1e-5) * w,
        ("layernorm", "best"): lambda x, w, b: F.layer_norm(x, (d,), w, b, 1e-5),
        ("rmsnorm", "best"): lambda x, w, b: rms_norm(x, w, 1e-5),
        ("prmsnorm", "best"): lambda x, w, b: rms_norm(x, w, 1e-5, n_stat=k)}
    out = []
    for repeat in range(timing.call_repeats):
        for (n, form), fn in fns.items():
            out.append({"norm": n, "timing": f"one call, {form}", "implementation": form, "repeat": str(repeat),
                        "time_ms": _median_call(fn, x, w, b, grad, device == "cuda", timing.calls)})
            if bar is not None:
                bar.update(1)
    return out


def _median_call(fn, x, w, b, grad, cuda: bool, calls: int) -> float:
    import torch

    samples = []
    for i in range(calls + 3):
        x.grad = w.grad = b.grad = None
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(x, w, b).backward(grad)
        if cuda:
            torch.cuda.synchronize()
        if i >= 3:  # warm-up calls left out
            samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


class NormTypes(Experiment):
    name = "norm_types"
    title = "LayerNorm vs RMSNorm vs pRMSNorm under Pre-LN (Zhang & Sennrich 2019)"
    paper = "Zhang & Sennrich 2019"
    reference = "**Zhang & Sennrich 2019**, *Root Mean Square Layer Normalization*, Tables 1–5"
    method = ("Quality: Pre-LN, a 4-layer model (d 64, 4 heads, SwiGLU, RoPE), AdamW (0.9, 0.95), weight decay 0.1, "
              "clipping 1, a 5% warm-up then WSD (the peak to step 3200, then linearly to 10%), 4000 steps of 16 × "
              "128 bytes, evaluated every 5% on 512 fixed windows, and again at T/2 (2000 steps, a decay branch "
              "from step 1600); both norms at peak learning rates 2e-3, 5e-3 and 1.25e-2, seeds 20–24; diagnostics "
              "off. Each norm is judged at its own best lr, at each budget: " + best_lr.HELD_OUT_RULE + ". Speed, "
              f"reported (judged on a GPU only): the whole training step of that model, each norm in its best "
              f"implementation here (named in the table), {FULL.repeats} interleaved repeats, each the median of "
              f"{FULL.timed_steps} steps after {FULL.warmup_steps} untimed ones, one thread on a CPU; and one norm "
              f"call on the model's activation shape, {FULL.call_repeats} repeats of the median of {FULL.calls} "
              "calls.")
    gpu_recipe = Recipe(fixed_steps=600)  # the timing: 7 repeats × 3 norms × 25 steps, and the per-call timing
    half_budget = True  # protocol v5: every run at T and at T/2 (a WSD decay branch)

    def keeps(self, combo: dict[str, str]) -> bool:
        norm = combo.get("norm", "")
        lrs = ARM_LRS[norm] + EXTENSION_LRS.get(norm, ()) if norm in ARM_LRS else None
        lr = combo.get(best_lr.LR_AXIS)
        return lrs is None or lr is None or any(math.isclose(float(lr), x) for x in lrs)

    def measure(self, plan: Plan) -> list[dict[str, Any]]:
        """Train the grid; then time (kept in ``self.timings`` for the analysis, and in timings.csv)."""
        import torch

        rows = super().measure(plan)
        cfg = plan.compose(plan.combos()[0])
        device = "cuda" if torch.cuda.is_available() and cfg.train.device != "cpu" else "cpu"
        saved = saved_timings(plan.out / "timings.csv", device, setup_of(cfg))
        self.timings = [] if plan.fresh or plan.smoke else saved
        if self.timings:
            return rows
        self.timings = self.time_norms(plan, cfg, device)
        stamp = {"device": device, "setup": setup_of(cfg),
                 "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 **code_state_at_start()}
        self.timings = [{**t, **{k: stamp[k] for k in STAMP}} for t in self.timings]
        return rows

    @staticmethod
    def time_norms(plan: Plan, cfg, device: str) -> list[dict[str, Any]]:
        """Every timing, with a progress display (a smoke run times a few steps: it checks the pipeline only)."""
        import torch

        from normtrain.util.progress import make_progress

        timing = SMOKE if plan.smoke else FULL
        plan.phase(f"timing the training step and one norm call of each norm ({timing.repeats} + "
                   f"{timing.call_repeats} repeats)")
        bar = make_progress(timing.total(len(NORM_ORDER)), 0, f"{plan.name}: timing", plan.progress, every_s=30.0,
                            unit="measurement")
        threads = torch.get_num_threads()
        if device == "cpu":
            torch.set_num_threads(1)  # as the training runs: one thread each (a busy machine stalls more threads)
        try:
            base = [o for o in plan.overrides(plan.combos()[0]) if not o.startswith(("norm=", "train.seed="))]
            return (step_times(base, device, timing, bar)
                    + call_times(cfg.train.batch_size * cfg.model.seq_len, cfg.model.d_model, device, timing, bar))
        finally:
            torch.set_num_threads(threads)
            bar.close()

    def row(self, run, combo: dict[str, str]) -> dict[str, Any]:
        return {**super().row(run, combo), best_lr.SELECTION: best_lr.selection_of(run),
                SELECT: run.summary.get("final_select_loss")}

    def analyse(self, rows: list[dict[str, Any]], plan: Plan) -> Findings:
        timings = getattr(self, "timings", [])
        rows, half = robustness.budgets(rows)
        norms = present(rows, "norm", NORM_ORDER)
        unigram = stats.unigram_of(rows)
        best = best_lr.best_lrs(rows, "norm", norms, select_or_inf)
        minus_ln = {n: best_lr.paired_at_best(rows, "norm", best, n, "layernorm") for n in norms}
        ln_loss = best_lr.at_best(rows, "norm", best["layernorm"], stats.final_or_inf) if "layernorm" in best else {}
        measured = {PRIMARY_QUANTITY: rms_minus_ln(rows, best),
                    "prms_minus_ln_at_best": {"": minus_ln.get("prmsnorm", {})},
                    "reference_margin": {"LayerNorm": stats.margin_below(unigram, ln_loss)},
                    "best_lr_inside_grid": best_lr.inside_grid({n: b for n, b in best.items() if n in PRIMARY}),
                    **robustness.primary_again(PRIMARY_QUANTITY, rms_minus_ln, rows, half, "norm", norms,
                                               [n for n in PRIMARY if n in norms])}
        measured["rms_over_ln_step_time"] = (  # on a CPU torch fuses LayerNorm alone: kernels compared, not norms
            {"": time_ratio(timings, "rmsnorm", "training step")} if plan.scale != "cpu" else {NOT_ON_CPU: {}})
        half_best = best_lr.best_lrs(half, "norm", norms, select_or_inf) if half else {}
        table = "\n\n".join([
            f"The whole loss-vs-lr curve: final validation loss per norm and peak lr, median [range] over seeds (n); "
            f"**bold**: the norm's best lr by the selection rule:\n\n{best_lr.curve_table(rows, 'norm', best)}",
            f"The selection loss (the held-out windows' loss at the run's end), median [range] over seeds:\n\n"
            f"{best_lr.curve_table(rows, 'norm', best, select_or_inf)}",
            f"Each norm at its best lr ({stats.CELL_NOTE}):\n\n{at_best_table(rows, best, minus_ln)}",
            *([f"At T/2 ({half[0]['steps']} steps), each norm at its own best lr there:\n\n"
               + at_best_table(half, half_best, {n: best_lr.paired_at_best(half, "norm", half_best, n, "layernorm")
                                                 for n in norms})] if half else []),
            f"Speed on this device, mean ± sd over the interleaved repeats (n = repeats of one measurement, not "
            f"seeds):\n\n{speed_table(timings, norms)}"])
        step = stats.spread(time_ratio(timings, "rmsnorm", "training step").values())
        rms, prms = (stats.median_and_interval(minus_ln.get(n, {}).values()) for n in ("rmsnorm", "prmsnorm"))
        ours = (f"RMSNorm − LayerNorm, each at its best lr: {rms} nats (seeds); training-step time ratio "
                f"RMSNorm/LayerNorm {step} (repeats)")
        key = f"{ours}; pRMSNorm − LayerNorm {prms} nats." if "prmsnorm" in minus_ln else f"{ours}."
        notes = [f"Best lr rule (declared before the runs): {best_lr.HELD_OUT_RULE}.",
                 *best_lr.rule_notes(rows, "norm", best), *timing_note(timings)]
        return Findings(table=table, measured=measured, key=key, ours=ours, notes=notes,
                        figures={"norm_types.png": lambda path: self.draw(rows, best, timings, unigram, path)},
                        csv={"timings.csv": timings}, repeats=frozenset({"rms_over_ln_step_time"}))

    @staticmethod
    def draw(rows, best, timings, unigram, path) -> None:
        """Left: validation curves at each norm's best lr; middle: final loss against lr; right: step times."""
        fig, axes = plots.figure(ncols=3, width=4.2, height=3.6)
        norms = list(best)
        best_lr.draw_val_at_best(axes[0], rows, "norm", best, plots.NORM_COLORS, unigram,
                                 "val loss at each norm's best lr (thin: seeds)")
        best_lr.draw_curves(axes[1], rows, "norm", best, plots.NORM_COLORS, unigram=unigram)
        draw_times(axes[2], timings, norms)
        plots.save(fig, path)


PRIMARY = ("layernorm", "rmsnorm")  # the primary check's arms: the preconditions read these


def rms_minus_ln(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr]) -> dict[str, dict[str, float | None]]:
    """The primary: per seed, RMSNorm at its best lr − LayerNorm at its best."""
    return {"": best_lr.paired_at_best(rows, "norm", best, "rmsnorm", "layernorm") if "rmsnorm" in best else {}}


def at_best_table(rows: list[dict[str, Any]], best: dict[str, best_lr.BestLr],
                  minus_ln: dict[str, dict[str, float | None]]) -> str:
    body = []
    for n, b in best.items():
        mine = best_lr.runs_at_best(rows, "norm", b)
        loss = best_lr.at_best(rows, "norm", b, stats.final_or_inf)
        drop = best_lr.at_best(rows, "norm", b, "val_quarter_drop")
        body.append([n, best_lr.lr_text(b),
                     stats.cell(loss.values(), mine), stats.median_and_interval(minus_ln.get(n, {}).values()),
                     stats.median_and_interval(drop.values())])
    return markdown_table(["norm", "best lr", "final val loss", "Δ vs LayerNorm, paired by seed (median)",
                           "val loss fall over the last quarter (median)"], body)


def draw_times(ax, timings: list[dict[str, Any]], norms: list[str]) -> None:
    """One group per timing form, one colour per norm (the legend): a tick per group keeps the labels legible."""
    forms = list(dict.fromkeys(t["timing"] for t in timings))
    width = len(norms) + 1
    for n in norms:
        for i, form in enumerate(forms):
            vals = list(time_ratio(timings, n, form).values())
            x = i * width + norms.index(n)
            ax.scatter([x] * len(vals), vals, color=plots.NORM_COLORS[n], s=12, alpha=0.6,
                       label=n if i == 0 else None)
            if vals:
                ax.hlines(statistics.median(vals), x - 0.3, x + 0.3, color=plots.NORM_COLORS[n], lw=2.5)
    ax.set_xticks([i * width + (len(norms) - 1) / 2 for i in range(len(forms))],
                  [form.replace(", ", ",\n") for form in forms], fontsize=7)
    ax.axhline(1, color="k", lw=0.8)
    plots.finish(ax, "time / LayerNorm's (bar: median of repeats)", "", "ratio")


def time_ratio(timings: list[dict[str, Any]], norm: str, form: str) -> dict[str, float]:
    """``{repeat: time(norm) / time(LayerNorm)}`` for one timing form, repeat by repeat."""
    def times(n):
        return {t["repeat"]: t["time_ms"] for t in timings if t["norm"] == n and t["timing"] == form}
    ln = times("layernorm")
    return {rep: v / ln[rep] for rep, v in times(norm).items() if ln.get(rep)}


def speed_table(timings: list[dict[str, Any]], norms: list[str]) -> str:
    forms = list(dict.fromkeys(t["timing"] for t in timings))
    impl = {(t["norm"], t["timing"]): t["implementation"] for t in timings}
    rows = []
    for form in forms:
        for n in norms:
            ms = [t["time_ms"] for t in timings if t["norm"] == n and t["timing"] == form]
            if ms:
                rows.append([form, n, impl[(n, form)], stats.spread(ms), stats.spread(time_ratio(timings, n,
                                                                                               form).values())])
    return markdown_table(["timing", "norm", "implementation", "ms", "time / LayerNorm's"], rows)
