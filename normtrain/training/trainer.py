"""The training loop: set up and resume, loop (step, log, evaluate, checkpoint), finish.

Row ``step = k`` of ``metrics.jsonl`` describes the model after k optimizer updates: its training
loss and gradients on the k-th batch and, on evaluation steps, its validation loss. A checkpoint
saved after k updates resumes at k with the same batches, so a resumed run repeats the rows of
an uninterrupted one exactly (on CPU), after any number of kill -9 and resume cycles.

The phases are objects beside the loop: ``TrainStep`` (step.py) makes one update, ``Evaluation`` (evaluation.py)
measures, ``Monitor`` diagnoses, ``Checkpointer`` and ``ResumePoint`` (resume.py) keep and find resume points.

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
  one global batch on any world size  ``BatchSampler`` draws it, ``TrainStep.accumulate`` makes up the micro-batches
  a model's weight rule holds ....... ``TrainStep.keep_weight_constraints`` after every update, resume and rollback
                                      (nGPT's unit-norm matrices: ``GPT.after_optimizer_step``)
  the last step is measured ......... ``Monitor.is_log_step``: the final step is a log step (train curve, per-layer
                                      diagnostics), whatever ``monitor.every`` is
  final writes survive signals ...... ``Trainer.run``: ``finish`` runs shielded from signals
  user errors of the file system .... ``train`` (exit 2 through RunFolderError)
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from normtrain.checkpoint import Checkpoint, Checkpointer, UnusableCheckpoint, keep_copy, unwrap
from normtrain.config import checkpoint_format, global_batch, model_config, validate, vocab_size
from normtrain.data import BatchSampler
from normtrain.data.batches import global_state
from normtrain.loggers import Loggers
from normtrain.loggers.names import sweep_job
from normtrain.model import GPT
from normtrain.model.ngpt_rules import ngpt_warnings
from normtrain.ops.guard import Choice, guard_norms
from normtrain.training.components import corpus_for, first_micro_batch, monitor_for, optimizer_for, stored_dtype
from normtrain.training.debug import FaultInjector
from normtrain.training.distributed import DistContext, autocast_for, init_distributed, wrap_model
from normtrain.training.evaluation import Evaluation, evaluate
from normtrain.training.flops import model_flops_per_token
from normtrain.training.memory import check_fits
from normtrain.training.optim import schedule_warnings
from normtrain.training.preemption import StartUpWatch, StopRequested
from normtrain.training.reporting import Throughput, build_loggers, hydra_run_dir, run_folder_path, run_label
from normtrain.training.resume import ResumePoint, diverged_record, experiment
from normtrain.training.rollback import RollBack, RollbackPolicy
from normtrain.training.run_folder import USER_ERRNOS, RunFolder, write_error
from normtrain.training.step import TrainStep
from normtrain.training.summary import final_fields, first_summary
from normtrain.util.progress import make_progress
from normtrain.util.runlog import log, say

# the names this module held before its phases moved out (normtrain.training.trainer.evaluate, ...)
__all__ = ["Throughput", "Trainer", "build_loggers", "evaluate", "hydra_run_dir", "run_label", "seed_everything",
           "train"]
RESUME_ADVICE = "Start over with train.resume=none, or point train.resume at another checkpoint"


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train(cfg: DictConfig, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Train one run and return its summary (also written to ``<run_dir>/summary.json``). Subnormal CPU floats are
    flushed to zero for the process: deep Post-LN's vanishing gradients made them, and ran 6× slower on x86."""
    validate(cfg)
    torch.set_flush_denormal(True)  # recorded as execution.flush_denormal; no reported number moves
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


class Trainer:
    """One run: ``run`` opens the folder, builds, resumes, loops and finishes (see the module docstring)."""

    def __init__(self, cfg: DictConfig, ctx: DistContext, run_dir: str | Path | None):
        self.cfg, self.ctx, self.started = cfg, ctx, time.time()
        self.run_dir = Path(ctx.broadcast(run_folder_path(cfg, run_dir)))  # every rank: rank 0's folder
        self.folder = RunFolder(self.run_dir)
        self.stop = StopRequested()
        self.steps_done, self.in_step, self.val_losses, self.resumes = 0, False, [], []
        self.train_losses: list[tuple[int, float]] = []  # (step, train/loss) at log steps: the run's trend
        self.val_steps: list[int] = []  # the step of each val loss: the curve the run's labels read
        self.checkpointer: Checkpointer | None = None
        self.autocast = autocast_for(ctx.device, cfg.train.autocast)  # bf16 on CUDA (train.autocast)

    # --- set-up and resume
    def run(self) -> dict[str, Any]:
        try:
            if self.ctx.is_main:
                self.folder.open()
            with StartUpWatch(self.folder):  # a Ctrl-C in one long torch call still ends start-up at once
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
        """Corpus, model, optimizer, batches, evaluation, monitor and the step, seeded; the summary's fixed fields."""
        cfg, ctx, t = self.cfg, self.ctx, self.cfg.train
        for line in (ngpt_warnings(cfg) + schedule_warnings(cfg.optim, t.max_steps)) if ctx.is_main else []:
            say(f"normtrain: warning: {line}")  # settings that run but confound what the run measures, said once
        seed_everything(t.seed)
        self.corpus = corpus_for(cfg, ctx)
        self.vocab_size = vocab_size(cfg, self.corpus.vocab_size)  # the corpus's, unless model.vocab_size pads it
        check_fits(cfg, self.vocab_size, ctx.device, ctx.world_size)  # exit 2 before the model is allocated
        plain = GPT(model_config(cfg, vocab=self.vocab_size)).to(ctx.device, dtype=stored_dtype(cfg))
        self.norm_impl = self.guard_norms(plain)
        self.model = wrap_model(plain, ctx, t.strategy)
        self.raw = unwrap(self.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer, self.qk_clip = optimizer_for(self.raw, cfg, ctx)
        self.global_batch = global_batch(t, ctx.world_size)
        self.accumulation = self.global_batch // (t.batch_size * ctx.world_size)
        self.sampler = BatchSampler(self.corpus.train, t.batch_size, cfg.model.seq_len, t.seed, device=ctx.device,
                                    rank=ctx.rank, world_size=ctx.world_size, accumulation=self.accumulation)
        self.evaluation = Evaluation(cfg, self.corpus, ctx, self.global_batch)
        self.monitor = monitor_for(self.model, self.params, cfg, ctx, self.evaluation.probe_x, self.autocast)
        self.faults = FaultInjector(cfg.debug, ctx.rank)
        self.update = TrainStep(cfg, self.model, torch.compile(self.model) if t.compile else self.model, self.raw,
                                self.params, self.optimizer, self.qk_clip, self.sampler, self.monitor, self.faults,
                                self.autocast)
        self.ckpt_format = checkpoint_format(t, ctx.world_size)
        self.checkpointer = Checkpointer(self.run_dir, ctx, self.ckpt_format, t.async_ckpt)
        self.policy = RollbackPolicy.from_config(t)
        self.summary = first_summary(cfg, ctx, plain, self.corpus, self.evaluation, vocab_size=self.vocab_size,
                                     global_batch=self.global_batch, accumulation=self.accumulation,
                                     ckpt_format=self.ckpt_format, norm_impl=self.norm_impl, run_dir=self.run_dir,
                                     started=self.started)

    def guard_norms(self, model: GPT) -> Choice:
        """norm.impl=auto runs Triton only once it matched torch here (normtrain/ops/guard.py); the choice and its
        reason go to the log, as a warning when the check failed, and to summary.json's ``norm_impl``."""
        t, device = self.cfg.train, self.ctx.device
        dtypes = (torch.float32, torch.bfloat16) if device.type == "cuda" and t.autocast else (torch.float32,)
        choice = guard_norms(model, self.cfg.norm.impl, device, t.batch_size * self.cfg.model.seq_len, dtypes,
                             compiled=t.compile)
        if choice.fallback and self.ctx.is_main:
            say(f"normtrain: warning: {choice.why}")
        else:
            log.info(f"RMSNorm implementation: {choice.impl} ({choice.why})")
        return choice

    def recorded_divergence(self) -> dict[str, Any] | None:
        """A folder whose run diverged is a result: resuming it returns that record instead of re-training."""
        previous = self.ctx.broadcast(self.folder.previous_summary if self.cfg.train.resume == "auto" else None)
        return diverged_record(previous, self.own_experiment(), self.run_dir)

    def own_experiment(self) -> dict[str, Any]:
        """This run's experiment, as a checkpoint must share it to be resumed (normtrain/training/resume.py)."""
        return experiment(self.summary["config"], self.ctx.world_size, self.corpus.fingerprint, self.vocab_size)

    def resume(self) -> None:
        """Continue from a checkpoint whose experiment matches this config (or refuse with exit 2), in either
        format and on any number of processes. A checkpoint that cannot be used says what it is, and what to do."""
        try:
            point = ResumePoint.find(self.cfg.train.resume, self.run_dir, self.ctx, self.own_experiment())
            if point is not None:
                self.restore(point.ckpt, point.state)
        except UnusableCheckpoint as err:
            raise err.advised(RESUME_ADVICE) from None
        if point is None:
            return
        self.policy.records = list(point.state.get("rollbacks", []))
        self.resumes = point.history(self.ctx.world_size)
        self.summary["started_at"] = point.state.get("started_at", self.summary["started_at"])  # the first start
        if self.ctx.is_main:
            say(point.message())

    def restore(self, ckpt: Checkpoint, state: dict[str, Any]) -> None:
        """The checkpoint's model and optimizer (the weight rule kept), and where the loop stood: step, data
        position, monitor, val losses."""
        ckpt.restore(self.model, self.optimizer, state, self.ctx)
        self.update.keep_weight_constraints()
        self.sampler.load_state_dict(global_state(state["sampler"], state.get("world_size", 1)))
        self.monitor.load_state_dict(state["monitor"])
        self.steps_done, self.val_losses = state["step"], list(state["val_losses"])
        self.train_losses = [tuple(p) for p in state.get("train_losses", [])]  # none in older checkpoints
        self.val_steps = list(state.get("val_steps", []))  # none in older ones: the labels then read no curve

    def init_from_data(self) -> None:
        """A data-dependent init (Admin's ω, ``GPT.data_init``) on a fresh run, never on a resumed one (its
        checkpoint holds the values), from the same first micro-batch on every rank and world size."""
        if self.resumes or not self.raw.needs_data_init:
            return
        self.raw.data_init(first_micro_batch(self.corpus, self.cfg, self.ctx, self.accumulation))
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
        self.throughput = Throughput(self.global_batch * self.cfg.model.seq_len, self.steps_done,
                                     model_flops_per_token(self.raw), self.ctx.device, self.ctx.world_size)
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
        if (select := self.evaluation.select_loss(self.model, self.autocast)) is not None:
            row["select/loss"] = self.summary["final_select_loss"] = select
        self.loggers.log(row, self.cfg.train.max_steps)
        self.summary["status"] = "completed"  # unless finish finds a divergence since the last check

    def train_to_end(self) -> bool:
        """Steps from ``steps_done`` to ``train.max_steps``; True when the run stopped early."""
        t = self.cfg.train
        while self.steps_done < t.max_steps:
            step = self.steps_done
            row = self.evaluate() if t.eval_every > 0 and step % t.eval_every == 0 else {}
            lr = self.update.set_lr(step, self.policy)
            log_step = self.monitor.is_log_step(step)
            self.train_step(step, log_step)
            if (log_step or row) and self.log(step, row, lr):
                return True  # diverged
            if self.stop.agreed(self.ctx, synced=log_step or bool(row)):
                self.summary["status"] = "interrupted"
                return True
            keep = self.steps_done in t.keep_ckpt_at  # a branch point: kept as ckpt_step{k}.pt (normtrain/ablate/)
            if ((t.ckpt_every and self.steps_done % t.ckpt_every == 0) or keep) and not self.checkpoint(keep=keep):
                return True  # diverged
        return False

    def train_step(self, step: int, log_step: bool) -> None:
        self.in_step = True  # a checkpoint is only consistent between steps
        self.update.run(step, log_step)
        self.steps_done, self.in_step = step + 1, False
        self.bar.update(1)

    def log(self, step: int, row: dict[str, Any], lr: float) -> bool:
        """Write the row of a log or eval step; True when the run has diverged. A log step is a point where the
        ranks are in step, so a finished background checkpoint is committed here."""
        metrics, diverged_at = self.monitor.read()
        speed = self.throughput.tick(self.steps_done)  # updates done, so the first interval counts too
        row.update(metrics, lr=lr, **speed)
        self.loggers.log(row, step)
        if "train/loss" in metrics:
            self.train_losses.append((step, metrics["train/loss"]))
            self.bar.set_postfix(loss=f"{metrics['train/loss']:.3f}", lr=f"{lr:.2e}",
                                 tok_s=f"{speed['tokens_per_s'] or 0:.0f}", refresh=False)
        self.checkpointer.poll()
        return self.record_divergence(diverged_at, step)

    def evaluate(self) -> dict[str, float]:
        loss = self.evaluation.loss(self.model, self.autocast)
        self.throughput.exclude(self.evaluation.seconds)
        self.val_losses.append(loss)
        self.val_steps.append(self.steps_done)
        self.bar.set_postfix_str(f"val {loss:.3f}", refresh=False)
        return {"val/loss": loss, "val/bpb": self.evaluation.bpb(loss)}

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
            say(self.policy.describe(record))
        self.throughput.restart(self.steps_done)
        self.bar.update(self.steps_done - self.bar.n)
        self.checkpoint()

    def checkpoint(self, final: bool = False, keep: bool = False) -> bool:
        """Save a resume point, never a diverged one (False); ``keep``: also as ckpt_step{k}.pt, never replaced."""
        if self.check_divergence(final):
            return False
        self.checkpointer.save(self.model, self.optimizer, {
            "step": self.steps_done, "sampler": self.sampler.state_dict(), "monitor": self.monitor.state_dict(),
            "val_losses": self.val_losses, "val_steps": self.val_steps, "train_losses": self.train_losses,
            "config": self.summary["config"], "world_size": self.ctx.world_size,
            "global_batch_size": self.global_batch, "corpus_fingerprint": self.corpus.fingerprint,
            "vocab_size": self.vocab_size, "resumes": self.resumes, "rollbacks": self.policy.records,
            "started_at": self.summary["started_at"]})
        if keep and self.ctx.is_main:
            keep_copy(self.run_dir, f"ckpt_step{self.steps_done}.pt")
        return True

    # --- finish
    def finish(self) -> None:
        """The last checkpoint (between steps, not diverged), committed; an interrupted run's loss where it stopped,
        when cheap (``Evaluation.worth_on_exit``); the summary. Runs shielded from signals."""
        self.bar.close()
        try:
            if self.summary["status"] != "failed" and not self.in_step:
                self.checkpoint(final=True)  # also records a divergence after the last log step
            if self.summary["status"] != "failed":
                self.checkpointer.wait()
            if self.summary["status"] == "interrupted" and not self.in_step and self.evaluation.worth_on_exit(
                    self.val_steps, self.steps_done):
                self.evaluate()
        finally:
            self.finalize_summary()
            if self.ctx.is_main:
                try:
                    self.folder.write_summary(self.summary)
                finally:
                    self.loggers.finish(self.summary)

    def finalize_summary(self) -> None:
        self.summary.update(final_fields(self.summary, self.val_steps, self.val_losses, self.train_losses,
                                         self.steps_done, self.cfg.train.max_steps, self.evaluation.bpb))
        self.summary.update(wall_time_s=round(time.time() - self.started, 3))
        if self.summary["status"] != "failed":  # a failed device may not answer; the record stays readable
            self.summary.update(self.monitor.spike_summary())

