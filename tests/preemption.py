"""What the preemption tests share: a run's metrics rows, and a SIGTERM sent while a chosen batch is drawn."""

import json
import os
import signal

from normtrain.data import batches


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def sigterm_at_batch(monkeypatch, n):
    """Simulate a preemption: SIGTERM arrives while the n-th batch (step n-1) is being trained."""
    original = batches.BatchSampler.next_batch

    def next_batch(self):
        if self.batches_drawn == n - 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self)

    monkeypatch.setattr(batches.BatchSampler, "next_batch", next_batch)
