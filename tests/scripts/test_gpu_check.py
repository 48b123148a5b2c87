"""scripts/gpu_check.py: without CUDA it says it is for a GPU; its table marks each target met, missed or not
measured from what the phases wrote (here: files as its phases write them); its dry run stays on the CPU, judges
nothing and goes end to end; the science phase runs its experiments in order in the time left."""

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"
CHECK = runpy.run_path(str(SCRIPT), run_name="gpu_check")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_cuda_it_exits_with_a_message(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=120)
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr and "Traceback" not in proc.stderr


def write_phases(out: Path, dev: str) -> None:
    kernels = out / "kernels"
    (out / "throughput").mkdir(parents=True)
    kernels.mkdir()
    (kernels / f"gpu_check-{dev}.tests.log").write_text("....F\n1 failed, 95 passed in 60.0s\n")
    (kernels / f"{dev}.json").write_text(json.dumps({
        "targets": [{"what": "fwd N=768: >= 90% of copy", "value": "97.2%", "met": True},
                    {"what": "bwd N=768: >= 80% of copy", "value": "65.5%", "met": False}],
        "host_us": {"F.rms_norm": {"fwd": 14.5, "fwd+bwd": 204.6}}}))
    (kernels / f"gpu_check-{dev}.cli-summary.json").write_text(json.dumps(
        {"norm_impl": {"impl": "triton", "why": "matched", "fallback": False}}))
    (out / "throughput" / f"{dev}.json").write_text(json.dumps({
        "ratios": {"auto / torch RMSNorm, eager": 1.045, "auto RMSNorm / LayerNorm, eager": 0.993},
        "results": [{"status": "ok", "mode": "eager", "impl": "auto", "mfu": 0.256}]}))


def test_the_table_marks_each_target_met_missed_or_not_measured(tmp_path):
    write_phases(tmp_path, "gpu")
    rows = {what: (value, met) for what, value, met in CHECK["target_rows"](tmp_path, "gpu", {})}
    assert rows["tests/ops compiled for this GPU all pass"] == ("1 failed, 95 passed", False)
    assert rows["fwd N=768: >= 90% of copy"] == ("97.2%", True)
    assert rows["bwd N=768: >= 80% of copy"] == ("65.5%", False)
    assert rows["default CLI run at model=gpt2_small picks Triton (summary.json)"][1] is True
    assert rows["auto / torch RMSNorm, eager >= 1.05"] == ("1.045", False)
    assert rows["auto / torch RMSNorm, compiled >= 1.00"] == ("not measured", None)  # eager-only run
    assert rows["(stretch) auto RMSNorm / LayerNorm, eager >= 1.00"] == ("0.993", False)


def test_a_phase_that_wrote_nothing_is_not_measured_and_says_why(tmp_path):
    (tmp_path / "kernels").mkdir()
    phases = {p: {"status": "stopped at its 60-s share of the budget"} for p in ("kernels", "train", "cli")}
    rows = CHECK["target_rows"](tmp_path, "gpu", phases)
    assert rows[0][2] is False  # no test summary: not a pass
    assert [met for _, _, met in rows[1:]] == [None, None, None]
    assert all("stopped at its 60-s share" in value for _, value, _ in rows[1:])


def args_of(*argv: str):
    return CHECK["parse_args"](list(argv))


def test_a_dry_run_keeps_every_phase_on_the_cpu_and_out_of_experiments():
    args = args_of("--dry-run")
    assert args.out.name == "gpu_check-dry" and "experiments" not in args.out.parts
    cmds = CHECK["commands"](args, "cpu-dry-run", args.out / "kernels" / "x", Path("/tmp/cli"))
    assert cmds["tests"][1] == {"TRITON_INTERPRET": "1"} and "test_rmsnorm_rows.py" in cmds["tests"][0][-3]
    assert "--dry-run" in cmds["kernels"][0] and "--sweep-rows" in cmds["kernels"][0]
    assert {"--device", "cpu", "--tiny"} <= set(cmds["train"][0]) and "eager,graphs" in cmds["train"][0]
    assert "train.device=cpu" in cmds["cli"][0] and "train.max_steps=2" in cmds["cli"][0]
    gpu = CHECK["commands"](args_of(), "gpu", Path("/tmp/x"), Path("/tmp/cli"))
    assert gpu["tests"][1] == {"TRITON_INTERPRET": "0"} and "eager,compiled,graphs" in gpu["train"][0]
    assert "--dry-run" not in gpu["kernels"][0] and "train.device=cuda" in gpu["cli"][0]


class Clock:
    """A stand-in for the time module whose clock the fake phases advance."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        return self.now


def test_the_science_runs_in_order_in_the_time_left(monkeypatch, tmp_path):
    """hybrid_depth first; each a share of what is left, at least 90 s; what no longer fits is not run and says
    so; each budget in minutes leaves the grace to its share."""
    clock, calls = Clock(), []
    run_science = CHECK["run_science"]

    def fake_phase(name, cmd, seconds, log, env=None):
        calls.append((cmd, seconds))
        clock.now += seconds
        return {"status": "ok", "rc": 0, "seconds": seconds}

    monkeypatch.setitem(run_science.__globals__, "time", clock)
    monkeypatch.setitem(run_science.__globals__, "run_phase", fake_phase)
    result = run_science(args_of(), 200, tmp_path / "stem")
    assert [cmd[3] for cmd, _ in calls] == ["hybrid_depth", "curse_of_depth"]
    assert [s for _, s in calls] == [90, 90] and all(cmd[8] == "--no-progress" for cmd, _ in calls)
    assert calls[0][0][4:8] == ["--scale", "gpu", "--budget", "1"]
    assert result["runs"]["peri_variance"]["status"] == "not run: 20 s left"
    assert result["status"] == "some unfinished or not run"
    rows = CHECK["science_rows"]({"science": result})
    assert rows[0] == ("science: hybrid_depth --scale gpu --budget 1", "no verdict: ok", None)


def test_the_table_of_a_dry_run_judges_nothing(tmp_path):
    write_phases(tmp_path, "cpu-dry-run")
    args = args_of("--dry-run", "--out", str(tmp_path))
    phases = {p: {"status": "ok", "seconds": 1.0} for p in ("tests", "kernels", "train", "cli")}
    table = CHECK["write_table"](args, "CPU dry run", "cpu-dry-run", phases, 10.0, "2.x")
    assert "DRY RUN" in table and "MISSED" not in table and "| met |" not in table
    assert json.loads((tmp_path / "kernels" / "gpu_check-cpu-dry-run.json").read_text())["dry_run"] is True


@pytest.mark.slow
def test_a_dry_run_goes_end_to_end_on_the_cpu(tmp_path):
    """main() itself: the CLI phase (a 2-step CPU run) and one science plan, then the table, last."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path), "--only", "cli",
                           "science", "--science", "norm_types"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.rstrip().splitlines()[-1].startswith("| science: norm_types --scale gpu")
    assert (tmp_path / "kernels" / "gpu_check-cpu-dry-run.cli-summary.json").exists()
