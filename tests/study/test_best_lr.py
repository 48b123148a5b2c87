"""Best against best (normtrain/study/best_lr.py): the selection rule, edges, paired values, the curve."""

from __future__ import annotations

import math

import pytest

from normtrain.study import best_lr


def grid(losses: dict[tuple[str, float], list[float]], selection: dict[tuple[str, float], list[float]] | None = None
         ) -> list[dict]:
    """Rows of an arm × lr × seed grid: ``losses[(arm, lr)]`` the judged final loss per seed (seeds 5, 6, ...),
    ``selection`` the selection loss (default: the judged loss + 0.1, so both agree)."""
    rows = []
    for (arm, lr), vals in losses.items():
        sel = (selection or {}).get((arm, lr)) or [v + 0.1 for v in vals]
        for i, (v, s) in enumerate(zip(vals, sel, strict=True)):
            rows.append({"norm": arm, "optim.lr": str(lr), "train.seed": str(5 + i), "status": "completed",
                         "final_val_loss": v, best_lr.SELECTION: s, "val_quarter_drop": 0.01 * (i + 1)})
    return rows


def test_the_rule_picks_the_lowest_median_selection_loss():
    rows = grid({("a", 1e-3): [2.0, 2.1, 2.2], ("a", 3e-3): [1.8, 1.9, 2.9], ("a", 1e-2): [1.95, 1.95, 1.95]})
    best = best_lr.choose(rows, "norm", "a")
    assert best.lr == 3e-3  # medians 2.1, 1.9, 1.95 (+ 0.1); the mean would pick 1e-2 (2.2 against 1.95)
    assert best.lrs == (1e-3, 3e-3, 1e-2) and not best.at_edge
    assert best.score == pytest.approx({1e-3: 2.2, 3e-3: 2.0, 1e-2: 2.05})


def test_the_rule_reads_the_selection_loss_not_the_judged_one():
    """Where they disagree the rule follows the selection loss (the judged loss would pick 1e-2)."""
    rows = grid({("a", 1e-3): [2.0] * 3, ("a", 3e-3): [1.9] * 3, ("a", 1e-2): [1.5] * 3},
                selection={("a", 1e-3): [2.0] * 3, ("a", 3e-3): [1.7] * 3, ("a", 1e-2): [1.8] * 3})
    assert best_lr.choose(rows, "norm", "a").lr == 3e-3
    from normtrain.study import stats

    assert best_lr.choose(rows, "norm", "a", stats.final_or_inf).lr == 1e-2


def test_a_diverged_run_counts_as_infinite_and_ties_go_to_the_smaller_lr():
    rows = grid({("a", 1e-3): [2.0] * 3, ("a", 3e-3): [2.0] * 3, ("a", 1e-2): [1.0] * 3})
    for r in rows:
        if r["optim.lr"] == "0.01":
            r["status"], r[best_lr.SELECTION] = "diverged", 1.0  # a low logged loss before it blew up
    best = best_lr.choose(rows, "norm", "a")
    assert best.score[1e-2] == math.inf
    assert best.lr == 1e-3  # 1e-3 and 3e-3 tie


@pytest.mark.parametrize(("lrs", "winner", "edge"), [((1e-3, 3e-3, 1e-2), 0, True), ((1e-3, 3e-3, 1e-2), 2, True),
                                                      ((1e-3, 3e-3, 1e-2), 1, False), ((1e-3, 3e-3), 0, True)])
def test_a_best_at_the_grid_edge_is_flagged(lrs, winner, edge):
    rows = grid({("a", lr): [1.0 if i == winner else 2.0] * 3 for i, lr in enumerate(lrs)})
    best = best_lr.choose(rows, "norm", "a")
    assert best.lr == lrs[winner]
    assert best.at_edge is edge
    assert best_lr.inside_grid({"a": best}) == {"a": {best_lr.ALL_SEEDS: float(not edge)}}
    note = best.edge_note()
    assert (note is not None) is edge
    if edge and len(lrs) == 3:
        assert "extend the grid" in note
        assert ("largest" if winner == 2 else "smallest") in note


def test_quantities_at_each_arms_own_best_lr_are_paired_by_seed():
    """Arm a is best at 1e-3, arm b at 1e-2: the difference pairs seed s of a at 1e-3 with seed s of b at 1e-2."""
    rows = grid({("a", 1e-3): [1.0, 1.1, 1.2], ("a", 3e-3): [1.5] * 3, ("a", 1e-2): [3.0] * 3,
                 ("b", 1e-3): [3.0] * 3, ("b", 3e-3): [2.0] * 3, ("b", 1e-2): [1.3, 1.05, 1.4]})
    best = best_lr.best_lrs(rows, "norm", ["a", "b"])
    assert (best["a"].lr, best["b"].lr) == (1e-3, 1e-2)
    diff = best_lr.paired_at_best(rows, "norm", best, "b", "a")
    assert diff == pytest.approx({"5": 0.3, "6": -0.05, "7": 0.2})
    assert best_lr.at_best(rows, "norm", best["a"], "val_quarter_drop") == pytest.approx({"5": 0.01, "6": 0.02,
                                                                                          "7": 0.03})
    assert best_lr.paired_at_best(rows, "norm", best, "c", "a") == {}


def test_an_arm_with_nothing_scored_has_no_best_and_no_values():
    rows = grid({("a", 1e-3): [1.0] * 3})
    for r in rows:
        r[best_lr.SELECTION] = None
    best = best_lr.choose(rows, "norm", "a")
    assert best.lr is None and not best.at_edge
    assert best_lr.at_best(rows, "norm", best, "final_val_loss") == {}
    assert best_lr.inside_grid({"a": best}) == {"a": {best_lr.ALL_SEEDS: None}}


def test_selection_loss_averages_the_last_tenth_of_the_training_stream():
    steps = list(range(0, 500, 5)) + [499]
    losses = [5.0 - 0.005 * s for s in steps]
    expected = [v for s, v in zip(steps, losses, strict=True) if s >= 450]
    assert len(expected) == 11
    assert best_lr.selection_loss(steps, losses, 500) == pytest.approx(sum(expected) / len(expected))
    assert best_lr.selection_loss(steps[:3], losses[:3], 500) == losses[2]  # too short: its last logged loss
    assert best_lr.selection_loss([], [], 500) is None
    assert best_lr.selection_loss([460, 470], [1.0, float("nan")], 500) == math.inf


def test_the_curve_table_shows_every_lr_and_marks_the_best():
    rows = grid({("a", 1e-3): [2.0, 2.2, 2.1], ("a", 3e-3): [1.5, 1.6, 1.4], ("a", 1e-2): [1.9] * 3,
                 ("b", 1e-3): [1.2] * 3, ("b", 3e-3): [1.3] * 3, ("b", 1e-2): [1.4] * 3})
    best = best_lr.best_lrs(rows, "norm", ["a", "b"])
    table = best_lr.curve_table(rows, "norm", best)
    lines = table.splitlines()
    assert lines[0].split("|")[2:5] == [" lr 0.001 ", " lr 0.003 ", " lr 0.01 "]
    a_row, b_row = lines[2], lines[3]
    assert "**1.500 [1.400, 1.600] (n=3)** best" in a_row and "(edge)" not in a_row
    assert "2.100 [2.000, 2.200] (n=3)" in a_row
    assert "** best (edge)" in b_row  # b's best is the grid's smallest


def test_the_curve_figure_draws(tmp_path):
    from normtrain.study import plots

    rows = grid({("a", 1e-3): [2.0] * 3, ("a", 3e-3): [1.5] * 3, ("a", 1e-2): [float("inf"), 1.9, 1.8]})
    best = best_lr.best_lrs(rows, "norm", ["a"])
    fig, axes = plots.figure()
    best_lr.draw_curves(axes[0], rows, "norm", best, {"a": "#1f77b4"}, unigram=3.3)
    plots.save(fig, tmp_path / "lr.png")
    assert (tmp_path / "lr.png").stat().st_size > 1000
    assert axes[0].get_xscale() == "log"


def test_the_judged_loss_pick_is_reported_where_it_differs_from_the_rules():
    rows = grid({("a", 1e-3): [2.0] * 3, ("a", 3e-3): [1.9] * 3, ("a", 1e-2): [1.5] * 3},
                selection={("a", 1e-3): [2.0] * 3, ("a", 3e-3): [1.7] * 3, ("a", 1e-2): [1.8] * 3})
    best = best_lr.best_lrs(rows, "norm", ["a"])
    assert best_lr.judged_pick_notes(rows, "norm", best) == [
        "The final validation loss itself would pick another lr for: a 0.01 (rule: 0.003; median final loss 1.500 "
        "against 1.900); the verdict uses the rule's."]
    edge = best_lr.rule_notes(rows, "norm", best, "24 layers: ")  # the rule's 3e-3 is inside: no edge note
    assert edge == ["24 layers: " + best_lr.judged_pick_notes(rows, "norm", best)[0]]
    same = grid({("a", 1e-3): [2.0] * 3, ("a", 3e-3): [1.9] * 3, ("a", 1e-2): [1.95] * 3})
    assert "same best lr" in best_lr.judged_pick_notes(same, "norm", best_lr.best_lrs(same, "norm", ["a"]))[0]


def test_the_runs_and_curves_at_an_arms_best_lr_are_its_own_only():
    rows = grid({("a", 1e-3): [2.0, 2.1], ("a", 3e-3): [1.8, 1.9], ("a", 1e-2): [1.95, 1.96],
                 ("b", 3e-3): [1.0, 1.1]})
    for r in rows:
        r["val_curve"] = f"0:3 10:{r['final_val_loss']}"
    best = best_lr.choose(rows, "norm", "a")
    assert [r["final_val_loss"] for r in best_lr.runs_at_best(rows, "norm", best)] == [1.8, 1.9]  # not b's
    assert best_lr.val_curves_at_best(rows, "norm", best) == [[(0.0, 3.0), (10.0, 1.8)], [(0.0, 3.0), (10.0, 1.9)]]
    assert best_lr.lr_text(best) == "0.003"
    edge = best_lr.choose(rows, "norm", "b")
    assert best_lr.lr_text(edge) == "0.003 (edge)"  # a grid of one lr: its best is at an edge
    nothing = best_lr.BestLr("c", (), {}, None)
    assert best_lr.runs_at_best(rows, "norm", nothing) == [] and best_lr.lr_text(nothing) == "–"


def test_a_near_tied_runner_up_gives_the_bests_to_measure_again_and_a_clear_winner_gives_none():
    """Protocol v5's selection robustness: an arm whose runner-up lr is within the paired seed spread of its best is
    measured again there (the other arms at their bests); an arm with a clear best is not."""
    rows = grid({("a", 1e-3): [2.00, 2.10, 1.95], ("a", 3e-3): [2.01, 2.02, 2.06], ("a", 1e-2): [2.5, 2.6, 2.7],
                 ("b", 1e-3): [2.5, 2.6, 2.7], ("b", 3e-3): [1.9, 1.91, 1.92], ("b", 1e-2): [2.4, 2.5, 2.6]})
    best = best_lr.best_lrs(rows, "norm", ["a", "b"])
    assert (best["a"].lr, best["b"].lr) == (1e-3, 3e-3)  # a's medians 2.00 and 2.02: near-tied; b's clear
    found = best_lr.near_tied(rows, "norm", best)
    assert list(found) == ["a at its runner-up lr 0.003"]
    moved = found["a at its runner-up lr 0.003"]
    assert moved["a"].lr == 3e-3 and moved["b"] is best["b"]
    assert best_lr.at_best(rows, "norm", moved["a"], "final_val_loss") == {"5": 2.01, "6": 2.02, "7": 2.06}
    assert best_lr.near_tied(rows, "norm", best, arms=["b"]) == {}
