"""normtrain-probe: on a tiny trained run (the layer-skip profile, probe.json, the figures, the CLI and its exit-2
refusals, the compare report), and its parts against independent computations (skipping, norm inputs and the
normalization without its affine part, the tanh fit)."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import normtrain
from normtrain.checkpoint import CKPT_NAME, load_checkpoint, save_checkpoint
from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.probe import probe
from normtrain.probe.cli import main
from normtrain.probe.inputs import ProbeRun
from normtrain.probe.layers import skipped
from normtrain.probe.norm_curves import NormInputs, fit_tanh, norm_curves, norm_modules, without_affine

_made: dict[str, Path] = {}  # trained once for this module, then copied


@pytest.fixture
def run_dir(tiny, tmp_path_factory, tmp_path) -> Path:
    """A fresh copy of a tiny Pre-LN run (2 blocks, d 32) trained for 40 steps."""
    if "run" not in _made:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # runs this small are much faster on one thread when the CPU is shared
        try:
            root = tmp_path_factory.mktemp("probe") / "run"
            normtrain.train(normtrain.compose([*tiny, "train.max_steps=40", "optim.lr=3e-3"]), run_dir=root)
        finally:
            torch.set_num_threads(threads)
        _made["run"] = root
    return Path(shutil.copytree(_made["run"], tmp_path / "run"))


def edit_checkpoint(run: Path, edit) -> None:
    """Rewrite the run's checkpoint after ``edit(state)`` (a new digest, so it still loads)."""
    state = load_checkpoint(run / CKPT_NAME)
    state.pop("digest")
    edit(state)
    save_checkpoint(run, state)


def test_probe_json_figures_and_the_run_s_own_windows(run_dir):
    result = probe(run_dir)
    out = run_dir / "probe"
    on_disk = json.loads((out / "probe.json").read_text())
    assert on_disk == json.loads(json.dumps(result))  # every number is in the file
    summary = json.loads((run_dir / "summary.json").read_text())
    # the same windows and model as the run's final evaluation: the same loss
    assert result["val_loss"] == pytest.approx(summary["final_val_loss"], rel=1e-6)
    assert result["eval_windows"] == summary["eval_windows"] == 8 and result["step"] == 40
    assert sorted(result) == sorted(["format", "run_dir", "step", "status", "label", "device", "eval_windows",
                                     "seq_len", "val_loss", "run_final_val_loss", "skip_means", "layers", "norms",
                                     "notes", "out_dir", "figures", "wall_time_s"])
    assert [r["layer"] for r in result["layers"]] == [0, 1]
    for r in result["layers"]:
        assert r["skip_delta"] == pytest.approx(r["skip_val_loss"] - result["val_loss"])
        assert 0 < r["block_cos"] < 1 and 0 < r["act_rms"] < r["act_absmax"]
    # a trained early block is used: skipping it costs a lot (0.7 nats on this run)
    assert result["layers"][0]["skip_delta"] > 0.1
    assert [n["name"] for n in result["norms"]] == ["blocks.0.norm1", "blocks.0.norm2", "blocks.1.norm1",
                                                    "blocks.1.norm2", "final_norm"]
    for n in result["norms"]:
        assert n["kind"] == "rmsnorm" and n["layer"] in (0, 1, None)
        assert len(n["x"]) == len(n["y"]) == min(1000, n["n_pairs"]) and len(n["curve"]["x"]) == 61
        assert n["fit"]["alpha"] > 0 and 0.9 < n["fit"]["r2"] <= 1 and n["fit"]["r2"] >= n["fit"]["r2_line"] - 1e-9
        # RMSNorm without its gain: x / rms(x), so each token's output has unit rms; the sample is rows of that
        assert np.sqrt(np.mean(np.square(n["y"]))) == pytest.approx(1.0, rel=0.2)
    assert result["figures"] == ["skip_loss.png", "stream.png", "norm_curves.png"]
    for name in result["figures"]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_skipping_a_block_that_is_the_identity_changes_nothing(run_dir):
    """Block 1 made the identity by construction: Pre-LN adds W_out·(...) of each sublayer to the stream, so with
    the attention's and the MLP's output matrices zeroed, x + 0 + 0 = x exactly. Skipping it must leave the eval
    loss unchanged (to the bit), while skipping the trained block 0 still hurts."""

    def zero_block_1(state):
        for key in ("blocks.1.attn.out_proj.weight", "blocks.1.mlp.down.weight"):
            state["model"][key] = torch.zeros_like(state["model"][key])

    edit_checkpoint(run_dir, zero_block_1)
    result = probe(run_dir, out=run_dir / "elsewhere")
    assert (run_dir / "elsewhere" / "probe.json").is_file() and not (run_dir / "probe").exists()
    identity, trained = result["layers"][1], result["layers"][0]
    assert identity["skip_val_loss"] == result["val_loss"] and identity["skip_delta"] == 0
    assert identity["block_cos"] == pytest.approx(1.0, abs=1e-6)
    assert trained["skip_delta"] > 0.1


def test_skipped_replaces_exactly_one_block_by_the_identity():
    torch.manual_seed(0)
    for placement in ("pre", "post"):  # Post-LN: its trailing norm goes with the block
        model = GPT(GPTConfig(n_layers=3, d_model=16, n_heads=2, seq_len=8, placement=placement)).eval()
        idx = torch.randint(0, 256, (2, 8))
        x = model.tok_emb(idx)
        expected = model.blocks[2](model.blocks[0](x))
        if model.final_norm is not None:
            expected = model.final_norm(expected)
        with skipped(model, 1):
            torch.testing.assert_close(model.hidden(idx), expected, rtol=0, atol=0)
        assert isinstance(model.blocks[1], type(model.blocks[0]))  # put back


def test_norm_inputs_see_the_fused_add_and_the_normalization_has_no_affine():
    """Post-LN's norms fuse the residual add (add_norm, no forward call): the hooks still see x + F(x). Gains and
    biases are random, so a normalization that kept them would not match (x − μ)/σ."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=16, n_heads=2, seq_len=8, placement="post",
                          norm=NormSpec("layernorm", eps=1e-5))).eval()
    for name, p in model.named_parameters():
        if "norm" in name:
            p.data.normal_()
    idx = torch.randint(0, 256, (2, 8))
    norms = norm_modules(model)
    assert [n for n, _ in norms] == ["blocks.0.norm1", "blocks.0.norm2", "blocks.1.norm1", "blocks.1.norm2"]
    with NormInputs(norms, rows=1000) as taps, torch.no_grad():
        model.hidden(idx)
    assert not any("add_norm" in vars(m) for _, m in norms)  # the fused path is back
    with torch.no_grad():
        x = model.tok_emb(idx)
        s = x + model.blocks[0].attn(x)
        kept = taps.inputs["blocks.0.norm1"]
        assert kept.shape == (16, 16)
        want = s.reshape(-1, 16)
        torch.testing.assert_close(kept[kept[:, 0].argsort()], want[want[:, 0].argsort()])
        plain = without_affine(model.blocks[0].norm1)(kept)
        reference = (kept - kept.mean(-1, keepdim=True)) / (kept.var(-1, unbiased=False, keepdim=True) + 1e-5).sqrt()
        torch.testing.assert_close(plain, reference, rtol=1e-5, atol=1e-5)
    assert model.blocks[0].norm1.weight is not None  # the model's own norm keeps its gain


def test_dyt_norms_fit_their_own_alpha():
    """Without its affine part DyT is tanh(α·x): the fit finds each norm's α and explains all of the variance. The
    block norms are depth-scaled (their 1/√ℓ is left out too) and QK-norm adds two per-head norms per block."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=2, d_model=32, n_heads=2, seq_len=16, qk_norm=True,
                          norm=NormSpec("dyt", alpha_init=0.5, depth_scaled=True)))
    for name, p in model.named_parameters():
        if name.endswith(".alpha"):
            p.data.uniform_(0.2, 2.0)
    idx = torch.randint(0, 256, (4, 17))
    run = ProbeRun(path=Path("."), model=model.eval(), config=None, step=0, status=None, summary={},
                   batches=[(idx[:, :-1], idx[:, 1:])], device=torch.device("cpu"))
    curves = norm_curves(run, windows=4, rows=64, points=100)
    assert [(c["name"], c["kind"]) for c in curves[:4]] == [
        ("blocks.0.attn.q_norm", "dyt"), ("blocks.0.attn.k_norm", "dyt"), ("blocks.0.norm1", "dyt, depth-scaled"),
        ("blocks.0.norm2", "dyt, depth-scaled")]
    assert len(curves) == 9 and curves[-1]["name"] == "final_norm" and curves[-1]["layer"] is None
    for c, (_, norm) in zip(curves, norm_modules(model), strict=True):
        alpha = getattr(norm, "inner", norm).alpha.item()
        assert c["fit"]["alpha"] == pytest.approx(alpha, rel=2e-3)
        assert c["fit"]["gamma"] == pytest.approx(1.0, rel=2e-3) and c["fit"]["r2"] > 0.99999
        assert len(c["x"]) == 100
    assert curves[2]["n_pairs"] == 64 * 32 and curves[0]["n_pairs"] == 64 * 16  # per-head rows for QK-norm


def test_fit_tanh_recovers_a_known_curve_and_a_line():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(5000) * 3
    fit = fit_tanh(x, 2.5 * np.tanh(0.7 * x) + 0.01 * rng.standard_normal(5000))
    assert fit["alpha"] == pytest.approx(0.7, rel=1e-2) and fit["gamma"] == pytest.approx(2.5, rel=1e-2)
    assert fit["r2"] > 0.9999 > fit["r2_line"]
    line = fit_tanh(x, 0.3 * x)
    assert line["r2_line"] == pytest.approx(1.0) and line["r2"] > 0.999  # a tanh of small α is a line


def test_the_cli_prints_the_table_and_compare_shows_the_figures(run_dir, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([str(run_dir), "--batch-size", "3"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "full model:" in out and "blocks.1.norm2" in out and f"to {run_dir / 'probe'}" in out
    assert json.loads((run_dir / "probe" / "probe.json").read_text())["eval_windows"] == 8  # 3 + 3 + 2

    from normtrain.compare import write_report

    page = write_report([run_dir], run_dir.parent / "report.html").read_text()
    data = json.loads(re.search(r'id="normtrain-data">(.*?)</script>', page, re.S)[1])
    ids = [f["id"] for f in data["figures"]]
    assert ids[-5:] == ["fig-probe-skip", "fig-probe-block-cos", "fig-probe-act-rms", "fig-probe-act-absmax",
                        "fig-probe-norms"]
    assert [r["layer"] for r in data["datasets"]["probe:layers"]] == [0, 1]
    assert {r["norm"] for r in data["datasets"]["probe:norms"]} == {"blocks.0.norm1", "blocks.0.norm2",
                                                                   "blocks.1.norm1", "blocks.1.norm2", "final_norm"}
    assert "The trained models, probed" in page


def refusal(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("normtrain-probe: ") and "Traceback" not in err
    return err


def test_folders_that_cannot_be_probed_exit_2(run_dir, tmp_path, capsys):
    assert "is not a folder" in refusal([str(tmp_path / "absent")], capsys)
    (tmp_path / "empty").mkdir()
    assert "is not a run folder" in refusal([str(tmp_path / "empty")], capsys)

    no_ckpt = Path(shutil.copytree(run_dir, tmp_path / "no_ckpt"))
    (no_ckpt / CKPT_NAME).unlink()
    assert "holds no checkpoint (ckpt.pt)" in refusal([str(no_ckpt)], capsys)
    summary = json.loads((no_ckpt / "summary.json").read_text())
    (no_ckpt / "summary.json").write_text(json.dumps({**summary, "status": "diverged", "diverged_at_step": 17}))
    err = refusal([str(no_ckpt)], capsys)
    assert "diverged at step 17 and kept no finite checkpoint" in err and "train.ckpt_every" in err

    edit_checkpoint(run_dir, lambda s: s["config"]["data"].update(path=str(tmp_path / "gone")))
    err = refusal([str(run_dir)], capsys)
    assert "the run's corpus (data=local_text" in err and "gone" in err


def test_a_sweep_folder_probes_each_run_and_names_those_it_cannot(run_dir, tmp_path, capsys):
    """Issue 38: normtrain-probe refused a sweep folder, so probing a sweep took a shell loop."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("{}\n")
    for name in ("0_pre", "1_pre"):
        shutil.copytree(run_dir, sweep / name)
    diverged = Path(shutil.copytree(run_dir, sweep / "2_diverged"))
    (diverged / CKPT_NAME).unlink()
    summary = json.loads((diverged / "summary.json").read_text())
    (diverged / "summary.json").write_text(json.dumps({**summary, "status": "diverged", "diverged_at_step": 9}))
    (sweep / "3_killed" / ".hydra").mkdir(parents=True)  # a job killed before its first log step

    with pytest.raises(SystemExit) as exit_:
        main([str(sweep), "--batch-size", "4"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"normtrain-probe: skipped: {sweep / '3_killed'}: no summary.json or metrics.jsonl (killed " \
                     "before its first log step?)"
    assert out[1] == "normtrain-probe: [1/3] 0_pre: probing ..."  # a line as each run starts, and as it ends
    assert out[2].startswith("normtrain-probe: [1/3] 0_pre: step 40, full model ") and "2 blocks" in out[2]
    assert out[6].startswith("normtrain-probe: [3/3] 2_diverged: skipped: the run in ")
    assert "diverged at step 9 and kept no finite checkpoint" in out[6]
    assert out[-1].startswith(f"normtrain-probe: probed 2 run folders in {sweep}, skipped 2 (above). ")
    assert [p.parent.parent.name for p in sorted(sweep.glob("*/probe/probe.json"))] == ["0_pre", "1_pre"]

    from normtrain.compare import write_report

    page = write_report([sweep], tmp_path / "report.html").read_text()
    assert "Probed runs (2 of 3):" in page and page.count("(seed 0, step 40, eval loss ") == 2

    with pytest.raises(SystemExit) as exit_:  # --out: a folder per run under it
        main([str(sweep), "--out", str(tmp_path / "out")])
    assert sorted(p.parent.name for p in (tmp_path / "out").glob("*/probe.json")) == ["0_pre", "1_pre"]

    for name in ("0_pre", "1_pre"):
        (sweep / name / CKPT_NAME).unlink()
    err = refusal([str(sweep)], capsys)  # nothing could be probed: exit 2, every reason
    assert err.startswith(f"normtrain-probe: none of the 3 run folders in {sweep} could be probed")
    assert err.count("\n  skipped: ") == 4 and "0_pre: " in err and "holds no checkpoint" in err


@pytest.mark.slow
def test_the_command_end_to_end_and_its_help_without_torch(run_dir, tmp_path):
    exe = Path(sys.executable).with_name("normtrain-probe")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "normtrain.probe"]
    proc = subprocess.run([*command, str(run_dir), "--out", str(tmp_path / "p"), "--device", "cpu"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p" / "probe.json").is_file() and "    0 " in proc.stdout
    script = ("import sys; from normtrain.probe.cli import main\n"
              "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
              "print(sorted({'torch', 'hydra', 'matplotlib'} & set(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "usage: normtrain-probe" in proc.stdout and proc.stdout.strip().endswith("[]")
    assert math.isfinite(json.loads((tmp_path / "p" / "probe.json").read_text())["val_loss"])
