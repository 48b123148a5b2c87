"""QK-Clip on a hand-built attention whose max logits are known, its refusal under QK-norm, and in a run."""

import math

import pytest
import torch

import normtrain
from normtrain.config import validate
from normtrain.model.attention import CausalSelfAttention
from normtrain.training.qk_clip import QKClip
from normtrain.util.errors import ConfigError

# Two heads of two features; W_q = I, W_k = 2·I, no RoPE. Tokens x0 = (3, 0, 1, 0), x1 = (0, 4, 0, 1).
# Head 0 reads features 0-1: q_i·k_j = 2·x_i[:2]·x_j[:2] over the causal pairs (0,0), (1,0), (1,1) = 18, 0, 32,
# so S_0 = 32/√2; head 1 reads features 2-3: 2, 0, 2, so S_1 = 2/√2.
X = torch.tensor([[[3.0, 0.0, 1.0, 0.0], [0.0, 4.0, 0.0, 1.0]]])
S = (32 / math.sqrt(2), 2 / math.sqrt(2))
TAU, ALPHA = 8.0, 0.3  # γ_0 = τ/S_0 = √2/4, γ_1 = 1; α ≠ 0.5, so exponents swapped between q and k show


def hand_built(softcap: float = 0.0) -> CausalSelfAttention:
    attn = CausalSelfAttention(4, 2, max_len=2, rope=False, softcap=softcap)
    with torch.no_grad():
        attn.q_proj.weight.copy_(torch.eye(4))
        attn.k_proj.weight.copy_(2 * torch.eye(4))
    return attn


@pytest.mark.parametrize("softcap", [0.0, 4.0])
def test_qk_clip_rescales_the_head_over_tau_by_gamma_to_the_alpha_and_one_minus_alpha(softcap):
    """With a soft-cap of 4 (< τ) the capped logits never reach τ: the clip must read the raw ones."""
    attn = hand_built(softcap)
    clip = QKClip([attn], TAU, ALPHA)
    attn(X)
    assert attn.logit_max.tolist() == pytest.approx(S)
    gamma = clip.apply()
    g0 = math.sqrt(2) / 4
    assert gamma[0].tolist() == pytest.approx([g0, 1.0])
    want_q = torch.diag(torch.tensor([g0 ** ALPHA] * 2 + [1.0] * 2))
    want_k = 2 * torch.diag(torch.tensor([g0 ** (1 - ALPHA)] * 2 + [1.0] * 2))
    torch.testing.assert_close(attn.q_proj.weight, want_q)
    torch.testing.assert_close(attn.k_proj.weight, want_k)
    attn(X)
    assert attn.take_logit_max().tolist() == pytest.approx([TAU, S[1]])  # the clipped head now peaks at τ
    assert clip.apply()[0].tolist() == pytest.approx([1.0, 1.0])  # nothing over τ: nothing changes


def test_a_head_under_tau_and_an_unseen_step_change_nothing():
    attn = hand_built()
    clip = QKClip([attn], 100.0, ALPHA)
    before = attn.q_proj.weight.clone()
    with torch.no_grad():
        attn(X)  # evaluation: not a training pass
    assert clip.apply().tolist() == [[1.0, 1.0]] and torch.equal(attn.q_proj.weight, before)


def test_qk_clip_refuses_qk_norm_which_undoes_it():
    attn = CausalSelfAttention(4, 2, max_len=2, rope=False, qk_norm="per_head")
    with pytest.raises(ConfigError, match="divides that scale out again"):
        QKClip([attn], TAU)
    with pytest.raises(ConfigError) as err:
        validate(normtrain.compose(["optim.qk_clip=100", "model.qk_norm=full"]))
    assert "model.qk_norm=full normalizes q and k, dividing that scale out again" in str(err.value)


@pytest.mark.parametrize("overrides,needle", [
    (["optim.qk_clip=-1"], "optim.qk_clip=-1.0: QK-Clip's threshold τ must be a finite number >= 0"),
    (["optim.qk_clip=100", "optim.qk_clip_alpha=1.5"], "optim.qk_clip_alpha=1.5: QK-Clip's α"),
    (["optim.qk_clip_alpha=0.3"], "optim.qk_clip_alpha=0.3 shapes QK-Clip, which optim.qk_clip=0 leaves off"),
])
def test_bad_qk_clip_keys_are_refused(overrides, needle):
    with pytest.raises(ConfigError) as err:
        validate(normtrain.compose(overrides))
    assert len(err.value.problems) == 1 and needle in str(err.value), err.value
