"""scripts/bench_jobs.py on a tiny model: both ways train every run, and the ratio is theirs."""

import json

import pytest
from test_bench_options import TINY, run


@pytest.mark.slow
def test_side_by_side_and_one_by_one_each_train_every_run(tmp_path):
    out = tmp_path / "jobs.json"
    proc = run("bench_jobs.py", ["--jobs", "2", "--repeats", "1", "--steps", "2", "--out", str(out), *TINY,
                                 "train.batch_size=2"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    (parallel,), (sequential,) = result["elapsed_s"]["parallel"], result["elapsed_s"]["sequential"]
    assert parallel > 0 and sequential > 0 and result["ratio_median"] == sequential / parallel
    assert "train.max_steps=2" in result["overrides"] and "model.d_model=32" in result["overrides"]


@pytest.mark.slow
def test_a_run_that_fails_stops_the_benchmark_with_its_error(tmp_path):
    proc = run("bench_jobs.py", ["--jobs", "2", "--repeats", "1", "--steps", "2", "norm=layernrom"], tmp_path)
    assert proc.returncode != 0 and "a training run failed" in proc.stderr and "layernrom" in proc.stderr
