"""batchnorm_leak's leak measurements: v5's matched gain (a sequence's loss with its own half's futures swapped
against the other half's) and v4's plain swap, on models that cannot read the future, that read their own, and
that read only another sequence's (the false leak the matched control must not report)."""

from __future__ import annotations

import pytest
import torch

from normtrain.model import GPT, GPTConfig, NormSpec
from normtrain.reproduce.batchnorm_leak import (
    CPU_EXTENSION,
    LRS,
    BatchNormLeak,
    arm_of,
    cut_positions,
    future_swap_gain,
    matched_swap_gain,
    measure,
)


class ReadsTheNextToken(torch.nn.Module):
    """A cheat: its logits at t name the input at t + 1, so it scores well only while its own future is there."""

    def forward(self, x):
        return 8.0 * torch.nn.functional.one_hot(x.roll(-1, dims=1), 256).float(), None


class ReadsTheNeighboursNextToken(torch.nn.Module):
    """A model that reads another sequence's future, never its own: sequence i's logits at t name sequence i + 1's
    input at t + 1 (cyclically). Where the sequences of a batch are copies, that predicts i's target too."""

    def forward(self, x):
        return 8.0 * torch.nn.functional.one_hot(x.roll(-1, dims=0).roll(-1, dims=1), 256).float(), None


def batches(n: int = 3, size: int = 2, seq: int = 16, seed: int = 0, copies: bool = False):
    g = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, 256, (n, 1 if copies else size, seq + 1), generator=g).expand(n, size, seq + 1)
    return [(r[:, :-1], r[:, 1:]) for r in rows]


def model(norm: str) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layers=2, d_model=32, n_heads=2, seq_len=16, mlp="gelu", pos="learned",
                         norm=NormSpec(name=norm, eps=1e-5))).train()


def test_cuts_fall_at_quarters_and_leave_a_future():
    assert cut_positions(128) == [31, 63, 95]
    assert cut_positions(16) == [3, 7, 11]
    assert cut_positions(2) == [0]  # position 0's future is position 1


def test_a_model_that_reads_its_future_loses_when_the_future_is_swapped():
    found = future_swap_gain(ReadsTheNextToken(), batches())
    assert found["swap_gain"] > 5.0  # its target's logit is 8 higher with the future, one of 256 without
    assert set(found) == {"swap_gain", "swap_gain_t3", "swap_gain_t7", "swap_gain_t11"}


@torch.no_grad()
def test_the_swap_reads_exactly_zero_on_a_causal_model_and_not_on_batchnorm():
    assert future_swap_gain(model("layernorm"), batches())["swap_gain"] == 0.0
    assert future_swap_gain(model("batchnorm_causal"), batches())["swap_gain"] == 0.0
    assert future_swap_gain(model("batchnorm"), batches())["swap_gain"] != 0.0  # untrained: a leak of either sign


def test_one_batch_has_no_other_text_to_swap_in():
    assert future_swap_gain(ReadsTheNextToken(), batches(n=1)) == {"swap_gain": None}
    assert matched_swap_gain(ReadsTheNextToken(), batches(n=1)) is None


@torch.no_grad()
def test_the_matched_gain_finds_a_model_reading_its_own_future_and_zero_on_a_causal_one():
    assert matched_swap_gain(ReadsTheNextToken(), batches(size=4)) > 5.0  # its own future swapped: 1 in 256
    assert matched_swap_gain(model("layernorm"), batches(size=4)) == 0.0
    assert matched_swap_gain(model("batchnorm"), batches(size=4)) != 0.0  # untrained: a bias of either sign
    assert matched_swap_gain(ReadsTheNextToken(), batches(size=1)) is None  # batch 1: no other half


def test_reading_another_sequences_future_is_a_leak_to_the_plain_swap_and_not_to_the_matched_gain():
    """The planted false leak: batches of copies, a model that reads its neighbour's future. Swapping every future
    hurts it (v4's gain calls that a leak); the matched control does not, since its own future is never read."""
    copies = batches(size=2, copies=True)
    assert future_swap_gain(ReadsTheNeighboursNextToken(), copies)["swap_gain"] > 5.0
    assert matched_swap_gain(ReadsTheNeighboursNextToken(), copies) < -5.0  # the own half intact, the other not


def test_measure_reads_every_quantity_at_each_arms_best_lr():
    """Synthetic per-seed values: matched gains 0.04 / 0.01 at batch 2 / 8 (none at 1); BatchNorm − LayerNorm 0.3 /
    0.1 in eval mode at batch 1 / 8."""
    values = {("batchnorm", 1): {"matched_gain": None, "swap_gain": 0.2, "eval_loss": 2.8, "leak": 0.2},
              ("batchnorm", 2): {"matched_gain": 0.04, "swap_gain": 0.0, "eval_loss": 2.6, "leak": 0.2},
              ("batchnorm", 8): {"matched_gain": 0.01, "swap_gain": -0.01, "eval_loss": 2.4, "leak": 0.3},
              ("layernorm", 1): {"matched_gain": None, "swap_gain": None, "eval_loss": 2.5, "leak": 0.0},
              ("layernorm", 2): {"matched_gain": 0.0, "swap_gain": None, "eval_loss": 2.4, "leak": 0.0},
              ("layernorm", 8): {"matched_gain": -1e-7, "swap_gain": None, "eval_loss": 2.3, "leak": 0.0}}

    def at(n, b, value):
        v = values[(n, b)].get(value, 0.001)
        return {str(s): None if v is None else v + s * 1e-3 for s in range(3)}

    from normtrain.study.best_lr import BestLr
    grid = (1e-3, 4e-3, 1.6e-2, 6.4e-2)
    best = {"batchnorm, batch 1": BestLr("batchnorm, batch 1", grid, {}, 4e-3),
            "batchnorm, batch 8": BestLr("batchnorm, batch 8", grid, {}, 6.4e-2),
            "layernorm, batch 1": BestLr("layernorm, batch 1", grid, {}, 1.6e-2)}
    found = measure(at, [1, 2, 8], best, unigram=3.3)
    assert set(found["matched_leak_gain_at_best"]) == {"batch 2", "batch 8"}  # batch 1: no matched control
    assert found["matched_leak_gain_at_best"]["batch 2"]["0"] == pytest.approx(0.04)
    assert found["plain_swap_gain_at_best"]["batch 1"]["0"] == pytest.approx(0.2)
    assert found["matched_gain_small_minus_large"][""]["2"] == pytest.approx(0.03)
    assert found["bn_gap_small_minus_large"][""]["1"] == pytest.approx(0.3 - 0.1)
    assert found["ln_swap_gain_abs"]["batch 8"]["0"] == pytest.approx(1e-7)
    assert found["reference_margin"]["layernorm, batch 1"]["0"] == pytest.approx(0.8)
    # v5: every arm a check reads decides the precondition (LayerNorm's too)
    assert found["best_lr_inside_grid"] == {"batchnorm, batch 1": {"all seeds": 1.0},
                                            "batchnorm, batch 8": {"all seeds": 0.0},
                                            "layernorm, batch 1": {"all seeds": 1.0}}
    assert arm_of({"norm": "batchnorm", "train.batch_size": "8"}) == "batchnorm, batch 8"


def test_the_cpu_grid_is_the_registered_lrs_at_every_batch_size():
    from normtrain.reproduce.cli import make_plan

    cpu = [dict(c) for c in make_plan("batchnorm_leak", scale="cpu").combos()]

    def lrs(batch: str) -> list[float]:
        return sorted({float(c["optim.lr"]) for c in cpu if c["train.batch_size"] == batch})

    assert lrs("1") == lrs("2") == lrs("8") == sorted(LRS) and len(LRS) == 4 and CPU_EXTENSION == {}
    assert len(cpu) == 2 * 3 * 4 * 5  # norms × batch sizes × lrs × seeds
    assert {c["train.seed"] for c in cpu} == {"10", "11", "12", "13", "14"}  # v4 ran 5-9
    assert BatchNormLeak().keeps_at("cpu")({"norm": "batchnorm", "train.batch_size": "8", "optim.lr": "0.064"})


def test_a_models_scores_are_kept_and_reread_until_its_checkpoint_changes(text_corpus, tiny_base, tmp_path,
                                                                          monkeypatch):
    """A rerun re-reads each model's scores from its run folder instead of scoring it again (47 min for the
    committed grid), scores again once the checkpoint is another (a retrained run), and reads them without the
    checkpoint once a pack has left it behind."""
    import os

    from omegaconf import OmegaConf

    from normtrain.compare.runs import load_run
    from normtrain.config import compose
    from normtrain.reproduce import batchnorm_leak
    from normtrain.training.trainer import train

    run_dir = tmp_path / "run"
    train(compose([*tiny_base, "data=local_text", f"data.path={text_corpus}", "norm=batchnorm",
                   "train.max_steps=4"]), run_dir=run_dir)
    run = load_run(run_dir)
    first = batchnorm_leak.score_two_ways(run)
    assert (run_dir / batchnorm_leak.SCORES).is_file() and first["swap_gain"] is not None
    assert first["matched_gain"] is not None and first["matched_gain_init"] is not None
    import normtrain

    monkeypatch.setattr(normtrain, "build_model", lambda *a: pytest.fail("the untrained model's gain is kept for "
                                                                         "every lr's run"))
    cfg = OmegaConf.create(run.summary["config"])
    assert batchnorm_leak.init_gain(cfg, [], tmp_path) == first["matched_gain_init"]
    monkeypatch.undo()

    calls = []
    real = batchnorm_leak._score_two_ways
    monkeypatch.setattr(batchnorm_leak, "_score_two_ways", lambda r: calls.append(r) or real(r))
    assert batchnorm_leak.score_two_ways(run) == first and calls == []  # re-read, bit for bit
    ckpt = run_dir / "ckpt.pt"
    os.utime(ckpt, ns=(ckpt.stat().st_atime_ns, ckpt.stat().st_mtime_ns + 10**9))  # another checkpoint
    assert batchnorm_leak.score_two_ways(run) == first and len(calls) == 1  # scored again: same weights, same scores
    ckpt.unlink()  # a pack leaves it behind: the scores stand in for it
    assert batchnorm_leak.score_two_ways(run) == first and len(calls) == 1


def scored_rows(steps: int, gain: float, nulls: dict[int, float]) -> list[dict]:
    """One scored run per norm × batch size × lr × seed (10–14), as ``BatchNormLeak.row`` writes it: every arm's
    best at 4e-3, inside its grid; BatchNorm's matched gain ``gain`` and its untrained model's ``nulls[batch]``
    (+0.002 and +0.0002 per seed: a spread for the intervals; the control is scored at T only, as
    ``_score_two_ways`` does); LayerNorm causal, 1 nat below the unigram line."""
    bump = dict(zip(LRS, (0.1, 0.0, 0.05, 0.3), strict=True))
    rows = []
    for norm in ("batchnorm", "layernorm"):
        for b in (1, 2, 8):
            for lr in LRS:
                for s in range(5):
                    loss, bn, paired = 2.3 + bump[lr] + 0.01 * s, norm == "batchnorm", b >= 2
                    rows.append({
                        "norm": norm, "train.batch_size": str(b), "optim.lr": str(lr), "train.seed": str(10 + s),
                        "steps": steps, "status": "completed", "select_loss": loss, "final_val_loss": loss,
                        "unigram_val_loss": 3.3, "own_loss": loss - (0.05 if bn else 0.0), "eval_loss": loss,
                        "leak": 0.2 if bn else 0.0, "swap_gain": 0.05 if bn and steps == 1000 else None,
                        "matched_gain": (gain + 0.002 * s if bn else 0.0) if paired else None,
                        "matched_gain_init": nulls[b] + 2e-4 * s if bn and paired and steps == 1000 else None})
    return rows


@pytest.mark.parametrize(("gain", "nulls", "verdict"), [
    (0.02, {2: 5e-4, 8: -5e-4}, "supported (our hypothesis)"),
    (0.02, {2: 5e-4, 8: 0.006}, "inconclusive (precondition)"),
    (0.02, {2: 5e-4, 8: 0.002}, "inconclusive (precondition)"),
    (-0.004, {2: 5e-4, 8: -5e-4}, "not supported (our hypothesis)"),
])
def test_v5_reads_the_matched_gain_at_t_and_at_half_the_steps_behind_the_controls_null(gain, nulls, verdict,
                                                                                       tmp_path):
    """A matched gain of 0.02–0.03 nats at batch 2 and 8, at T and T/2, clears 0 with the untrained control's 90%
    interval inside ±0.0025; a control reading 0.006–0.007 at batch 8 (refuted) or 0.002–0.003 (straddling the band:
    open) fails the precondition whatever the gain; a gain of −0.004 to 0.004 lies below the 0.005 sesoi: refuted."""
    from normtrain.study.claim import verdict_words
    from normtrain.study.plan import Plan
    from normtrain.study.verdicts import decide

    exp = BatchNormLeak()
    rows = scored_rows(1000, gain, nulls) + scored_rows(500, gain, nulls)
    findings = exp.analyse(rows, Plan(exp.name, "cpu", False, [], {}, tmp_path, tmp_path))
    assert set(findings.measured["matched_leak_gain_at_best@half"]) == {"batch 2", "batch 8"}
    judged = decide(exp.registration, findings.measured, findings.unit)
    assert judged.guard.ok
    failed = {c.rule.id for c in judged.role("precondition") if not c.ok}
    assert failed == ({"matched_null_untrained"} if "precondition" in verdict else set())
    primary = judged.role("primary")[0].as_dict()
    assert verdict_words({"verdict": judged.verdict, "protocol": judged.protocol, "primary": primary}) == verdict


def test_before_a_pack_every_completed_run_of_the_packed_points_is_scored_at_both_budgets(tmp_path, monkeypatch):
    import json

    from normtrain.reproduce import batchnorm_leak
    from normtrain.reproduce.cli import make_plan
    from normtrain.study.branches import half_runs_dir

    plan = make_plan("batchnorm_leak", runs_dir=tmp_path / "runs", out=tmp_path / "out", progress=False, jobs=1)
    combos = plan.combos()[:3]
    t = [plan.run_dir(c) for c in combos]
    half = [half_runs_dir(plan.runs_dir) / f.name for f in t]
    for folder, status in ((t[0], "completed"), (half[0], "completed"), (t[1], "diverged"), (t[2], "completed")):
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"status": status}))
    scored = []
    monkeypatch.setattr(batchnorm_leak, "score_folder", lambda _o, run_dir: scored.append(run_dir))
    BatchNormLeak().make_stand_ins(plan, combos)
    assert scored == [str(t[0]), str(t[2]), str(half[0])]  # a diverged run has no scores; t[2]'s branch is not run
