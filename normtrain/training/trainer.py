"""The training loop: set up and resume, loop (step, log, evaluate, checkpoint), finish.

Row ``step = k`` of ``metrics.jsonl`` describes the model after k optimizer updates: its training
loss and gradients on the k-th batch and, on evaluation steps, its validation loss. A checkpoint
saved after k updates resumes at k with the same batches, so a resumed run repeats the rows of
an uninterrupted one exactly (on CPU), after any number of kill -9 and resume cycles.

Each guarantee of the run record lives in one place:
  one writer per run folder ......... ``RunFolder.open`` (normtrain/training/run_folder.py), before anything is written
  no stale summary .................. ``Trainer.start`` writes ``status: running``
  resume only what matches .......... ``Trainer.resume`` (the rules: normtrain/training/resume.py)
  divergence is a durable fact ...... ``Trainer.check_divergence``: the device-side flag is read where the host
                                      syncs anyway (log steps, before each checkpoint, at the end)
  no non-finite resume point ........ ``Trainer.checkpoint``; a recorded divergence is never re-trained
                                      (``Trainer.recorded_divergence``)
  rollback instead of stopping ...... ``Trainer.record_divergence`` asks the policy (normtrain/training/rollback.py),
                                      ``Trainer.roll_back`` restores, skips the data and records it
  checkpoints atomic, either format . ``Checkpointer`` (normtrain/checkpoint/): commit last, async saves waited
                                      for (``Trainer.finish``, the next save, a rollback)
  one global batch on any world size  ``BatchSampler`` draws it, ``Trainer.accumulate`` makes up the micro-batches
  a model's weight rule holds ....... ``Trainer.keep_weight_constraints`` after every update, resume and rollback
                                      (nGPT's unit-norm matrices: ``GPT.after_optimizer_step``)
  final writes survive signals ...... ``Trainer.run``: ``finish`` runs shielded from signals
  user errors of the file system .... ``train`` (exit 2 through RunFolderError)
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from normtrain.checkpoint import Checkpoint, Checkpointer, find_checkpoint, unwrap
from normtrain.config import (
    checkpoint_format,
    global_batch,
    model_config,
    to_container,
    validate,
    vocab_size,
    with_defaults,
)
from normtrain.data import BatchSampler, eval_starts, eval_window_count, load_corpus, window_batches
from normtrain.data.batches import global_state
from normtrain.data.unigram import unigram_loss
from normtrain.loggers import CsvLogger, JsonlLogger, Loggers, TensorBoardLogger, WandbLogger
from normtrain.loggers.names import SweepJob, group_name, run_name, sweep_job
from normtrain.model import GPT
from normtrain.model.ngpt_rules import ngpt_warnings
from normtrain.ops.guard import Choice, guard_norms
from normtrain.training.debug import FaultInjector, restart_count
from normtrain.training.distributed import DistContext, grad_sync, init_distributed, wrap_model
from normtrain.training.flops import mfu, model_flops_per_token, peak_flops
from normtrain.training.monitor import SWITCHES, Monitor
from normtrain.training.optim import MuonSettings, build_optimizer, lr_at, set_lr
from normtrain.training.outcome import labels, tail_trend
from normtrain.training.preemption import StopRequested
from normtrain.training.qk_clip import QKClip
from normtrain.training.resume import config_changes
from normtrain.training.rollback import RollBack, RollbackPolicy
from normtrain.training.run_folder import USER_ERRNOS, RunFolder, write_error
from normtrain.training.zloss import log_partition, z_loss
from normtrain.util.progress import interactive, make_progress
from normtrain.util.provenance import code_state_at_start, execution_state
from normtrain.util.runlog import log, say

LN2 = math.log(2)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_label(cfg: DictConfig) -> str:
    """Short name of a run: ``<placement>-<norm>-L<n_layers>``."""
    return f"{cfg.placement.name}-{cfg.norm.name}-L{cfg.model.n_layers}"


def hydra_run_dir() -> Path | None:
    """This job's output folder if Hydra is running us."""
    try:
        from hydra.core.hydra_config import HydraConfig
    except ImportError:
        return None
    return Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else None


def build_loggers(cfg: DictConfig, run_dir: Path, job: SweepJob | None, start_step: int) -> Loggers:
    """metrics.jsonl, and each backend ``logger`` picked (``logger=[wandb,tensorboard]`` picks two)."""
    sinks: list = [JsonlLogger(run_dir / "metrics.jsonl", start_step=start_step)]
    lg = cfg.logger
    picked = [name for name, on in lg.backends.items() if on]
    if "tensorboard" in picked:
        sinks.append(TensorBoardLogger(run_dir, start_step=start_step))
    if "csv" in picked:
        sinks.append(CsvLogger(run_dir / "metrics.csv", start_step=start_step))
    if "wandb" in picked and lg.mode != "disabled":
        label = run_label(cfg)
        sinks.append(WandbLogger(
            run_dir=run_dir, project=lg.project, entity=lg.entity, group=lg.group or (job and group_name(job)),
            name=lg.run_name or (run_name(label, job) if job else label),
            tags=[cfg.norm.name, cfg.placement.name, f"L{cfg.model.n_layers}", *lg.tags],
            job_type=f"{cfg.placement.name}-{cfg.norm.name}", mode=lg.mode, config=to_container(cfg)))
    return Loggers(sinks)


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches, autocast, ctx: DistContext) -> float:
    """Mean validation loss (nats per token) over the fixed windows of every rank, each window weighted alike."""
    model.eval()
    total = torch.zeros(2, device=batches[0][0].device)  # (sum of window losses, windows)
    for x, y in batches:
        with autocast():
            total[0] += model(x, y)[1].float() * len(x)
        total[1] += len(x)
    model.train()
    total = ctx.all_reduce(total, "sum")
    return (total[0] / total[1]).item()


def train(cfg: DictConfig, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Train one run and return its summary (also written to ``<run_dir>/summary.json``)."""
    validate(cfg)
    ctx = init_distributed(cfg.train.device)
    together = False  # every rank ends at the same point: not after an error, nor a stop "at once" mid-step
    try:
        summary = Trainer(cfg, ctx, run_dir).run()  # nothing here keeps the Trainer: ctx.close can free it
        together = summary["status"] in ("completed", "diverged")
        return summary
    except OSError as err:
        if err.errno in USER_ERRNOS:  # a read-only folder, a full disk: the user's to fix, not a bug
            raise write_error(err, err.filename or run_dir or "the run folder's files") from err
        raise
    finally:
        ctx.close(together=together)


class Throughput:
    """Tokens per second between log steps, evaluation time left out; ``tick`` takes the number of updates done
    (row ``step = k`` follows update k + 1), so the first row already has a rate."""

    def __init__(self, tokens_per_step: int, step: int):
        self.tokens_per_step = tokens_per_step
        self.last_time, self.last_step, self.excluded = time.perf_counter(), step, 0.0

    def exclude(self, seconds: float) -> None:
        self.excluded += seconds

    def tick(self, step: int) -> float | None:
        now = time.perf_counter()
        elapsed = max(now - self.last_time - self.excluded, 1e-9)
        rate = (step - self.last_step) * self.tokens_per_step / elapsed if step > self.last_step else None
        self.last_time, self.last_step, self.excluded = now, step, 0.0
        return rate


class Trainer:
    """One run: ``run`` opens the folder, builds, resumes, loops and finishes (see the module docstring)."""

    def __init__(self, cfg: DictConfig, ctx: DistContext, run_dir: str | Path | None):
        self.cfg, self.ctx, self.started = cfg, ctx, time.time()
        hydra_dir = hydra_run_dir()
        default_dir = Path("outputs") / time.strftime("%Y-%m-%d") / f"{time.strftime('%H-%M-%S')}_{run_label(cfg)}"
        self.run_dir = Path(ctx.broadcast(str(run_dir or hydra_dir or default_dir)))  # every rank: rank 0's folder
        self.folder = RunFolder(self.run_dir)
        self.stop = StopRequested()
        self.steps_done, self.in_step, self.val_losses, self.resumes = 0, False, [], []
        self.train_losses: list[tuple[int, float]] = []  # (step, train/loss) at log steps: the run's trend
        self.val_steps: list[int] = []  # the step of each val loss: the curve the run's labels read
        self.checkpointer: Checkpointer | None = None

    # --- set-up and resume
    def run(self) -> dict[str, Any]:
        try:
            if self.ctx.is_main:
                self.folder.open()
            self.build()
            recorded = self.recorded_divergence()
            if recorded is not None:
                return recorded
            self.resume()
            self.init_from_data()
            self.start()
            with self.stop:
                try:
                    self.loop()
                except KeyboardInterrupt:  # a second signal, or Ctrl-C outside our handler
                    self.summary["status"] = "interrupted"
                except BaseException as err:
                    self.summary["status"], self.summary["error"] = "failed", f"{type(err).__name__}: {err}"
                    raise
                finally:
                    with self.stop.shielded():
                        self.finish()
            self.stop.hand_over()
            return self.summary
        finally:
            if self.checkpointer is not None:
                self.checkpointer.close(failed=getattr(self, "summary", {}).get("status") == "failed")
            self.folder.close()

    def build(self) -> None:
        """Corpus, model, optimizer, batches and monitor, seeded; the summary's fixed fields."""
        cfg, ctx, t = self.cfg, self.ctx, self.cfg.train
        for line in ngpt_warnings(cfg) if ctx.is_main else ():
            say(f"normtrain: warning: {line}")
        seed_everything(t.seed)
        self.corpus = None
        for turn in ("main", "others"):  # rank 0 tokenizes and caches first; the others then read the cache
            if ctx.is_main == (turn == "main"):
                self.corpus = load_corpus(cfg.data.name, cfg.data.path, cfg.data.val_fraction, cfg.data.cache_dir,
                                          progress=t.progress and ctx.is_main and interactive())
            ctx.barrier()
        self.vocab_size = vocab_size(cfg, self.corpus.vocab_size)  # the corpus's, unless model.vocab_size pads it
        plain = GPT(model_config(cfg, vocab=self.vocab_size)).to(ctx.device)
        self.norm_impl = self.guard_norms(plain)
        self.model = wrap_model(plain, ctx, t.strategy)
        self.raw = unwrap(self.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        o = cfg.optim
        self.optimizer = build_optimizer(self.raw, o.lr, o.betas, o.eps, o.weight_decay, o.independent_wd, o.name,
                                         o.momentum, MuonSettings.of(o) if o.name == "muon" else None)
        self.qk_clip = (QKClip.of(self.raw, o.qk_clip, o.qk_clip_alpha, ctx.all_reduce if ctx.enabled else None)
                        if o.qk_clip > 0 else None)
        self.compiled = torch.compile(self.model) if t.compile else self.model
        self.global_batch = global_batch(t, ctx.world_size)
        self.accumulation = self.global_batch // (t.batch_size * ctx.world_size)
        self.sampler = BatchSampler(self.corpus.train, t.batch_size, cfg.model.seq_len, t.seed, device=ctx.device,
                                    rank=ctx.rank, world_size=ctx.world_size, accumulation=self.accumulation)
        self.build_evaluation()
        self.build_monitor()
        self.ckpt_format = checkpoint_format(t, ctx.world_size)
        self.checkpointer = Checkpointer(self.run_dir, ctx, self.ckpt_format, t.async_ckpt)
        self.policy = RollbackPolicy.from_config(t)
        self.faults = FaultInjector(cfg.debug, ctx.rank)
        self.flops_per_token = model_flops_per_token(plain)
        self.summary: dict[str, Any] = {
            "status": "running", "steps": 0, "diverged_at_step": None, "final_val_loss": None,
            "last_finite_val_loss": None, "best_val_loss": None, "final_val_bpb": None,
            "n_params": plain.num_params(), "alpha": plain.alpha, "beta": plain.beta, "wall_time_s": None,
            "vocab_size": self.vocab_size, "device": str(ctx.device), "world_size": ctx.world_size,
            "global_batch_size": self.global_batch, "grad_accumulation": self.accumulation,
            "ckpt_format": self.ckpt_format, "resumed_from_step": None, "resumes": [], "rollbacks": [],
            "restarts": restart_count(), "run_dir": str(self.run_dir), "name": run_label(cfg),
            "norm_impl": self.norm_impl.as_dict(), "corpus": self.corpus.describe(),
            "eval_windows": self.n_eval_windows, "unigram_val_loss": self.unigram_val_loss, "collapsed": False,
            "undertrained": False, "loss_trend": None,
            "code": code_state_at_start(), "execution": execution_state(ctx.device),
            "started_at": datetime.fromtimestamp(self.started, timezone.utc).isoformat(timespec="seconds"),
            "config": to_container(cfg),
        }

    def guard_norms(self, model: GPT) -> Choice:
        """norm.impl=auto runs Triton only once it matched torch here (normtrain/ops/guard.py); the choice and its
        reason go to the log, as a warning when the check failed, and to summary.json's ``norm_impl``."""
        t, device = self.cfg.train, self.ctx.device
        dtypes = (torch.float32, torch.bfloat16) if device.type == "cuda" and t.autocast else (torch.float32,)
        choice = guard_norms(model, self.cfg.norm.impl, device, t.batch_size * self.cfg.model.seq_len, dtypes)
        if choice.fallback and self.ctx.is_main:
            say(f"normtrain: warning: {choice.why}")
        else:
            log.info(f"RMSNorm implementation: {choice.impl} ({choice.why})")
        return choice

    def build_monitor(self) -> None:
        mon = self.cfg.monitor
        self.monitor = Monitor(self.raw.blocks, self.params, mon.every, mon.divergence_factor,
                               probe=self.probe if mon.output_change or mon.stream_change else None,
                               all_reduce=self.ctx.all_reduce if self.ctx.enabled else None,
                               spike_window=mon.spike_window if mon.spike_score else None,
                               output_softcap=self.cfg.model.logit_softcap, **{k: mon[k] for k in SWITCHES})

    def build_evaluation(self) -> None:
        """The fixed validation windows (each rank evaluates every world_size-th one), the monitor's probe batch,
        and the unigram baseline scored on exactly those windows. Their number follows the global batch, not
        the world size, so a run resumed on another number of processes keeps its validation set."""
        t, ctx, seq_len = self.cfg.train, self.ctx, self.cfg.model.seq_len
        n = eval_window_count(t.eval_windows, self.global_batch, t.eval_batches, ctx.world_size)
        starts = eval_starts(len(self.corpus.val), seq_len, n)
        self.n_eval_windows = n
        self.val_batches = window_batches(self.corpus.val, starts[ctx.rank::ctx.world_size], seq_len, t.batch_size,
                                          device=ctx.device)
        self.probe_x = window_batches(self.corpus.val, starts[:self.cfg.monitor.probe_batch], seq_len,
                                      self.cfg.monitor.probe_batch, device=ctx.device)[0][0]  # the same on every rank
        self.unigram_val_loss = unigram_loss(self.corpus.counts, self.corpus.val, starts, seq_len)

    def experiment(self, config: dict, world_size: int, corpus_fingerprint: str, vocab_size: int) -> dict[str, Any]:
        """What a checkpoint must share with this run to be resumed (``resume.FIXED``): the global batch, not the
        number of processes that made it. Keys added to the schema since a record was written count at their
        defaults; records written before token shards have no vocab_size: they were byte-level (256)."""
        config = with_defaults(config)
        return {**config, "global_batch_size": global_batch(config.get("train") or {}, world_size),
                "corpus_fingerprint": corpus_fingerprint, "vocab_size": vocab_size}

    def recorded_divergence(self) -> dict[str, Any] | None:
        """A folder whose run diverged is a result: resuming it returns that record instead of re-training."""
        previous = self.ctx.broadcast(self.folder.previous_summary if self.cfg.train.resume == "auto" else None)
        if not (previous and previous.get("status") == "diverged"):
            return None
        config_changes(self.experiment(previous.get("config") or {}, previous.get("world_size", 1),
                                       (previous.get("corpus") or {}).get("fingerprint"),
                                       previous.get("vocab_size", 256)),
                       self.experiment(self.summary["config"], self.ctx.world_size, self.corpus.fingerprint,
                                       self.vocab_size),
                       step=previous.get("steps") or 0)
        say(f"normtrain: this run diverged at step {previous.get('diverged_at_step')} (recorded in "
            f"{self.run_dir / 'summary.json'}); nothing to resume. To train it again, use train.resume=none "
            "or a new folder")
        return previous

    def resume(self) -> None:
        """Continue from a checkpoint whose experiment matches this config (or refuse with exit 2), in either
        format and on any number of processes."""
        t, ctx = self.cfg.train, self.ctx
        ckpt: Checkpoint | None = ctx.broadcast(find_checkpoint(t.resume, self.run_dir) if ctx.is_main else None)
        if ckpt is None:
            return
        state = ckpt.read(ctx)
        old = self.experiment(state["config"], state.get("world_size", 1), state.get("corpus_fingerprint"),
                              state.get("vocab_size", 256))
        changes = config_changes(old, self.experiment(self.summary["config"], ctx.world_size, self.corpus.fingerprint,
                                                      self.vocab_size), step=state["step"])
        self.restore(ckpt, state)
        self.policy.records = list(state.get("rollbacks", []))
        entry = {"step": self.steps_done, "path": str(ckpt.path), "changes": changes, "world_size": ctx.world_size}
        self.resumes = [*state.get("resumes", []), {**entry, **({"restart": restart_count()} if restart_count()
                                                                 else {})}]
        self.summary["started_at"] = state.get("started_at", self.summary["started_at"])  # the run's first start
        if ctx.is_main:
            changed = "".join(f"\n  {k}: {v[0]!r} → {v[1]!r}" for k, v in changes.items())
            say(f"normtrain: resuming from step {self.steps_done} ({ckpt.path})"
                + (f"; changed since the checkpoint:{changed}" if changed else ""))

    def restore(self, ckpt: Checkpoint, state: dict[str, Any]) -> None:
        """The checkpoint's model and optimizer (the weight rule kept), and where the loop stood: step, data
        position, monitor, val losses."""
        ckpt.restore(self.model, self.optimizer, state, self.ctx)
        self.keep_weight_constraints()
        self.sampler.load_state_dict(global_state(state["sampler"], state.get("world_size", 1)))
        self.monitor.load_state_dict(state["monitor"])
        self.steps_done, self.val_losses = state["step"], list(state["val_losses"])
        self.train_losses = [tuple(p) for p in state.get("train_losses", [])]  # none in older checkpoints
        self.val_steps = list(state.get("val_steps", []))  # none in older ones: the labels then read no curve

    def init_from_data(self) -> None:
        """A data-dependent init (Admin's ω, ``GPT.data_init``) on a fresh run, never on a resumed one (its
        checkpoint holds the values). It profiles the first micro-batch of the run's first training batch, drawn
        from a copy of the sampler (the data order is untouched), so every rank and world size sets the same
        values."""
        if self.resumes or not self.raw.needs_data_init:
            return
        t = self.cfg.train
        first = BatchSampler(self.corpus.train, t.batch_size, self.cfg.model.seq_len, t.seed, device=self.ctx.device,
                             world_size=self.ctx.world_size, accumulation=self.accumulation).next_batch()[0]
        self.raw.data_init(first[:t.batch_size])
        self.monitor.take_reference()  # F(x, θ_0) of the model as it starts training

    def start(self) -> None:
        """Mark the folder's summary ``running`` (no earlier result stands for this run), open the loggers; with
        rollbacks on, make sure there is a checkpoint to roll back to."""
        t = self.cfg.train
        self.summary.update(steps=self.steps_done, resumes=self.resumes, rollbacks=self.policy.records,
                            resumed_from_step=self.resumes[-1]["step"] if self.resumes else None)
        if self.ctx.is_main:
            self.folder.write_summary(self.summary)
        self.loggers = (build_loggers(self.cfg, self.run_dir, sweep_job(), self.steps_done) if self.ctx.is_main
                        else Loggers([]))
        self.bar = make_progress(t.max_steps, self.steps_done, run_label(self.cfg), t.progress and self.ctx.is_main,
                                 t.progress_every_s)
        self.throughput = Throughput(self.global_batch * self.cfg.model.seq_len, self.steps_done)
        device = self.ctx.device
        self.peak = peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
        if self.policy.enabled and self.checkpointer.latest() is None:
            self.checkpoint()  # a divergence before the first train.ckpt_every rolls back to the start

    # --- the loop
    def loop(self) -> None:
        """Train to ``train.max_steps``; a rollback (``RollBack``, raised where the divergence flag is read) sends
        the loop back to the restored step."""
        while True:
            try:
                if self.train_to_end():
                    return  # stopped: diverged or interrupted
                if self.policy.allows():
                    self.check_divergence()  # a divergence since the last log step rolls back, too
                break
            except RollBack as rollback:
                self.roll_back(rollback.diverged_at)
        row = self.evaluate()
        self.loggers.log(row, self.cfg.train.max_steps)
        self.summary["status"] = "completed"  # unless finish finds a divergence since the last check

    def train_to_end(self) -> bool:
        """Steps from ``steps_done`` to ``train.max_steps``; True when the run stopped early."""
        t = self.cfg.train
        while self.steps_done < t.max_steps:
            step = self.steps_done
            row = self.evaluate() if t.eval_every > 0 and step % t.eval_every == 0 else {}
            lr = self.set_lr(step)
            log_step = self.monitor.is_log_step(step)
            self.train_step(step, log_step)
            if (log_step or row) and self.log(step, row, lr):
                return True  # diverged
            if self.stop_agreed(synced=log_step or bool(row)):
                self.summary["status"] = "interrupted"
                return True
            if t.ckpt_every and self.steps_done % t.ckpt_every == 0 and not self.checkpoint():
                return True  # diverged
        return False

    def set_lr(self, step: int) -> float:
        """The schedule's lr at ``step``, lowered for a while after a rollback (``train.rollback.lr_factor``)."""
        o = self.cfg.optim
        lr = lr_at(step, lr=o.lr, warmup_steps=o.warmup_steps, max_steps=self.cfg.train.max_steps,
                   schedule=o.schedule, min_lr_ratio=o.min_lr_ratio,
                   warmup_overlaps=o.warmup_overlaps) * self.policy.lr_scale(step)
        set_lr(self.optimizer, lr, lr * o.muon_lr / o.lr if o.name == "muon" else None)
        return lr

    def train_step(self, step: int, log_step: bool) -> None:
        """One optimizer update over the global batch; the divergence flag sees its loss and gradient norm on the
        device."""
        self.in_step = True  # a checkpoint is only consistent between steps
        self.faults.before_step(step)
        x, y = self.sampler.next_batch()
        loss = self.accumulate(step, log_step, x, y, batch_index=self.sampler.batches_drawn - 1)
        grads = [p.grad for p in self.params if p.grad is not None]
        grad_norm = torch.nn.utils.get_total_norm(grads)  # before clipping; no host sync
        # FSDP2: a DTensor of partial norms; the guard needs the whole one (clipping takes it as it is)
        whole = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        self.monitor.after_backward(step, loss, whole)
        if self.cfg.optim.grad_clip > 0:
            torch.nn.utils.clip_grads_with_norm_(self.params, self.cfg.optim.grad_clip, grad_norm)
        self.optimizer.step()
        self.keep_weight_constraints()
        if self.qk_clip is not None:
            self.qk_clip.apply()  # part of the update: after the step, before the monitor measures it
        self.monitor.after_update(step)
        self.optimizer.zero_grad(set_to_none=True)
        self.steps_done, self.in_step = step + 1, False
        self.bar.update(1)

    def keep_weight_constraints(self) -> None:
        """The model's own rule for its weights wherever they change outside a forward pass (after each optimizer
        step, a resume, a rollback), if it declares one (``after_optimizer_step``): nGPT puts every matrix back
        on the unit sphere. The loop knows nothing of what the rule is."""
        hook = getattr(self.raw, "after_optimizer_step", None)
        if hook is not None:
            hook()

    def accumulate(self, step: int, log_step: bool, x: torch.Tensor, y: torch.Tensor, batch_index: int) -> torch.Tensor:
        """Forward and backward of this rank's micro-batches of ``train.batch_size``; each loss is divided by their
        number, so the gradients (reduced across ranks once, after the last) are those of the mean loss over the
        global batch. Diagnostics hook the first micro-batch. Returns the mean loss."""
        size = self.cfg.train.batch_size
        micro = list(zip(x.split(size), y.split(size), strict=True))
        forward = self.model if log_step else self.compiled  # diagnostics hook the eager model: no recompiles
        total = None
        for i, (xs, ys) in enumerate(micro):
            with grad_sync(self.model, enabled=i == len(micro) - 1):
                with self.monitor.capture(step) if i == 0 else contextlib.nullcontext(), self.autocast():
                    logits, loss = forward(xs, ys)
                loss = self.faults.poison(loss, batch_index)
                (self.objective(step, logits, loss, observe=i == 0) / len(micro)).backward()
            total = loss.detach() if total is None else total + loss.detach()
        return total / len(micro)

    def objective(self, step: int, logits: torch.Tensor, loss: torch.Tensor, observe: bool = True) -> torch.Tensor:
        """What the step minimizes: the cross-entropy ``loss``, plus optim.z_loss × mean(log² Z) when it is on
        (normtrain/training/zloss.py). ``train/loss`` stays the cross-entropy, so curves compare across z-loss settings;
        the term is logged as ``train/z_loss``. The monitor's output diagnostics (``observe``) reuse log Z."""
        coef = self.cfg.optim.z_loss
        log_z = log_partition(logits) if coef > 0 else None
        z = z_loss(log_z) if log_z is not None else None
        if observe:
            self.monitor.observe_output(step, logits, log_z, z)
        return loss if z is None else loss + coef * z

    def log(self, step: int, row: dict[str, Any], lr: float) -> bool:
        """Write the row of a log or eval step; True when the run has diverged. A log step is a point where the
        ranks are in step, so a finished background checkpoint is committed here."""
        metrics, diverged_at = self.monitor.read()
        tokens_per_s = self.throughput.tick(self.steps_done)  # updates done, so the first interval counts too
        row.update(metrics, lr=lr, tokens_per_s=tokens_per_s)
        if self.peak and tokens_per_s:
            row["mfu"] = mfu(tokens_per_s, self.flops_per_token, self.peak, self.ctx.world_size)
        self.loggers.log(row, step)
        if "train/loss" in metrics:
            self.train_losses.append((step, metrics["train/loss"]))
            self.bar.set_postfix(loss=f"{metrics['train/loss']:.3f}", lr=f"{lr:.2e}",
                                 tok_s=f"{tokens_per_s or 0:.0f}", refresh=False)
        self.checkpointer.poll()
        return self.record_divergence(diverged_at, step)

    def stop_agreed(self, synced: bool) -> bool:
        """A signal asked to stop; under torchrun every rank stops at the same step, agreed at log steps only."""
        stopping = self.stop.requested is not None
        if not self.ctx.enabled:
            return stopping
        if not synced:
            return False  # no extra sync per step
        return bool(self.ctx.all_reduce(torch.tensor([float(stopping)], device=self.ctx.device), "max"))

    def evaluate(self) -> dict[str, float]:
        t0 = time.perf_counter()
        loss = evaluate(self.model, self.val_batches, self.autocast, self.ctx)
        self.throughput.exclude(time.perf_counter() - t0)
        self.val_losses.append(loss)
        self.val_steps.append(self.steps_done)
        self.bar.set_postfix_str(f"val {loss:.3f}", refresh=False)
        return {"val/loss": loss, "val/bpb": self.bpb(loss)}

    def bpb(self, loss: float) -> float:
        """Bits per byte of text from a loss per token, over the validation split's real byte count: tokenizers
        compare (for byte corpora, one byte per token, it is loss / ln 2)."""
        return loss / LN2 / self.corpus.val_bytes_per_token

    # --- divergence, rollback and checkpoints
    def record_divergence(self, diverged_at: int | None, step: int, final: bool = False) -> bool:
        """The one place a run becomes ``diverged``: a flagged step, or a non-finite val loss at ``step``. With
        ``train.on_divergence=rollback`` and retries left it raises RollBack instead (not ``final``ly: at the end
        of an interrupted run nothing is recorded, and its resume meets the divergence again)."""
        if diverged_at is None and all(math.isfinite(v) for v in self.val_losses):
            return self.summary["status"] == "diverged"
        if self.summary["status"] != "diverged" and self.policy.allows():
            if final:
                return True  # no checkpoint of this state; the last one stays the resume point
            raise RollBack(diverged_at if diverged_at is not None else step)
        if self.summary["status"] != "diverged":
            self.summary["status"] = "diverged"
            self.summary["diverged_at_step"] = diverged_at if diverged_at is not None else step
        return True

    def check_divergence(self, final: bool = False) -> bool:
        """Read the device-side flag (and the weights' finiteness) now: one host transfer."""
        self.monitor.guard.observe_weights(self.steps_done, self.params)
        return self.record_divergence(self.monitor.diverged_at(), self.steps_done, final)

    def roll_back(self, diverged_at: int) -> None:
        """Back to the last checkpoint, past the data that diverged (normtrain/training/rollback.py), on every rank
        alike (the flag they read is reduced across ranks). The rollback is recorded, logged, and checkpointed at once:
        a run killed right after it resumes past that data too."""
        self.checkpointer.wait()
        ckpt = self.checkpointer.latest()
        self.restore(ckpt, ckpt.read(self.ctx))
        skipped = self.policy.batches_to_skip(diverged_at, self.steps_done)
        self.sampler.skip(skipped)
        record = self.policy.record(diverged_at, self.steps_done, str(ckpt.path), skipped)
        self.loggers.rollback(record)
        if self.ctx.is_main:
            lowered = f", lr × {record['lr_factor']} for {record['lr_steps']} steps" if record["lr_steps"] else ""
            say(f"normtrain: diverged at step {diverged_at}; rolled back to step {self.steps_done} ({ckpt.path}), "
                f"skipping {skipped} batches{lowered} (rollback {record['retry']} of {self.policy.max_retries})")
        self.throughput = Throughput(self.global_batch * self.cfg.model.seq_len, self.steps_done)
        self.bar.update(self.steps_done - self.bar.n)
        self.checkpoint()

    def checkpoint(self, final: bool = False) -> bool:
        """Save a resume point, but never a diverged one: False (and nothing written) once diverged."""
        if self.check_divergence(final):
            return False
        self.checkpointer.save(self.model, self.optimizer, {
            "step": self.steps_done, "sampler": self.sampler.state_dict(), "monitor": self.monitor.state_dict(),
            "val_losses": self.val_losses, "val_steps": self.val_steps, "train_losses": self.train_losses,
            "config": self.summary["config"],
            "world_size": self.ctx.world_size,
            "global_batch_size": self.global_batch, "corpus_fingerprint": self.corpus.fingerprint,
            "vocab_size": self.vocab_size, "resumes": self.resumes, "rollbacks": self.policy.records,
            "started_at": self.summary["started_at"]})
        return True

    # --- finish
    def finish(self) -> None:
        """The last checkpoint (between steps, not diverged), committed, and the summary; runs shielded from
        signals."""
        self.bar.close()
        try:
            if self.summary["status"] != "failed" and not self.in_step:
                self.checkpoint(final=True)  # also records a divergence after the last log step
            if self.summary["status"] != "failed":
                self.checkpointer.wait()
        finally:
            self.finalize_summary()
            if self.ctx.is_main:
                try:
                    self.folder.write_summary(self.summary)
                finally:
                    self.loggers.finish(self.summary)
    def finalize_summary(self) -> None:
        finite = [v for v in self.val_losses if math.isfinite(v)]
        last = self.val_losses[-1] if self.val_losses else None
        final = None if self.summary["status"] == "diverged" or last is None or not math.isfinite(last) else last
        trend = tail_trend([s for s, _ in self.train_losses], [v for _, v in self.train_losses], self.steps_done)
        paired = len(self.val_steps) == len(self.val_losses)  # a checkpoint from before val_steps: no curve
        curve = list(zip(self.val_steps, self.val_losses, strict=True)) if paired else []
        judged = labels(curve, self.summary["unigram_val_loss"], self.cfg.train.max_steps,
                        diverged=self.summary["status"] == "diverged")
        self.summary.update(judged.as_dict(), loss_trend=trend.as_dict())
        self.summary.update(steps=self.steps_done, final_val_loss=final,
                            final_val_bpb=None if final is None else self.bpb(final),
                            last_finite_val_loss=finite[-1] if finite else None,
                            best_val_loss=min(finite) if finite else None,
                            wall_time_s=round(time.time() - self.started, 3))
        if self.summary["status"] != "failed":  # a failed device may not answer; the record stays readable
            self.summary.update(self.monitor.spike_summary())

    # --- helpers the phases share
    def autocast(self):
        use = self.ctx.device.type == "cuda" and self.cfg.train.autocast
        return torch.autocast("cuda", dtype=torch.bfloat16) if use else contextlib.nullcontext()

    @torch.no_grad()
    def probe(self) -> dict[str, torch.Tensor]:
        """F(x, θ) on the fixed probe batch for the model-update metrics: the final hidden state the LM head reads
        and, with ``monitor.stream_change``, the residual stream before the final norm (unsaturated; for placements
        without a final norm, the last block's output) and the logits; with ``monitor.output_kl``, the output
        log-probabilities. One forward pass through the wrapper-aware ``forward`` (FSDP gathers the head there);
        hooks take the head's and the final norm's inputs."""
        seen: dict[str, torch.Tensor] = {}
        hooks = [self.raw.lm_head.register_forward_pre_hook(lambda _m, args: seen.update(hidden=args[0]))]
        if self.raw.final_norm is not None:
            hooks.append(self.raw.final_norm.register_forward_pre_hook(lambda _m, args: seen.update(stream=args[0])))
        self.model.eval()
        try:
            with self.autocast():
                logits, _ = self.raw(self.probe_x)
        finally:
            for hook in hooks:
                hook.remove()
            self.model.train()
        out = {"hidden": seen["hidden"].float()}
        if self.cfg.monitor.stream_change:
            out.update(stream=seen.get("stream", seen["hidden"]).float(), logits=logits.float())
        if self.cfg.monitor.output_kl:
            out["logp"] = logits.float().log_softmax(-1)
        return out
