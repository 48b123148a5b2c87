"""The end of a run and of a sweep on the terminal: the outcome in words from the run's labels, with its numbers."""

import json
import os

from warm_python import warm

from normtrain.training.ending import end_line, outcome, sweep_table


def summary(**fields):
    base = {"status": "completed", "steps": 200, "final_val_loss": 3.38241, "unigram_val_loss": 3.37642,
            "last_finite_val_loss": 3.38241, "run_dir": "outputs/x", "collapsed": False, "above_line": False,
            "plateaued": False, "undertrained": False, "diverged_at_step": None}
    return {**base, **fields}


def test_the_end_of_run_line_says_the_outcome_with_its_numbers():
    collapsed = end_line(summary(collapsed=True))
    assert collapsed.startswith("normtrain: completed after 200 steps, collapsed onto the unigram line: ")
    assert "final val loss 3.3824" in collapsed and "unigram 3.3764" in collapsed
    assert "above the unigram line" in end_line(summary(above_line=True, final_val_loss=4.1))
    falling = end_line(summary(undertrained=True, val_trend={"drop": 0.12}, final_val_loss=2.7))
    assert "still falling (undertrained: 0.120 nats over the last quarter)" in falling
    assert end_line(summary(final_val_loss=2.7)).startswith("normtrain: completed after 200 steps: final val loss")
    diverged = end_line(summary(status="diverged", diverged_at_step=37, steps=37, final_val_loss=None,
                                last_finite_val_loss=5.5))
    assert diverged.startswith("normtrain: diverged at step 37 after 37 steps: last finite val loss 5.5000")
    assert outcome(summary(plateaued=True, left_line_at_step=120)) == "left the unigram line at step 120"


def test_a_sweep_table_names_each_job_by_its_swept_values():
    jobs = [(1, ["placement=pre", "model.n_layers=18"], summary(final_val_loss=2.718)),
            (0, ["placement=post", "model.n_layers=18"], summary(collapsed=True))]
    lines = sweep_table(jobs).splitlines()
    assert "job" in lines[0] and "outcome" in lines[0] and len(lines) == 4
    assert "placement=post" in lines[2] and "collapsed onto the unigram line" in lines[2]
    assert "n_layers" not in lines[2] + lines[3]  # shared by every job: not a swept value
    assert "placement=pre" in lines[3] and "2.7180" in lines[3]


def test_a_multirun_ends_with_one_table_of_its_jobs(tiny, tmp_path):
    sweep = tmp_path / "sweep"
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONWARNINGS": "ignore"}
    proc = warm(env).run(["-m", "normtrain", "-m", *tiny, "train.max_steps=4", "placement=pre,post",
                          f"hydra.sweep.dir={sweep}"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("the sweep's 2 jobs") == 1
    table = proc.stderr.split("the sweep's 2 jobs")[1]
    assert "placement=pre" in table and "placement=post" in table
    for job in sweep.glob("*/summary.json"):
        assert number_in(json.loads(job.read_text())["final_val_loss"], table)


def number_in(value, text):
    return f"{value:.4f}" in text
