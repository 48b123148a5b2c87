"""``--scale gpu``: the strongest version of an experiment that fits a budget of minutes on one GPU.

The design is the CPU experiment's: the same grid of arms, depths and learning rates (a step-count axis, a warm-up
length, is stretched with the run). What grows, in three fixed ways and one that the budget buys:

- **the model**, by the experiment's :class:`Recipe`: wider (d_model, its heads and a set FFN width, × 2 by
  default; where the width is itself an axis, every width), longer windows or larger batches (tokens per step × 2
  by default), deeper only where depth is not what the experiment compares. Width × depth × tokens is at least
  ``MIN_GROWTH`` (4×) the CPU scale's at every budget: ``scale_up`` in ``plan.json`` says by how much.
- **the steps and the seeds**, by the budget: a fixed ladder of rungs, from 3 seeds up to the CPU grid's, then up
  to ``MIN_CI`` (6: the size at which an interval may be called a CI), then twice the steps, two more seeds, twice
  the steps, ... (an experiment whose runs must keep their length, a model update over the first steps or a
  measurement at initialization, climbs by seeds only). The plan takes the highest rung whose estimated wall time
  fits ``SAFETY`` of the budget (the lowest when none does: later invocations finish it). A larger budget buys a
  higher rung, never a different design.

Runs are packed side by side, one process each (the ``--jobs`` machinery), N of them: as many as the GPU's memory
holds at the estimated memory of one run, at most the host's cores less one and at most ``MAX_PACK``, the largest
packing measured. Small models are bound by the host's kernel launches, not the GPU's arithmetic, so packing pays.

**The throughput is assumed, not measured here**, from these figures (the plan and the write-up say so):
an H100 ran GPT-2 small (12 layers, d 768, 16 × 1024 tokens) eagerly at 45.6 ms a step, host-bound, 22.7% MFU
(experiments/throughput/); on an H200 a d-256 12-layer model trained at 153k tokens/s alone and 8 side by side at
793k tokens/s in all (5.2×, issue 37). The invocation that runs the plan records what it measured (tokens/s per
run and packed) beside the assumption. The plan is written to ``plan.json`` in the results folder; a later
invocation reads it and continues where the last one stopped (its runs are reused), whatever its own budget.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from normtrain.study.stats import MIN_CI
from normtrain.training.flops import flops_per_token

MIN_GROWTH = 4.0  # width × depth × tokens over the CPU scale's, at least
SAFETY = 0.8  # of the budget: the estimate's margin (and the analysis after the runs)
MAX_PACK = 8  # runs side by side: the largest packing measured (8 on an H200, 5.2× one run's throughput)
PACK_SPEEDUP_8 = 793 / 153  # total throughput of 8 packed runs over one alone (issue 37's H200 measurement)
HOST_MS_PER_LAYER = 45.6 / 12  # one block's forward, backward and update, host-bound (H100, eager, GPT-2 small)
ACHIEVED_FLOPS = 0.227 * 989e12  # FLOP/s the GPU sustains in that run (22.7% of the H100's dense bf16 peak)
STARTUP_S = 30.0  # a worker's start (torch import, CUDA context): a guess, checked by `measured`
RUN_OVERHEAD_S = 5.0  # each run's set-up and finish (config, model, corpus, first kernels, summary): a guess too
CONTEXT_GIB = 0.6  # a process's CUDA context
MAX_SEEDS = 20
MIN_SEEDS = 3  # the fewest seeds the median-interval rules judge
STEP_KEYS = ("train.max_steps", "train.eval_every", "optim.warmup_steps", "monitor.every", "train.ckpt_every",
             "monitor.spike_window")  # counted in steps: stretched with the run, so the design's fractions hold
ASSUMPTIONS = (
    f"host-bound step time {HOST_MS_PER_LAYER:.2f} ms per block (H100, torch eager, GPT-2 small: 45.6 ms for 12 "
    "blocks; experiments/throughput/)",
    f"GPU arithmetic at {ACHIEVED_FLOPS / 1e12:.0f} TFLOP/s (22.7% MFU of the same run) where it exceeds the host's",
    f"runs side by side each at 1/(1 + a(N − 1)) of their speed alone, a fitted to 8 packed runs giving "
    f"{PACK_SPEEDUP_8:.2f}× one run's throughput (a d-256 12-layer model on an H200: 153k tokens/s alone, 793k in "
    "all)",
    f"{STARTUP_S:.0f} s to start each worker process and {RUN_OVERHEAD_S:.0f} s to set up and finish each run "
    "(guesses, not measured on a GPU)",
)


@dataclass(frozen=True)
class Recipe:
    """How an experiment's model grows at the GPU scale (factors on the CPU scale's values)."""

    width: float = 2.0  # d_model (its heads and a set d_ff with it, unless the width is an axis)
    batch: float = 2.0  # sequences per step
    seq: float = 1.0  # tokens per sequence (where the batch size is an axis of the experiment)
    depth: float = 1.0  # n_layers (1 where depth is what the experiment compares)
    lengthen: bool = True  # the budget may lengthen the runs (False: runs whose length is the design)
    extra_steps: float = 0.0  # step-equivalents of work per run beside training (a probe, a measurement)
    fixed_steps: float = 0.0  # step-equivalents once per invocation (a timing phase)


@dataclass(frozen=True)
class Device:
    """The GPU the plan is for: its memory and the host's cores, read from this machine (``detected``) or assumed;
    the throughput figures are always the module's assumptions until a run measures them."""

    name: str
    memory_gib: float
    cores: int
    detected: bool
    host_ms_per_layer: float = HOST_MS_PER_LAYER
    achieved_flops: float = ACHIEVED_FLOPS
    startup_s: float = STARTUP_S
    run_overhead_s: float = RUN_OVERHEAD_S
    max_pack: int = MAX_PACK

    @classmethod
    def detect(cls) -> Device | None:
        """This machine's first CUDA device, or None without one."""
        import torch

        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(0)
        return cls(props.name, props.total_memory / 2**30, os.cpu_count() or 1, True)


ASSUMED_H100 = Device("NVIDIA H100 80GB HBM3 (assumed: no GPU on this machine)", 79.2, 16, False)


@dataclass(frozen=True)
class Size:
    """What one run computes, read from its composed config."""

    layers: int
    d: int
    ff: int
    mlp: str
    seq: int
    batch: int
    steps: int
    evals: int
    eval_windows: int
    vocab: int = 256

    @classmethod
    def of(cls, cfg) -> Size:
        from normtrain.config import global_batch
        from normtrain.model.config import GPTConfig

        m, t = cfg.model, cfg.train
        ff = GPTConfig(d_model=m.d_model, mlp=m.mlp, d_ff=m.d_ff).ff_width
        batch = global_batch(t, 1)
        evals = (t.max_steps // t.eval_every if t.eval_every else 0) + 1
        windows = t.eval_windows or batch * t.eval_batches
        return cls(m.n_layers, m.d_model, ff, m.mlp, m.seq_len, batch, t.max_steps, evals, windows,
                   m.vocab_size or 256)

    @property
    def params(self) -> int:
        """Matmul parameters (attention, MLP, LM head): what the FLOPs and the optimizer state scale with."""
        mlp = (3 if self.mlp in ("swiglu", "geglu") else 2) * self.d * self.ff
        return self.layers * (4 * self.d * self.d + mlp) + self.d * self.vocab

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    def memory_gib(self) -> float:
        """Weights, gradients and AdamW's two moments in fp32, activations (34 bytes per token, layer and width in
        16 bits, Korthikanti et al. 2022; doubled for fp32 copies and the monitor's hooks), fp32 logits three
        times, the CUDA context; and a quarter more for the allocator's slack."""
        activations = 68 * self.tokens * self.layers * self.d
        logits = 12 * self.tokens * self.vocab
        return (CONTEXT_GIB + (16 * (self.params + self.d * self.vocab) + activations + logits) / 2**30) * 1.25

    def step_s(self, device: Device, packed: int) -> float:
        """One training step's seconds with ``packed`` runs side by side: the host's launches (slowed by the
        packing) or the GPU's arithmetic shared by every run, whichever is longer."""
        host = device.host_ms_per_layer * self.layers / 1e3 / efficiency(packed)
        gpu = flops_per_token(self.params, self.layers, self.d, self.seq) * self.tokens / device.achieved_flops
        return max(host, packed * gpu)

    def run_s(self, device: Device, packed: int, extra_steps: float = 0.0) -> float:
        """A run's seconds: its set-up, its steps, its evaluations (a forward pass is a third of a step per batch)
        and the experiment's extra work."""
        eval_batches = math.ceil(self.eval_windows / max(self.batch, 1))
        step = self.step_s(device, packed)
        return device.run_overhead_s + step * (self.steps + self.evals * eval_batches / 3 + extra_steps)


def efficiency(packed: int) -> float:
    """Each run's speed side by side over its speed alone: 1/(1 + a(N − 1)), a from 8 runs at 5.2× in all."""
    a = (MAX_PACK / PACK_SPEEDUP_8 - 1) / (MAX_PACK - 1)
    return 1.0 / (1.0 + a * (max(packed, 1) - 1))


def packing(sizes: list[Size], device: Device, runs: int) -> int:
    """Runs side by side: what the memory holds of the largest run, at most the cores less one (the parent's) and
    ``device.max_pack``, at most the number of runs."""
    per_run = max(s.memory_gib() for s in sizes)
    by_memory = int(0.9 * device.memory_gib // per_run)
    return max(1, min(by_memory, device.cores - 1, device.max_pack, runs))


def wall_s(sizes: list[Size], device: Device, packed: int, recipe: Recipe) -> float:
    """The grid's estimated wall time: the runs spread over ``packed`` workers (no run is split), the workers'
    start, and the experiment's work once per invocation (on one process)."""
    runs = sorted((s.run_s(device, packed, recipe.extra_steps) for s in sizes), reverse=True)
    once = recipe.fixed_steps * sizes[0].step_s(device, 1) if sizes else 0.0
    return max(sum(runs) / packed, runs[0] if runs else 0.0) + device.startup_s + once


@dataclass(frozen=True)
class Rung:
    seeds: int
    steps: float  # the factor on the runs' steps


def ladder(seeds: int, lengthen: bool) -> list[Rung]:
    """The rungs a budget climbs, each costlier than the last: from ``MIN_SEEDS`` seeds (a budget too small for the
    CPU grid's seeds runs fewer, never fewer than the checks can judge) up to the CPU grid's, then up to
    ``MIN_CI``, then twice the steps and two more seeds in turn (seeds alone when the runs keep their length)."""
    rungs = [Rung(n, 1.0) for n in range(min(MIN_SEEDS, seeds), seeds + 1)]
    if seeds < MIN_CI:
        rungs.append(Rung(MIN_CI, 1.0))
    while rungs[-1].seeds < MAX_SEEDS:
        last = rungs[-1]
        if lengthen and last.steps < 32:
            rungs.append(Rung(last.seeds, last.steps * 2))
        rungs.append(Rung(min(MAX_SEEDS, rungs[-1].seeds + 2), rungs[-1].steps))
    return rungs
