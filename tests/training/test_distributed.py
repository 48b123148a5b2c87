"""torchrun with 2 CPU processes (gloo) matches one process with the same global batch; so does a run that moves
from 2 processes to 1 to 4 (sharded and one-file checkpoints, gradient accumulation), one that torchrun restarts
after a rank was killed (also inside a sharded save), and one that rolls back after a NaN on one rank only."""

import json
import os
import sys
from pathlib import Path

import pytest
from warm_python import warm

from normtrain.checkpoint import CKPT_NAME, DCP_NAME, load_checkpoint
from normtrain.checkpoint.sharded import LATEST, MANIFEST

pytestmark = pytest.mark.slow
VICTIM = Path(__file__).parents[1] / "faults" / "victim.py"


def losses(run_dir, key):
    """{step: value} of the curve as trained: event rows skipped, a step's last row kept (after a rollback)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r[key] for r in rows if "event" not in r and key in r}


def launch(args, cwd):
    """``args`` (``python ...``: torchrun, or one process) forked warm (tests/warm_python.py); torchrun's ranks are
    its own cold processes."""
    assert args[0] == sys.executable
    return warm({**os.environ, "OMP_NUM_THREADS": "1"}).run(args[1:], cwd=cwd, timeout=300)


def run(args, cwd):
    proc = launch(args, cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def torchrun(nproc, *flags):
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--standalone", *flags]


def summary(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def assert_same_curve(run_dir, single, rel=1e-5):
    """train and val loss at every step as the one-process run, to ``rel``: the ranks' gradients are summed in
    another order (all-reduce, accumulation) than one process sums its batch, in float32."""
    for key in ("train/loss", "val/loss"):
        one, other = losses(single, key), losses(run_dir, key)
        assert one.keys() == other.keys()
        for step in one:
            assert other[step] == pytest.approx(one[step], rel=rel), (key, step)


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


def test_a_run_moves_from_2_to_1_to_4_processes_on_the_curve_of_one(single, text_corpus, tmp_path):
    """Global batch 8 throughout: 2 ranks × 4, then 1 process × 4 × 2 accumulated, then 4 ranks × 2. Each of the
    first two legs is killed (debug.kill_at_step) and the next one resumes its checkpoint: sharded (written by both
    ranks), then one file, then sharded again, written in the background."""
    out = tmp_path / "run"
    common = [*tiny_args(text_corpus), "train.global_batch_size=8", "train.ckpt_every=2", f"hydra.run.dir={out}"]
    first = launch(torchrun(2) + ["-m", "normtrain", *common, "train.batch_size=4", "debug.kill_at_step=3"], tmp_path)
    assert first.returncode != 0 and (out / DCP_NAME / LATEST).read_text().startswith("step_00000002-")
    manifest = json.loads((out / DCP_NAME / (out / DCP_NAME / LATEST).read_text() / MANIFEST).read_text())
    assert {"__0_0.distcp", "__1_0.distcp"} <= set(manifest["files"])  # every rank wrote its own shard

    second = launch([sys.executable, "-m", "normtrain", *common, "train.batch_size=4", "debug.kill_at_step=6"],
                    tmp_path)
    assert second.returncode == -9 and "resuming from step 2" in second.stderr
    assert load_checkpoint(out / CKPT_NAME)["step"] == 6 and not (out / DCP_NAME).exists()

    run(torchrun(4) + ["-m", "normtrain", *common, "train.batch_size=2", "train.async_ckpt=true"], tmp_path)
    result = summary(out)
    assert result["status"] == "completed" and result["world_size"] == 4 and result["global_batch_size"] == 8
    assert [(r["step"], r["world_size"]) for r in result["resumes"]] == [(2, 1), (6, 4)]
    assert result["resumes"][1]["changes"]["train.batch_size"] == [4, 2]
    assert_same_curve(out, single)


def test_torchrun_restarts_the_group_after_a_rank_is_killed(single, text_corpus, tmp_path):
    out = tmp_path / "run"
    run(torchrun(2, "--max-restarts=1") + ["-m", "normtrain", *tiny_args(text_corpus), "train.batch_size=4",
                                           "train.ckpt_every=2", "debug.kill_at_step=5", "debug.kill_rank=1",
                                           f"hydra.run.dir={out}"], tmp_path)
    result = summary(out)
    assert result["status"] == "completed" and result["restarts"] == 1
    assert [(r["step"], r["restart"]) for r in result["resumes"]] == [(4, 1)]
    assert_same_curve(out, single)


def test_kill_9_of_one_rank_inside_a_sharded_save(single, text_corpus, tmp_path):
    """Rank 1 dies with half its shard written, in the second save (step 4): torchrun restarts the group, which
    resumes from the last committed checkpoint (step 2), whose every file still matches its digest."""
    out = tmp_path / "run"
    spec = {"overrides": [*tiny_args(text_corpus), "train.batch_size=4", "train.ckpt_every=2"], "run_dir": str(out),
            "fault": {"kind": "dcp_partial", "n": 2, "rank": 1}, "cli": True}
    proc = run(torchrun(2, "--max-restarts=1") + [str(VICTIM), json.dumps(spec)], tmp_path)
    assert "resuming from step 2" in proc.stderr
    result = summary(out)
    assert result["status"] == "completed" and result["restarts"] == 1 and result["ckpt_format"] == "dcp"
    assert_same_curve(out, single)


def test_a_nan_on_one_rank_rolls_back_every_rank(single, text_corpus, tmp_path):
    """Rank 1's loss is NaN at step 3; the divergence flag is reduced across ranks, so both roll back together
    (FSDP: the sharded checkpoint is loaded into shards) and skip the batch."""
    out = tmp_path / "run"
    run(torchrun(2) + ["-m", "normtrain", *tiny_args(text_corpus), "train.batch_size=4", "train.strategy=fsdp",
                       "train.ckpt_every=2", "train.on_divergence=rollback", "debug.inject_nan_at_step=3",
                       "debug.nan_rank=1", f"hydra.run.dir={out}"], tmp_path)
    result = summary(out)
    assert result["status"] == "completed" and result["steps"] == 8
    assert [(r["step"], r["restored_step"], r["skipped_batches"]) for r in result["rollbacks"]] == [(3, 2, 2)]
    assert losses(out, "train/loss").keys() == losses(single, "train/loss").keys()


PEER = ["model.tie_embeddings=true", "model.init=gpt2", "norm=layernorm", "norm.bias=false", "model.pos=learned"]


@pytest.fixture(scope="module")
def single_peer(text_corpus, tmp_path_factory):
    """One process, global batch 8, the peer options (a tied embedding and head, GPT-2's init, LayerNorm without β)."""
    root = tmp_path_factory.mktemp("single_peer")
    run([sys.executable, "-m", "normtrain", *tiny_args(text_corpus), *PEER, "train.batch_size=8",
         f"hydra.run.dir={root / 'run'}"], root)
    return root / "run"


def test_a_tied_model_shards_under_fsdp_and_resumes_on_the_curve_of_one(single_peer, text_corpus, tmp_path):
    """FSDP2 shards the one matrix once, with the root module that holds both of its uses (the embedding and the
    head); the sharded checkpoint of a group killed at step 3 resumes on two ranks from step 2, on the curve of one
    process (train and val loss at every step)."""
    out = tmp_path / "run"
    common = [*tiny_args(text_corpus), *PEER, "train.batch_size=4", "train.strategy=fsdp", "train.ckpt_every=2",
              f"hydra.run.dir={out}"]
    first = launch(torchrun(2) + ["-m", "normtrain", *common, "debug.kill_at_step=3"], tmp_path)
    assert first.returncode != 0 and (out / DCP_NAME / LATEST).read_text().startswith("step_00000002-")
    proc = run(torchrun(2) + ["-m", "normtrain", *common], tmp_path)
    assert "resuming from step 2" in proc.stderr
    result = summary(out)
    assert result["status"] == "completed" and result["n_params"] == summary(single_peer)["n_params"]
    assert_same_curve(out, single_peer)


MUON_CLIP = ["optim=muon", "optim.qk_clip=1", "optim.qk_clip_alpha=0.3"]


@pytest.fixture(scope="module")
def single_muon_clip(text_corpus, tmp_path_factory):
    """One process, global batch 8, Muon with QK-Clip at τ = 1 (every head clipped from the first step)."""
    root = tmp_path_factory.mktemp("single_muon")
    run([sys.executable, "-m", "normtrain", *tiny_args(text_corpus), *MUON_CLIP, "train.batch_size=8",
         f"hydra.run.dir={root / 'run'}"], root)
    return root / "run"


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_muon_with_qk_clip_on_two_processes_matches_one(strategy, single_muon_clip, text_corpus, tmp_path):
    """Muon on FSDP2's sharded matrices (torch's Muon on DTensors) and QK-Clip's maxima taken over both ranks
    (each rank saw half the batch) and applied to the shards: the curve of one process."""
    out = tmp_path / "run"
    run(torchrun(2) + ["-m", "normtrain", *tiny_args(text_corpus), *MUON_CLIP, "train.batch_size=4",
                       f"train.strategy={strategy}", f"hydra.run.dir={out}"], tmp_path)
    assert_same_curve(out, single_muon_clip, rel=1e-4)
    one, two = losses(single_muon_clip, "attn_logit_max/layer_0"), losses(out, "attn_logit_max/layer_0")
    assert two == pytest.approx(one, rel=1e-4) and one[0] > 2 and max(list(one.values())[1:]) < 1.1


@pytest.mark.parametrize("bad,said", [
    (["model.n_heads=3"], "model.n_heads=3 does not divide model.d_model=32"),  # a value: validate
    (["model.n_layer=3"], "model.n_layer is not a key of model; did you mean model.n_layers?"),  # Hydra composing
])
def test_under_torchrun_a_config_error_is_said_once_and_the_ranks_exit_2(bad, said, text_corpus, tmp_path):
    """Every rank composes and validates the same config: rank 0 alone says what is wrong. torchrun itself then
    exits 1 for any worker that failed, whatever its code, with its summary naming the workers' exit code 2."""
    proc = launch([*torchrun(2), "-m", "normtrain", *tiny_args(text_corpus), *bad, f"hydra.run.dir={tmp_path / 'run'}"],
                  tmp_path)
    assert proc.stderr.count(said) == 1, proc.stderr
    assert proc.returncode == 1 and "exitcode  : 2" in proc.stderr, proc.stderr
    assert not any(f"normtrain/{where}" in proc.stderr for where in ("cli.py", "config/", "training/"))  # torchrun's
    # own traceback only, none from a worker
