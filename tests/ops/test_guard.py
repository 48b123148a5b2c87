"""The guard of norm.impl=auto (normtrain/ops/guard.py): the check passes a correct kernel in Triton's CPU interpreter,
a wrong or failing kernel sends the run to torch naming why, and summary.json records what ran."""

from __future__ import annotations

import json

import pytest
import torch
from test_rmsnorm import needs_triton

import normtrain
from normtrain.ops import guard
from normtrain.ops import rmsnorm as R

CPU = torch.device("cpu")


@pytest.fixture
def fresh(monkeypatch):
    """No verdict kept from another test; the check allowed on the CPU (in the interpreter)."""
    monkeypatch.setattr(guard, "_VERDICTS", {})
    monkeypatch.setattr(guard, "GPU_TYPES", ("cuda", "cpu"))


def off_by_one_percent(monkeypatch):
    forward = R._forward
    monkeypatch.setattr(R, "_forward", lambda *a: (lambda y, s, r: (y * 1.01, s, r))(*forward(*a)))


def fails_to_compile(monkeypatch):
    def broken(*_):
        raise RuntimeError("PTX .version 8.7 does not support .target sm_120\nsecond line")
    monkeypatch.setattr(R, "_forward", broken)


@needs_triton
def test_a_correct_kernel_passes_at_the_models_shapes(fresh):
    choice = guard.verdict(CPU, [(32, None), (48, 6)], (torch.float32, torch.bfloat16), rows=16, eps=1e-5)
    assert choice == guard.Choice("triton", "norm.impl=auto: the Triton kernel matched torch on cpu (width 32, 48, "
                                            "float32, bfloat16)")


@needs_triton
def test_a_wrong_kernel_falls_back_to_torch(fresh, monkeypatch):
    right = R._forward
    off_by_one_percent(monkeypatch)
    choice = guard.verdict(CPU, [(32, None)], (torch.float32,), rows=16, eps=1e-5)
    assert choice.impl == "torch" and choice.fallback
    assert choice.why.startswith("norm.impl=auto fell back to torch: y differs from torch (width 32, float32): "
                                 "max error")
    monkeypatch.setattr(R, "_forward", right)  # the verdict is kept for the process: not checked again
    assert guard.verdict(CPU, [(32, None)], (torch.float32,), rows=16, eps=1e-5) is choice


@needs_triton
def test_a_kernel_that_fails_to_compile_falls_back_to_torch(fresh, monkeypatch):
    fails_to_compile(monkeypatch)
    choice = guard.verdict(CPU, [(32, None)], (torch.float32,), rows=16, eps=1e-5)
    assert choice.why == ("norm.impl=auto fell back to torch: the kernel failed (width 32, float32): RuntimeError: "
                          "PTX .version 8.7 does not support .target sm_120")


@needs_triton
def test_a_kernel_failing_without_a_message_falls_back_naming_the_error(fresh, monkeypatch):
    def bare(*_):
        raise AssertionError  # a failed assert in a compiler often carries no message
    monkeypatch.setattr(R, "_forward", bare)
    choice = guard.verdict(CPU, [(32, None)], (torch.float32,), rows=16, eps=1e-5)
    assert choice.why == "norm.impl=auto fell back to torch: the kernel failed (width 32, float32): AssertionError"


def test_guard_norms_switches_only_a_failed_auto_to_torch(fresh, monkeypatch):
    fails_to_compile(monkeypatch)
    model = normtrain.build_model(normtrain.compose(["model.n_layers=2", "model.d_model=32", "model.n_heads=2",
                                                     "model.qk_norm=per_head"]))
    norms = [m for m in model.modules() if getattr(m, "supports_triton", False)]
    assert {m.dim for m in norms} == {32, 16} and {m.impl for m in norms} == {"auto"}
    assert guard.guard_norms(model, "triton", CPU, rows=8).why == "norm.impl=triton"
    choice = guard.guard_norms(model, "auto", CPU, rows=8)
    assert choice.fallback and "RuntimeError: PTX" in choice.why and {m.impl for m in norms} == {"torch"}
    layernorm = normtrain.build_model(normtrain.compose(["model.n_layers=1", "model.d_model=32", "norm=layernorm"]))
    assert guard.guard_norms(layernorm, "auto", CPU, rows=8).impl == "torch"


def test_summary_and_log_record_which_norm_ran_and_why(tiny, tmp_path, monkeypatch, capsys):
    cfg = normtrain.compose([*tiny, "train.max_steps=2"])
    normtrain.train(cfg, run_dir=tmp_path / "cpu")
    assert json.loads((tmp_path / "cpu" / "summary.json").read_text())["norm_impl"] == {
        "impl": "torch", "why": "norm.impl=auto on cpu: the Triton kernel is for CUDA", "fallback": False}

    monkeypatch.setattr(guard, "_VERDICTS", {})
    monkeypatch.setattr(guard, "GPU_TYPES", ("cuda", "cpu"))  # as on a GPU whose compiler rejects the kernel
    fails_to_compile(monkeypatch)
    capsys.readouterr()
    summary = normtrain.train(cfg, run_dir=tmp_path / "gpu")
    assert summary["status"] == "completed"
    assert summary["norm_impl"]["impl"] == "torch" and summary["norm_impl"]["fallback"]
    warned = [line for line in capsys.readouterr().err.splitlines() if "fell back" in line]
    assert warned == [f"normtrain: warning: {summary['norm_impl']['why']}"]
