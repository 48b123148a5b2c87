import pytest
import torch

from normtrain.model import GPT, GPTConfig
from normtrain.training.optim import MuonSettings, build_optimizer, lr_at, muon_split, schedule_warnings, set_lr


def test_weight_decay_only_on_matrices():
    model = GPT(GPTConfig(n_layers=1, d_model=16, n_heads=2, seq_len=8))
    opt = build_optimizer(model, 1e-3, (0.9, 0.95), 1e-8, 0.1)
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decayed["params"]) and all(p.dim() == 1 for p in plain["params"])
    assert len(decayed["params"]) + len(plain["params"]) == len(list(model.parameters()))


def lr(step, schedule, warmup=10, max_steps=110):
    return lr_at(step, lr=1.0, warmup_steps=warmup, max_steps=max_steps, schedule=schedule, min_lr_ratio=0.1)


@pytest.mark.parametrize("schedule", ["cosine", "constant", "inverse_sqrt", "wsd"])
def test_linear_warmup(schedule):
    assert [lr(s, schedule) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])


def test_cosine_decays_to_min_ratio():
    assert lr(10, "cosine") == pytest.approx(1.0)
    assert lr(60, "cosine") == pytest.approx(0.55)
    assert lr(110, "cosine") == pytest.approx(0.1)


def test_constant_and_inverse_sqrt():
    assert lr(100, "constant") == 1.0
    assert lr(39, "inverse_sqrt") == pytest.approx((10 / 40) ** 0.5)
    assert lr_at(0, lr=1.0, warmup_steps=0, max_steps=10, schedule="inverse_sqrt") == 1.0


def test_wsd_holds_the_peak_then_decays_linearly_over_the_last_fraction():
    # 110 steps, a 10-step warm-up, the last 20% (22 steps) decaying: stable through step 88, then linear to 0.1
    assert [lr(s, "wsd") for s in (10, 50, 88)] == [1.0, 1.0, 1.0]
    assert lr(99, "wsd") == pytest.approx(1 - 0.9 * 11 / 22) and lr(110, "wsd") == pytest.approx(0.1)
    steps = [lr(s, "wsd") for s in range(88, 111)]
    assert all(b < a for a, b in zip(steps, steps[1:], strict=False))  # falls at every step of the decay
    whole = lr_at(5, lr=1.0, warmup_steps=0, max_steps=10, schedule="wsd", min_lr_ratio=0.0, decay_fraction=1.0)
    assert whole == pytest.approx(0.5)  # decay_fraction 1: a linear decay from the first step
    # a decay longer than the run after its warm-up starts where the warm-up ends, never inside it
    assert lr_at(10, lr=1.0, warmup_steps=10, max_steps=20, schedule="wsd", decay_fraction=0.9) == 1.0


def test_unknown_schedule():
    with pytest.raises(ValueError, match="allowed"):
        lr(50, "linear")


def test_optimizer_steps():
    model = GPT(GPTConfig(n_layers=1, d_model=16, n_heads=2, seq_len=8))
    opt = build_optimizer(model, 1e-2, (0.9, 0.95), 1e-8, 0.0)
    x = torch.randint(0, 256, (2, 8))
    before = model(x, x)[1].item()
    for _ in range(5):
        model(x, x)[1].backward()
        opt.step()
        opt.zero_grad()
    assert model(x, x)[1].item() < before


@pytest.mark.parametrize("independent", [False, True])
def test_weight_decay_per_step_follows_its_formula(independent):
    """With zero gradients Adam's update is 0, so one step only decays: w ← w·(1 − lr_t·wd) (AdamW), or
    w ← w·(1 − wd·lr_t/lr) with independent_wd (Wortsman et al. 2023, §3.2.2)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=1, d_model=16, n_heads=2, seq_len=8))
    peak, wd = 3e-3, 0.1
    opt = build_optimizer(model, peak, (0.9, 0.95), 1e-8, wd, independent_wd=independent)
    lr_t = lr_at(2, lr=peak, warmup_steps=10, max_steps=100, schedule="cosine")  # mid warm-up: 0.3 × peak
    for group in opt.param_groups:
        group["lr"] = lr_t
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    factor = 1 - (wd * lr_t / peak if independent else lr_t * wd)
    for name, p in model.named_parameters():
        expected = before[name] * factor if p.dim() >= 2 else before[name]
        torch.testing.assert_close(p.detach(), expected, rtol=1e-6, atol=0)
    assert factor == pytest.approx(0.97 if independent else 1 - 9e-5)  # lr_t = 9e-4


def test_an_overlapping_warm_up_only_ramps_a_schedule_counted_from_step_0():
    """Two runs that differ in their warm-up differ in the ramp alone: after it, the same lr at every step."""
    def at(step, warmup):
        return lr_at(step, lr=1.0, warmup_steps=warmup, max_steps=100, schedule="cosine", min_lr_ratio=0.1,
                     warmup_overlaps=True)

    cold, warm = [at(s, 0) for s in range(100)], [at(s, 10) for s in range(100)]
    assert warm[10:] == cold[10:] and cold[0] == 1.0 and cold[-1] == pytest.approx(0.1, abs=1e-3)
    assert warm[:10] == pytest.approx([(s + 1) / 10 * cold[s] for s in range(10)])
    # the default warm-up precedes the schedule: its decay starts after the ramp, so the two differ after it too
    assert lr_at(50, lr=1.0, warmup_steps=10, max_steps=100, schedule="cosine") > cold[50]


def muon_expected(model):
    """By name, independently of ``muon_split``: the blocks' 2-D weights and OSP's projections are hidden
    matrices; the embeddings, the LM head and every vector (gains, biases, scalars) are not."""
    return {name for name, p in model.named_parameters()
            if name.startswith(("blocks.", "emb_in.", "emb_out.")) and p.dim() == 2}


MORE = {"pos": "learned", "bias": True, "qk_norm": "per_head", "attn_gate": "head", "emb_proj": True}


@pytest.mark.parametrize("overrides", [{}, MORE])
def test_muon_takes_the_hidden_matrices_and_adamw_the_rest(overrides):
    model = GPT(GPTConfig(n_layers=2, d_model=16, n_heads=2, seq_len=8, **overrides))
    opt = build_optimizer(model, 1e-3, (0.9, 0.95), 1e-8, 0.1, name="muon", muon=MuonSettings(lr=0.05))
    names = {id(p): n for n, p in model.named_parameters()}
    (muon,), adamw = opt.muon.param_groups, opt.adamw.param_groups
    assert {names[id(p)] for p in muon["params"]} == muon_expected(model)
    assert ("emb_in.weight" in muon_expected(model)) == bool(overrides)
    assert {names[id(p)] for p in adamw[0]["params"]} == {"tok_emb.weight", "lm_head.weight"} | (
        {"pos_emb.weight"} if overrides else set())
    assert all(p.dim() == 1 for p in adamw[1]["params"]) and adamw[1]["weight_decay"] == 0.0
    assert len(muon["params"]) + sum(len(g["params"]) for g in adamw) == len(list(model.parameters()))
    assert isinstance(opt.muon, torch.optim.Muon) and muon["lr"] == 0.05 and adamw[0]["lr"] == 1e-3


def test_a_tied_lm_head_stays_with_its_embedding_on_adamw():
    model = GPT(GPTConfig(n_layers=1, d_model=16, n_heads=2, seq_len=8))
    model.lm_head.weight = model.tok_emb.weight
    hidden, rest = muon_split(model)
    assert all(p is not model.tok_emb.weight for p in hidden)
    assert sum(p is model.tok_emb.weight for p in rest) == 1
    assert {id(p) for p in hidden} == {id(p) for n, p in model.named_parameters() if n in muon_expected(model)}


def test_muon_with_adamw_steps_both_and_follows_the_schedule():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layers=1, d_model=16, n_heads=2, seq_len=8))
    opt = build_optimizer(model, 1e-2, (0.9, 0.95), 1e-8, 0.0, name="muon")
    set_lr(opt, 0.5e-2, 0.01)
    assert [g["lr"] for g in opt.muon.param_groups] == [0.01]
    assert [g["lr"] for g in opt.adamw.param_groups] == [0.5e-2, 0.5e-2]
    x = torch.randint(0, 256, (2, 8))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model(x, x)[1].backward()
    opt.step()
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    assert all(not torch.equal(before[n], p) for n, p in model.named_parameters() if p.dim() == 2)
    state = opt.state_dict()
    assert set(state) == {"muon", "adamw"} and state["muon"]["state"] and state["adamw"]["state"]
    with pytest.raises(ValueError, match="another optimizer"):
        opt.load_state_dict(torch.optim.AdamW(model.parameters()).state_dict())


def test_a_warm_up_as_long_as_the_run_is_warned_of_with_the_peak_it_reaches(tiny, tmp_path, capsys):
    """The default 50-step warm-up in a 30-step run: the lr never gets past 6e-4 of 1e-3 and the cosine never
    starts, a silent confound of a comparison at that length."""
    import normtrain

    optim = normtrain.compose([]).optim  # lr 1e-3, warm-up 50, cosine
    (warning,) = schedule_warnings(optim, 30)
    assert "train.max_steps=30 is not longer than optim.warmup_steps=50" in warning
    assert "reaches 0.0006 at most (optim.lr=0.001) and the cosine decay never starts" in warning
    assert "optim.warmup_steps=3" in warning
    assert len(schedule_warnings(optim, 50)) == 1 and schedule_warnings(optim, 51) == []  # 50: lr only at the end
    optim.warmup_steps = 0
    assert schedule_warnings(optim, 30) == []

    normtrain.train(normtrain.compose([*tiny, "train.max_steps=4", "optim.warmup_steps=5"]), run_dir=tmp_path)
    said = [line for line in capsys.readouterr().err.splitlines() if "warm-up" in line]
    assert len(said) == 1 and said[0].startswith("normtrain: warning: train.max_steps=4 is not longer than"), said


def test_a_wsd_run_logs_the_schedule_its_config_names(tiny_base, tmp_path):
    """End to end: optim.decay_fraction reaches the training step (lr logged every step of a 20-step run)."""
    import json

    import normtrain

    overrides = [*tiny_base, "optim.schedule=wsd", "optim.decay_fraction=0.5", "optim.warmup_steps=2",
                 "monitor.every=1", "optim.lr=1e-3"]
    normtrain.train(normtrain.compose(overrides), run_dir=tmp_path)
    logged = {r["step"]: r["lr"] for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
              if "lr" in r}
    assert logged[5] == logged[10] == pytest.approx(1e-3)  # stable until half the run is left
    assert logged[15] == pytest.approx(1e-3 * (1 - 0.9 * 5 / 10)) and logged[19] < logged[15]
