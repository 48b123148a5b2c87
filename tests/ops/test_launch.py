"""The direct launcher (normtrain/ops/launch.py) against a stand-in for triton's jit function: the first call of a
specialization goes through triton, later ones straight to the kept launcher with exactly triton's arguments, and
anything triton would specialize differently (alignment, an int's class, a dtype, the device) goes through triton
again. The real launch is checked on a GPU by the whole of tests/ops (TRITON_INTERPRET=0)."""

from __future__ import annotations

import pytest
import torch

from normtrain.ops import launch


class tl:  # noqa: N801 - stands in for triton.language in the annotations below (never evaluated)
    constexpr = None


def kernel_body(X, Y, n, stride, eps, HAS_W: tl.constexpr, BLOCK: tl.constexpr):  # noqa: N803
    pass


class Compiled:
    """A compiled variant: its launcher records each direct launch."""

    def __init__(self, calls):
        self.function, self.packed_metadata = object(), object()
        self.run = lambda *a: calls.append(("direct", a))


class JITFunction:  # named as triton's class: launch.Kernel launches directly only these
    def __init__(self, do_not_specialize=()):
        self.fn, self.do_not_specialize, self.calls = kernel_body, list(do_not_specialize), []

    def __getitem__(self, grid):
        def run(*args, num_warps, **consts):
            self.calls.append(("triton", grid, args, consts, num_warps))
            return Compiled(self.calls)
        return run


@pytest.fixture
def kernel(monkeypatch):
    monkeypatch.setattr(launch, "_DEVICE", lambda: 0)
    monkeypatch.setattr(launch, "_STREAM", lambda device: 1234)
    monkeypatch.setattr(launch, "_hooks_set", lambda: False)
    monkeypatch.setattr(launch, "_launcher_convention_known", lambda: True)
    return launch.Kernel(JITFunction(do_not_specialize=["n"]))


def test_the_second_call_of_a_specialization_launches_directly(kernel):
    x, y = torch.zeros(64), torch.zeros(64)
    for _ in range(3):
        kernel(5, (x, y, 64, 32, 1e-6), (True, 128), 4)
    triton, *direct = kernel.fn.calls
    assert triton == ("triton", (5,), (x, y, 64, 32, 1e-6), {"HAS_W": True, "BLOCK": 128}, 4)
    compiled_args = direct[0][1]
    assert [c[0] for c in direct] == ["direct", "direct"]
    assert compiled_args[:4] == (5, 1, 1, 1234) and compiled_args[6:9] == (None, None, None)
    assert compiled_args[9:] == (x, y, 64, 32, 1e-6, True, 128)  # runtime args, then constexprs, in order


@pytest.mark.parametrize("change", ["misaligned", "stride_one", "stride_odd", "dtype", "consts", "warps", "device"])
def test_what_triton_specializes_on_goes_through_triton_again(kernel, change, monkeypatch):
    x, y = torch.zeros(64), torch.zeros(64)
    args, consts, warps = [x, y, 64, 32, 1e-6], (True, 128), 4
    kernel(5, tuple(args), consts, warps)
    if change == "misaligned":
        args[0] = x[1:]  # 4 bytes in: no longer 16-byte aligned
    elif change == "stride_one":
        args[3] = 1
    elif change == "stride_odd":
        args[3] = 33
    elif change == "dtype":
        args[1] = y.double()
    elif change == "consts":
        consts = (False, 128)
    elif change == "warps":
        warps = 8
    else:
        monkeypatch.setattr(launch, "_DEVICE", lambda: 1)
    kernel(5, tuple(args), consts, warps)
    assert [c[0] for c in kernel.fn.calls] == ["triton", "triton"]


def test_ints_triton_does_not_specialize_share_a_variant(kernel):
    x, y = torch.zeros(64), torch.zeros(64)
    kernel(5, (x, y, 64, 32, 1e-6), (True, 128), 4)
    kernel(7, (x, y, 17, 32, 3e-5), (True, 128), 4)  # n is do_not_specialize; eps a float; the grid is free
    assert [c[0] for c in kernel.fn.calls] == ["triton", "direct"]
    kernel(7, (x, y, 2**31, 32, 3e-5), (True, 128), 4)  # but a 64-bit n is another signature
    assert kernel.fn.calls[-1][0] == "triton"


def test_triton_launches_when_asked_or_when_a_hook_is_set(kernel, monkeypatch):
    x, y = torch.zeros(64), torch.zeros(64)
    call = lambda: kernel(5, (x, y, 64, 32, 1e-6), (True, 128), 4)  # noqa: E731
    call()
    launch.set_direct(False)
    try:
        call()
    finally:
        launch.set_direct(True)
    monkeypatch.setattr(launch, "_hooks_set", lambda: True)
    call()
    assert [c[0] for c in kernel.fn.calls] == ["triton"] * 3


def test_constexprs_must_come_last():
    def bad(X, BLOCK: tl.constexpr, n):  # noqa: N803
        pass

    jit = JITFunction()
    jit.fn = bad
    with pytest.raises(ValueError, match="constexpr parameters must come last"):
        launch.Kernel(jit)


def test_an_empty_hook_chain_is_no_hook():
    """Triton 3.6+ keeps launch hooks in chains that exist (empty) by default."""
    pytest.importorskip("triton")
    from triton import knobs

    chain = knobs.runtime.launch_enter_hook
    if not hasattr(chain, "add"):
        pytest.skip("this triton has no hook chains")
    assert not launch._hooks_set()
    hook = lambda *_: None  # noqa: E731
    chain.add(hook)
    try:
        assert launch._hooks_set()
    finally:
        chain.remove(hook)
