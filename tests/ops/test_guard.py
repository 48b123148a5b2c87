"""The guard of norm.impl=auto (normtrain/ops/guard.py): the check passes a correct kernel in Triton's CPU interpreter,
a wrong or failing kernel sends the run to torch naming why, and summary.json records what ran."""

from __future__ import annotations

import json
import os

import pytest
import torch
from test_rmsnorm import needs_triton

import normtrain
from normtrain.ops import guard
from normtrain.ops import rmsnorm_triton as T

# The check's own device: the CPU in Triton's interpreter (CI), the GPU under TRITON_INTERPRET=0 (scripts/gpu_check.py)
CPU = torch.device("cuda" if os.environ.get("TRITON_INTERPRET") == "0" and torch.cuda.is_available() else "cpu")


@pytest.fixture
def fresh(monkeypatch):
    """No verdict kept from another test; the check allowed on the CPU (in the interpreter)."""
    monkeypatch.setattr(guard, "_VERDICTS", {})
    monkeypatch.setattr(guard, "GPU_TYPES", ("cuda", "cpu"))


def off_by_one_percent(monkeypatch):
    forward = T.forward
    monkeypatch.setattr(T, "forward", lambda *a, **k: (lambda y, s: (y * 1.01, s))(*forward(*a, **k)))


def dweight_changed(monkeypatch, change):
    """The kernels' backward, with dweight replaced by ``change(dw, dy, xs)``."""
    backward = T.backward

    def patched(dy, ds, xs, weight, eps, *rest, **kw):
        dx, dr, dw = backward(dy, ds, xs, weight, eps, *rest, **kw)
        return dx, dr, (None if dw is None else change(dw, dy, xs, eps).to(dw.dtype))
    monkeypatch.setattr(T, "backward", patched)


def summed_in_another_order(dw, dy, xs, eps):
    """dweight as a plain sequential fp32 sum over the rows, last row first: the least accurate order."""
    xf = xs.float().reshape(-1, xs.shape[-1])
    terms = dy.float().reshape(xf.shape) * xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    return terms.flip(0).cumsum(0)[-1]


def fails_to_compile(monkeypatch):
    def broken(*_, **__):
        raise RuntimeError("PTX .version 8.7 does not support .target sm_120\nsecond line")
    monkeypatch.setattr(T, "forward", broken)


@needs_triton
def test_a_correct_kernel_passes_at_the_models_shapes(fresh):
    choice = guard.verdict(CPU, [(32, None), (48, 6)], (torch.float32, torch.bfloat16), rows=16, eps=1e-5)
    assert choice == guard.Choice("triton", f"norm.impl=auto: the Triton kernel matched torch on {CPU} (width 32, "
                                            "48, float32, bfloat16)")


@needs_triton
def test_dweight_summed_in_another_order_passes_and_one_percent_off_falls_back(fresh, monkeypatch):
    """The bound on dweight grows with the rows summed: a correct kernel summing them in any order passes at a
    real micro-batch's rows, where an absolute bound failed a correct kernel (an H200, 16384 rows); 1% off fails."""
    dweight_changed(monkeypatch, summed_in_another_order)
    assert guard.verdict(CPU, [(48, None)], (torch.float32, torch.bfloat16), rows=4096, eps=1e-5).impl == "triton"
    monkeypatch.setattr(guard, "_VERDICTS", {})
    dweight_changed(monkeypatch, lambda dw, *_: dw * 1.01)
    choice = guard.verdict(CPU, [(48, None)], (torch.float32,), rows=4096, eps=1e-5)
    assert choice.fallback and choice.why.startswith("norm.impl=auto fell back to torch: dweight differs from torch "
                                                     "(width 48, float32): max error")


@needs_triton
def test_a_wrong_kernel_falls_back_to_torch(fresh, monkeypatch):
    right = T.forward
    off_by_one_percent(monkeypatch)
    choice = guard.verdict(CPU, [(32, None)], (torch.float32,), rows=16, eps=1e-5)
    assert choice.impl == "torch" and choice.fallback
    assert choice.why.startswith("norm.impl=auto fell back to torch: y differs from torch (width 32, float32): "
                                 "max error")
    monkeypatch.setattr(T, "forward", right)  # the verdict is kept for the process: not checked again
    assert guard.verdict(CPU, [(32, None)], (torch.float32,), rows=16, eps=1e-5) is choice


@needs_triton
def test_a_kernel_that_fails_to_compile_falls_back_to_torch(fresh, monkeypatch):
    fails_to_compile(monkeypatch)
    choice = guard.verdict(CPU, [(32, None)], (torch.float32,), rows=16, eps=1e-5)
    assert choice.why == ("norm.impl=auto fell back to torch: the kernel failed (width 32, float32): RuntimeError: "
                          "PTX .version 8.7 does not support .target sm_120")


@needs_triton
def test_a_kernel_failing_without_a_message_falls_back_naming_the_error(fresh, monkeypatch):
    def bare(*_, **__):
        raise AssertionError  # a failed assert in a compiler often carries no message
    monkeypatch.setattr(T, "forward", bare)
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
    cfg = normtrain.compose([*tiny, "train.max_steps=2", "train.device=cpu"])
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


@needs_triton
def test_a_compiled_run_is_told_that_its_compiled_steps_use_inductors_norm(fresh):
    """Under torch.compile auto runs torch's formula (ops/rmsnorm.py's rule): summary.json must not say the kernel
    ran everywhere; the check still runs, for the steps that run eagerly."""
    model = normtrain.build_model(normtrain.compose(["model.n_layers=1", "model.d_model=32", "model.n_heads=2"]))
    eager = guard.guard_norms(model, "auto", CPU, rows=8)
    compiled = guard.guard_norms(model, "auto", CPU, rows=8, compiled=True)
    assert eager.impl == compiled.impl == "triton" and "inductor" not in eager.why
    assert compiled.why.startswith(eager.why) and "compiled steps run inductor's own norm" in compiled.why
