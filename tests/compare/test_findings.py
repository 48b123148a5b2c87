"""The report's opening summary in words (normtrain.compare.findings) on fabricated sweeps: a planted Post-LN collapse
is named with its own gradient ratio and its uniform attention blocks, beside the runs that learned; a sweep where
nothing failed says so and claims nothing; numbers that do not cross a threshold give no reason. And the page: the
summary and the by-block profiles come before the block × step maps, and the maps open on one shared colour scale."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from normtrain.compare import findings, report_page
from normtrain.compare.cli import _prepare
from normtrain.compare.figdata import num
from normtrain.compare.runs import Run
from normtrain.util.numbers import number

LAYERS, SEQ, UNIGRAM, STEPS = 18, 128, 3.35, 200
UNIFORM = math.lgamma(SEQ + 1) / SEQ  # 3.878: every query spreads its attention over every position it sees


def fabricated(placement: str, grad: list[float], entropy: list[float], final: float, collapsed: bool = False,
               diverged_at: int | None = None) -> Run:
    """One run in memory: per-block gradient norms and attention entropy (the same at every logged step but the
    first, which is noise a summary must not read), a summary with its outcome."""
    rows = []
    for step in range(0, STEPS, 20):
        row = {"step": step, "train/loss": final + 1 / (1 + step), "val/loss": final + 1 / (1 + step)}
        first = step == 0
        row.update({f"grad_norm/layer_{i}": 1.0 if first else g for i, g in enumerate(grad)})
        row.update({f"attn_entropy/layer_{i}": UNIFORM if first else h for i, h in enumerate(entropy)})
        rows.append(row)
    rows[-1]["step"] = STEPS - 1
    config = {"placement": {"name": placement}, "model": {"n_layers": len(grad), "seq_len": SEQ},
              "train": {"seed": 0}}
    summary = {"status": "diverged" if diverged_at else "completed", "diverged_at_step": diverged_at,
               "final_val_loss": None if diverged_at else final, "unigram_val_loss": UNIGRAM,
               "collapsed": collapsed, "above_line": False, "steps": STEPS, "config": config}
    return Run(Path(f"/sweep/{placement}"), summary, config, rows)


def post_ln_collapse() -> Run:
    """The issue's Post-LN: a gradient from 0.14 at block 17 down to 8e-6 at block 0, uniform attention in
    blocks 4-17."""
    grad = np.geomspace(8e-6, 0.14, LAYERS).tolist()
    entropy = [2.9, 3.1, 3.3, 3.6] + [UNIFORM - 0.002] * (LAYERS - 4)
    return fabricated("post", grad, entropy, final=UNIGRAM + 0.002, collapsed=True)


def learned(placement: str, level: float) -> Run:
    grad = (level * np.linspace(1.3, 0.9, LAYERS)).tolist()  # flat: 0.03-0.1 in the issue
    entropy = np.linspace(1.8, 3.2, LAYERS).tolist()
    return fabricated(placement, grad, entropy, final=2.6 if placement == "pre" else 2.7)


def sentences(runs: list[Run]) -> list[str]:
    _, _, groups, _ = _prepare(runs, "val/loss", None)
    return [f.text for f in findings.summary(groups)]


def test_a_planted_post_ln_collapse_is_named_with_its_gradient_ratio_and_uniform_blocks():
    said = sentences([post_ln_collapse(), learned("pre", 0.05), learned("deepnorm", 0.08)])
    head = said[0]
    assert head.startswith("Of 3 runs: post collapsed onto the unigram line (final val loss 3.352)")
    assert "pre learned (final val loss 2.600)" in head and "deepnorm learned (final val loss 2.700)" in head
    assert "unigram line (the loss of predicting token frequencies alone) is at 3.350" in head
    grad = next(s for s in said[1:] if "gradient norm" in s)
    ratio = 0.14 / 8e-6
    assert grad.startswith("post: at step 199 the gradient norm falls from 0.140 at block 17 to 8e-6 at block 0")
    assert f"a factor of {ratio:.0f}" in grad
    assert "in the runs that learned the last block's is 0.69 times block 0's" in grad  # 0.9 / 1.3, both runs
    attention = next(s for s in said[1:] if "attention" in s)
    assert "post: at step 199 its attention is spread evenly over the context in blocks 4–17 of 18" in attention
    assert "entropy 3.88 nats; uniform over 128 positions is 3.88" in attention
    assert "in the runs that learned those blocks are at 2.13–3.20 nats" in attention
    assert not [s for s in said if "pre:" in s or "deepnorm:" in s]  # the learners are no finding of their own


def test_a_sweep_where_nothing_failed_says_so_and_gives_no_reasons():
    still = learned("deepnorm", 0.08)
    still.summary["undertrained"] = True
    said = sentences([learned("pre", 0.05), still])
    assert "deepnorm learned (final val loss 2.700; still falling)" in said[0]
    assert said[1] == "No run diverged, failed, or ended on or above the unigram line."
    assert len(said) == 2 and not [s for s in said if "collapsed onto the unigram line (" in s or "factor" in s]


def test_a_run_that_ends_on_the_line_unlabelled_is_named_as_on_it_with_its_reasons():
    """200 steps evaluated every 100 leave no evaluation in 60-75% of the run: the training cannot label the
    collapse (``collapsed: false``, ``undertrained: null``), but the final loss is on the line all the same."""
    run = post_ln_collapse()
    run.summary.update(collapsed=False, undertrained=None, final_val_loss=UNIGRAM + 0.006)
    said = sentences([run, learned("pre", 0.05)])
    assert said[0].startswith("Of 2 runs: post ended on the unigram line (final val loss 3.356; not labelled "
                              "collapsed: too few evaluations to tell whether it had stopped falling)")
    assert any(s.startswith("post: at step 199 the gradient norm falls") for s in said[1:])
    assert any(s.startswith("post: at step 199 its attention is spread evenly") for s in said[1:])


def test_a_failure_whose_numbers_cross_no_threshold_gets_no_reason():
    """A collapsed run with a 50-fold gradient ratio (under 100) and attention nowhere near uniform: named, and
    no gradient or attention claim made for it."""
    flat = fabricated("post", np.geomspace(0.002, 0.1, LAYERS).tolist(), [2.5] * LAYERS, UNIGRAM, collapsed=True)
    said = sentences([flat, learned("pre", 0.05)])
    assert "post collapsed onto the unigram line" in said[0]
    assert said[1:] == [f"post: neither its per-block gradient norms nor its attention entropy stand apart from the "
                        f"runs that learned (a last-to-first block gradient ratio beyond {findings.GRADIENT_RATIO:g} "
                        f"either way; attention within {findings.NEAR_UNIFORM:g} nats of uniform)."]


def test_a_gradient_ratio_the_runs_that_learned_share_is_no_reason():
    vanishing = np.geomspace(1e-5, 0.1, LAYERS).tolist()
    said = sentences([fabricated("post", vanishing, [2.5] * LAYERS, UNIGRAM, collapsed=True),
                      fabricated("pre", vanishing, [2.5] * LAYERS, 2.6)])
    assert not [s for s in said if "gradient norm falls" in s]


def test_a_diverged_run_is_read_at_its_last_finite_step():
    grad = np.geomspace(1e-6, 1.0, LAYERS).tolist()
    run = fabricated("post", grad, [2.5] * LAYERS, 3.0, diverged_at=150)
    for row in run.rows[-2:]:
        row.update({k: None for k in row if k.startswith("grad_norm/")})
    said = sentences([run, learned("pre", 0.05)])
    assert "post diverged at step 150" in said[0]
    assert any(s.startswith("post: at step 140 the gradient norm falls from 1.000 at block 17 to 1e-6") for s in said)


def page_of(runs: list[Run]) -> tuple[str, dict]:
    html = report_page(runs).html
    return html, json.loads(re.search(r'id="normtrain-data">(.*?)</script>', html, re.S)[1])


def test_the_page_opens_with_the_summary_and_the_profiles_come_before_the_maps():
    html, data = page_of([post_ln_collapse(), learned("pre", 0.05), learned("deepnorm", 0.08)])
    at = {name: html.index(marker) for name, marker in (
        ("summary", '<section id="summary">'), ("table", '<div id="runs">'),
        ("profiles", '<h2 id="profiles">'), ("maps", '<h2 id="maps">'), ("first map", 'id="fig-grad-norm-map"'))}
    assert at["summary"] < at["table"] < at["profiles"] < at["maps"] < at["first map"]
    summary = html[at["summary"]:at["table"]]
    assert "post: at step 199 the gradient norm falls" in summary and 'href="#fig-grad-norm-profile"' in summary
    assert 'href="#profiles"' in summary and 'href="#maps"' in summary  # the line of links to every section
    assert '(see: Gradient norm per block (before clipping): by block)</a>' in summary  # named, not "(figure)"


def opening_domain(panel: dict, colours: str, log: bool) -> list[float]:
    """The colour domain a heatmap panel's expression gives with the ``colours`` control at ``colours``."""
    pattern = r"colours == 'shared' \? \(logscale \? (\[.*?\]) : (\[.*?\])\) : \(logscale \? (\[.*?\]) : (\[.*?\])\)"
    shared_log, shared_linear, own_log, own_linear = re.fullmatch(pattern, panel["encoding"]["color"]["scale"]
                                                                  ["domain"]["expr"]).groups()
    return json.loads({("shared", True): shared_log, ("shared", False): shared_linear,
                       ("panel", True): own_log, ("panel", False): own_linear}[colours, log])


def test_the_maps_open_on_one_colour_scale_shared_by_the_runs_that_did_not_diverge():
    blown = fabricated("none", np.geomspace(1e2, 1e8, LAYERS).tolist(), [1.0] * LAYERS, 9.0, diverged_at=190)
    html, data = page_of([post_ln_collapse(), learned("pre", 0.05), blown])
    fig = next(f for f in data["figures"] if f["id"] == "fig-grad-norm-map")
    opens = next(p["value"] for p in fig["spec"]["params"] if p["name"] == "colours")
    assert opens == "shared" and fig["log"] is True
    panels = fig["spec"]["concat"]
    healthy = [v for r in data["datasets"]["layers:grad_norm"] if r["g"] != "none" for v in r["v"] if v]
    shared = [num(np.percentile(healthy, 1)), num(np.percentile(healthy, 99))]
    assert [opening_domain(p, opens, True) for p in panels] == [shared] * 3  # one scale, as the page opens
    assert shared[1] <= 1  # the diverged run's 1e8 stretches nobody's scale
    caption = re.search(r'id="fig-grad-norm-map".*?<figcaption>(.*?)</figcaption>', html, re.S)[1]
    assert "one colour scale" in caption and f"{number(shared[0])} to {number(shared[1])} here" in caption
    own = [opening_domain(p, "panel", True) for p in panels]  # the toggle: each panel its own
    assert len({json.dumps(d) for d in own}) == 3 and own[2][1] > 1e7
    assert [p["title"]["text"] for p in panels] == ["post (collapsed)", "pre", "none (diverged)"]


def test_the_legend_and_the_loss_line_say_which_groups_failed_and_profiles_tell_lines_apart():
    html, data = page_of([post_ln_collapse(), learned("pre", 0.05), learned("deepnorm", 0.08)])
    figs = {f["id"]: f for f in data["figures"]}
    legend = next(la for la in figs["fig-loss"]["spec"]["layer"] if "color" in la["encoding"])["encoding"]["color"][
        "legend"]
    assert legend["labelExpr"] == 'datum.label === "post" ? "post (collapsed)" : datum.label'
    words = [layer for layer in figs["fig-loss"]["spec"]["layer"] if layer["mark"].get("type") == "text"]
    assert [v["text"] for w in words for v in w["data"]["values"]] == ["collapsed"]
    profile = figs["fig-act-std-profile" if "fig-act-std-profile" in figs else "fig-grad-norm-profile"]["spec"]
    line, points = profile["layer"]
    dashes, shapes = line["encoding"]["strokeDash"]["scale"]["range"], points["encoding"]["shape"]["scale"]["range"]
    assert len({json.dumps(d) for d in dashes}) == len(set(shapes)) == 3 and points["mark"]["filled"] is False


@pytest.mark.parametrize("indices, text", [([4], "block 4"), ([4, 5, 6, 9], "blocks 4–6 and 9"),
                                           ([0, 2, 3, 7], "blocks 0, 2–3 and 7")])
def test_blocks_read_as_ranges(indices, text):
    assert findings.blocks(indices) == text


def test_past_six_groups_the_learned_ones_are_counted_in_one_clause_and_the_failed_still_named():
    healthy = [learned(p, 0.05) for p in ("pre", "deepnorm", "peri", "mix", "subln", "admin", "rezero")]
    head = sentences([post_ln_collapse(), *healthy])[0]
    assert head.startswith("Of 8 runs: post collapsed onto the unigram line (final val loss 3.352)")
    assert "7 groups learned (final val loss 2.600–2.700)" in head and "peri learned" not in head
    few = sentences([post_ln_collapse(), *healthy[:5]])[0]  # six groups: each still named
    assert "peri learned (final val loss 2.700)" in few
