"""torchrun with 2 CPU processes (gloo) matches one process with the same global batch."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def losses(run_dir, key):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r[key] for r in rows if r.get(key) is not None}


def run(args, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def single(text_corpus, tmp_path_factory):
    """One process, global batch 8."""
    root = tmp_path_factory.mktemp("single")
    run([sys.executable, "-m", "normtrain", *tiny_args(text_corpus), "train.batch_size=8",
         f"hydra.run.dir={root / 'run'}"], root)
    return root / "run"


def tiny_args(corpus):
    return ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.seq_len=32", "train.max_steps=8",
            "train.eval_every=4", "train.eval_batches=2", "monitor.every=1", "logger=none", "train.progress=false",
            "data=local_text", f"data.path={corpus}"]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_gloo_processes_match_one_process_with_the_same_global_batch(strategy, single, text_corpus, tmp_path):
    out = tmp_path / "run"
    proc = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone", "-m",
                "normtrain", *tiny_args(text_corpus), "train.batch_size=4", f"train.strategy={strategy}",
                f"hydra.run.dir={out}"], tmp_path)
    assert proc.stderr.count("normtrain: completed") == 1  # rank 0 alone reports
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_batch_size"] == 8
    for key in ("train/loss", "val/loss", "grad_norm/total", "update/output_change"):
        one, two = losses(single, key), losses(out, key)
        assert one.keys() == two.keys()
        for step in one:
            assert two[step] == pytest.approx(one[step], rel=1e-4, abs=1e-6), (key, step)
    # one output folder: no stray folders from rank 1 next to rank 0's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
