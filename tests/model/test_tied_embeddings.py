"""``model.tie_embeddings``: one Parameter for the token embedding and the LM head, counted once (parameters, the
optimizer's groups), learning from both of its uses, saved and loaded under either name set; the init draws the
same blocks as the untied model of the same seed; nGPT refuses it."""

from __future__ import annotations

import pytest
import torch

from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.training.optim import build_optimizer, muon_split

V, D = 256, 32


def tiny(tied: bool, seed: int = 0, **kw) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(n_layers=2, d_model=D, n_heads=2, seq_len=16, tie_embeddings=tied, **kw))


def test_the_head_is_the_embedding_one_parameter_counted_once():
    tied, untied = tiny(True), tiny(False)
    assert tied.lm_head.weight is tied.tok_emb.weight
    assert untied.lm_head.weight is not untied.tok_emb.weight
    assert tied.num_params() == untied.num_params() - V * D
    assert sum(p is tied.tok_emb.weight for p in tied.parameters()) == 1
    names = [n for n, _ in tied.named_parameters()]
    assert "tok_emb.weight" in names and "lm_head.weight" not in names  # named once


def test_both_uses_train_the_one_matrix():
    """logits = E·h and x_0 = E[idx]: the gradient of E is the sum of the head's and the lookup's."""
    m = tiny(True)
    idx = torch.randint(0, V, (2, 16))
    m(idx, idx)[1].backward()
    both = m.tok_emb.weight.grad.clone()
    m.zero_grad()
    h = m.hidden(idx)
    torch.nn.functional.cross_entropy((h @ m.tok_emb.weight.detach().t()).flatten(0, 1), idx.flatten()).backward()
    lookup = m.tok_emb.weight.grad.clone()  # the lookup's share alone (the head's weight detached)
    assert lookup.abs().sum() > 0 and not torch.allclose(both, lookup)
    for opt_name in ("adamw", "muon"):
        opt = build_optimizer(m, 1e-3, (0.9, 0.95), 1e-8, 0.1, name=opt_name)
        groups = opt.param_groups if opt_name == "adamw" else opt.adamw.param_groups
        assert sum(p is m.tok_emb.weight for g in groups for p in g["params"]) == 1
    assert [p is m.tok_emb.weight for p in m.io_parameters()] == [True]  # one tensor (no learned positions)
    hidden, rest = muon_split(m)
    assert all(p is not m.tok_emb.weight for p in hidden) and any(p is m.tok_emb.weight for p in rest)


def test_the_same_seed_draws_the_same_blocks_and_the_tied_matrix_is_the_heads_draw():
    """The init's order does not depend on the tie: a tied/untied pair of one seed differs in the embedding only
    (the tied matrix is what the untied model's head drew; xavier and gpt2 alike)."""
    for init in ("xavier", "gpt2"):
        tied, untied = tiny(True, init=init), tiny(False, init=init)
        a, b = tied.state_dict(), untied.state_dict()
        assert set(a) == set(b)
        for name in a:
            if name != "tok_emb.weight":
                assert torch.equal(a[name], b[name]), (init, name)
        assert torch.equal(a["tok_emb.weight"], b["lm_head.weight"])


def test_the_state_dict_loads_with_both_names_or_the_embeddings_alone():
    m = tiny(True)
    state = m.state_dict()
    assert state["lm_head.weight"].data_ptr() == state["tok_emb.weight"].data_ptr()  # one tensor, two names
    unique = m.unique_state_dict()
    assert "lm_head.weight" not in unique and set(unique) == set(state) - {"lm_head.weight"}
    for saved in (state, unique):
        fresh = tiny(True, seed=1)
        fresh.load_state_dict({k: v.clone() for k, v in saved.items()})
        assert fresh.lm_head.weight is fresh.tok_emb.weight
        assert torch.equal(fresh.lm_head.weight, m.tok_emb.weight)
    untied = tiny(False).state_dict()
    assert tiny(False).unique_state_dict().keys() == untied.keys()
    del untied["lm_head.weight"]
    with pytest.raises(RuntimeError, match='Missing key.*"lm_head.weight"'):  # an untied model needs its own head
        tiny(False).load_state_dict(untied)


def test_a_cast_and_a_copy_keep_the_tie():
    m = tiny(True).to(torch.bfloat16)
    assert m.lm_head.weight is m.tok_emb.weight and m.tok_emb.weight.dtype == torch.bfloat16
    import copy

    c = copy.deepcopy(m)
    assert c.lm_head.weight is c.tok_emb.weight


def test_ngpt_refuses_a_tie():
    with pytest.raises(ValueError, match="placement ngpt keeps its own embedding and LM head"):
        tiny(True, placement="ngpt", norm=NormSpec("l2", gain="none"))
