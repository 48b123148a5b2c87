"""Wang et al. 2022 (DeepNet) and Liu et al. 2020 (Admin): Post-LN fails with depth even with warm-up; DeepNorm
trains.

``REGISTRATION`` is v5 (issue 59: the depth interaction decides, edge rules on every arm and depth, protocol v5's
interval call at T and T/2, new seeds). ``REGISTRATION_V4`` (issue 37) and ``REGISTRATION_V3`` are records kept
unchanged, each the next one's pilot."""

from dataclasses import replace

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

DEPTHS = "6, 18, 24"  # configs/experiment/deepnet_depth.yaml: model.n_layers (v4 and v5)
POST_LRS_V4, DEEPNORM_LRS_V4 = "1.25e-4, 2.5e-4, 5e-4, 1e-3", "5e-4, 1e-3, 2e-3, 4e-3"  # v4's, per placement
EXTENSION_V4 = ("The grids were extended at their top edge during the runs, when all 60 Post-LN runs and DeepNorm's "
             "runs at 5e-4, 1e-3 and 2e-3 (every depth) and at 4e-3 (6 layers, and 4 seeds at 18) had finished: "
             "DeepNorm's 4e-3 was below its 2e-3 at 6 and 18 layers by about 0.2 nats (medians 2.036 against 2.225, "
             "1.881 against 2.089), so its best would sit at the grid's largest lr and fail the precondition "
             "best_lr_inside_grid; Post-LN's best at 6 layers sat at its grid's largest lr, 1e-3, with DeepNorm "
             "0.27 nats ahead there, a comparison (both_train_shallow, post_degrades_with_depth) that would read "
             "Post-LN below its best. Issue 37's remedy is to extend the grid at that edge; two factor-2 steps at "
             "once (the curves still fell about 0.2 nats per doubling): DeepNorm 8e-3 and 1.6e-2 at 6, 18 and 24 "
             "layers, Post-LN 2e-3 and 4e-3 at 6 layers, seeds 3–7 (40 runs). No check, threshold or rule changed "
             "(experiments/deepnet_depth/CHECK_HISTORY.md entry 5). Then Post-LN's best at 6 layers sat at the new "
             "top, 4e-3 (selection loss 2.122 against 2.137 at 2e-3), and one more step, 8e-3 (5 runs), was added by "
             "the same rule (entry 6)")
BUDGET_V4 = ("120 runs (2 placements × 4 lrs × 3 depths × 5 seeds). Estimate: on the quiet 2-core machine a v3 run "
          "(1000 steps, 5 evaluations) took 42–44 s at 6 layers and 156–161 s at 24 (experiments/reproduce_budget/"
          "sample_runs.csv); an evaluation of the 512 windows costs about as much as 21 training steps (64k tokens "
          "forward against 1k forward and backward), so a v3 run was ≈ 1105 step-equivalents at ≈ 6.0 ms per layer, "
          "and a v4 run, 1000 steps and 21 evaluations, ≈ 1441 of them: ≈ 8.7 s per layer. A seed's 8 (placement, "
          "lr) pairs over depths summing to 48 layers cost 8 × 48 × 8.7 s ≈ 3,320 s, 5 seeds ≈ 16,600 s of the runs' "
          "own time ≈ 138 min at --jobs 2 (this method, without the evaluations, estimated v3 at 49 min; it took 49 "
          "quiet-sampled, 83 on a loaded machine). To fit the 3 h, compute goes to the primary's arms, depths, lrs "
          "and seeds: Pre-LN (no check of the claim reads it), the no-warm-up arm (xiong_warmup's question) and a "
          "12-layer point (it would be reported only; +46 min) are left out")

REGISTRATION_V4 = Registration(
    claim="With warm-up, each at its own best learning rate, Post-LN ends far behind DeepNorm in deep models "
          "(18 and 24 layers) while both train at 6 layers",
    detail=("Post-LN trains at moderate depth but degrades or fails as the model gets deeper, even with warm-up: "
            "Admin's WMT14 En-De Post-LN reached 27.80 BLEU at 6 layers and failed to train at 12 and 18; DeepNet's "
            "Post-LN baselines, trained with warm-up, became unstable at 50L-50L while DeepNorm trained 1000-layer "
            "models (Wang et al. 2022, Fig. 1, Table 1). The primary check states DeepNet's claim at this scale: in "
            "the deep models Post-LN, at its own best learning rate, is far behind DeepNorm at its own. A lower "
            "learning rate is the usual remedy tried for Post-LN, so Post-LN's grid reaches 8× below DeepNorm's "
            "lowest point: a failure that a smaller lr would cure is not DeepNet's claim."),
    paper_number="Admin Table 1: Post-LN 27.80 BLEU at 6L, training failed at 12L and 18L; DeepNet Fig. 1: Post-LN "
                 "unstable from 50L-50L, DeepNorm trains 1000 layers",
    metric=(f"Final validation loss (nats per byte, 512 fixed windows = 64 KB) after 1000 steps (a 100-step linear "
            f"warm-up multiplying a cosine to 10% counted from step 0), evaluated every 5% (50 steps), at {DEPTHS} "
            f"layers; Post-LN at peak lrs {POST_LRS_V4}, DeepNorm at {DEEPNORM_LRS_V4} (log grids, factor 2). "
            "**Best lr, a "
            "rule fixed before the runs** (normtrain/reproduce/best_lr.py), per placement *and depth*: the lr whose "
            "runs have the lowest median over seeds of the *selection loss*, the mean training loss over the last "
            "10% of steps (logged every 10 steps; training batches, not the judged validation windows); a diverged "
            "run counts as +∞, a tie goes to the smaller lr. Judged quantities are read at each placement's best lr "
            "at that depth and paired by seed (a diverged run's loss is +∞). Seeds 3–7 (v3's pilot ran 0–2). "
            f"{BUDGET_V4}. " + EXTENSION_V4 + "."),
    norm="LayerNorm, as the papers",
    label="after_pilot",
    pilot=Pilot(
        runs="v3 (runs at commit 74840d9, committed at 3ba6139, re-analysed at 90b8580; `experiments/deepnet_depth/`): "
             "the same 64-128-2 model, 1000 steps, depths 6 and 24, three arms (lr 1e-3 without warm-up, lr 1e-3 "
             "and 3e-4 with a 100-step warm-up) for Post-LN, Pre-LN and DeepNorm, seeds 0–2.",
        numbers="v3, reproduced (all four checks held): Post-LN − DeepNorm at L = 24 with warm-up 1.045 [1.041, "
                "1.046] (lr 1e-3) and 0.672 [0.603, 0.735] (lr 3e-4), without warm-up 1.067 [1.059, 1.068]; Post-LN "
                "L24 − L6 1.028 and 0.637; DeepNorm L24 − L6 −0.092, −0.097, −0.084. Post-LN at L = 24 collapsed on "
                "the unigram line at lr 1e-3 (3/3 seeds, both arms); at 3e-4 with warm-up it ended at 3.320, 3.259, "
                "3.203 (line 3.328). At L = 6 Post-LN 2.299 and DeepNorm 2.383 (lr 1e-3, warm-up); DeepNorm at "
                "L = 24 2.285 (1e-3) against 2.591 (3e-4): its best may lie above 1e-3. The review (issue 37): one "
                "deep point, n = 3, one lr per architecture.",
        changed=f"(1) Protocol v4: the primary check is Post-LN − DeepNorm ≥ 0.3 nats at 18 and 24 layers, each "
                f"at its own best lr at that depth; Post-LN's degradation with depth and DeepNorm's keeping "
                f"training are secondary; that both train at 6 layers is a precondition (the failure is depth's). "
                f"(2) Depths {DEPTHS} (v3: 6, 24): two deep points, both judged. (3) Best against best: "
                f"Post-LN at {POST_LRS_V4}, DeepNorm at {DEEPNORM_LRS_V4}; DeepNorm's best must lie inside its grid "
                "and "
                "Post-LN's must not be its grid's smallest (preconditions). (4) Only with warm-up (the papers' "
                "setting); the no-warm-up arm, Pre-LN and a 12-layer point are dropped for the budget. (5) Seeds "
                "3–7, five (v3: 0–2); decisions by one-sided t-tests of the paired differences. (6) Evaluated every "
                "5% (v3: every 25%).",
        seeds=(0, 1, 2),
    ),
    guard=Guard(arm="DeepNorm at its best lr, at every depth", margin=0.3, quantity="reference_margin",
                basis="the placement the paper says trains must learn more than byte frequencies for a gap to "
                      "Post-LN to mean anything; v3's DeepNorm ended 0.64–1.07 nats below the line"),
    primary=Rule("post_fails_deep", "In the deep models (18 and 24 layers), Post-LN at its best lr ends far behind "
                 "DeepNorm at its best lr (or diverges)", "post_minus_deepnorm_at_best", ">=", 0.3,
                 decide="t_test",
                 basis="0.3 nats, the guard's margin: a gap as large as that between learning something and learning "
                       "byte frequencies (v3's gap at L = 24: 0.67–1.07); the one-sided t-test of the per-seed "
                       "paired differences against it builds the band from the paired spread (v3's paired sd at "
                       "L = 24: 0.003 at lr 1e-3, 0.066 at 3e-4)"),
    secondary=(
        Rule("post_degrades_with_depth", "Post-LN at its best lr is worse at 18 and 24 layers than at 6",
             "post_deep_minus_shallow_at_best", ">=", 0.1, decide="t_test",
             basis="a deeper model that trains ends lower, not higher; 0.1 nats is 5× v3's seed sd of the trained "
                   "placements' final loss (≈ 0.02), tested against the paired spread"),
        Rule("deepnorm_keeps_training", "DeepNorm at its best lr is no worse at 18 and 24 layers than at 6",
             "deepnorm_deep_minus_shallow_at_best", "<=", 0.05, decide="t_test",
             basis="about twice v3's seed sd of the trained placements' final loss (≈ 0.02); v3 measured −0.08 to "
                   "−0.10 (deeper was better)"),
    ),
    preconditions=(
        Rule("both_train_shallow", "At 6 layers Post-LN at its best lr is not behind DeepNorm at its best lr by "
             "more than 0.1 nats (the failure is depth's, not Post-LN's at this scale)",
             "post_minus_deepnorm_shallow", "<=", 0.1,
             basis="v3: Post-LN 0.08 nats *ahead* of DeepNorm at L = 6 (lr 1e-3, warm-up); 0.1 nats is a third of "
                   "the primary's 0.3"),
        Rule("best_lr_inside_grid", "DeepNorm's best lr at 18 and 24 layers is not its grid's smallest or largest",
             "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             basis="1 when the best lr lies strictly inside the grid, 0 at an edge; one value per depth"),
        Rule("post_best_lr_not_smallest", "Post-LN's best lr at 18 and 24 layers is not its grid's smallest (a "
             "smaller lr might train it)", "best_lr_not_smallest", ">=", 1.0, decide=1.0,
             basis="1 when Post-LN's best lr is above its grid's smallest; a best at the largest lr is allowed: "
                   "Post-LN's trouble grows with the lr (Xiong et al. 2020; v3 at L = 24: 1e-3 collapsed, 3e-4 "
                   "nearly), so a larger lr is not where a deep Post-LN would train"),
    ),
    reported=("The whole loss-vs-lr curve per placement and depth (median and range over seeds, the best marked) "
              "and its figure at the deepest depth; each placement's selection loss per lr and depth.",
              "Post-LN − DeepNorm at any depth run between the shallow and the judged ones (none in this grid), each "
              "at its best lr: where Post-LN starts to fail.",
              "Per cell, how many runs diverged, collapsed, ended above the line, plateaued or were still falling."),
)



LRS = {"DeepNorm": "2e-3, 4e-3, 8e-3 at every depth", "Post-LN": "2e-3, 4e-3, 8e-3 at 6 layers; 6.25e-5, 1.25e-4, "
       "2.5e-4, 5e-4 at 18 and 24"}  # each around its v4 best (normtrain/reproduce/deepnet_depth.py ARM_LRS)
SEEDS = "8–12"
FLAT = 0.05  # a curve whose median final losses over the grid span less than this is flat: no lr trains it
EDGE_RULE = ("**Edges, a rule fixed now.** Every arm a check reads (DeepNorm at 6, 18, 24 layers, Post-LN at 6, 18, "
             "24) must have its best lr strictly inside its grid, or, for Post-LN in the deep models, a flat curve "
             f"(its median final losses over the grid within {FLAT} nats of each other: no lr trains it, so its "
             "edge hides no better lr; precondition `best_lr_inside_grid`). A best at an edge of a curve that is "
             "not flat extends that grid by one point beyond it (factor 2), for every seed, at most twice per arm "
             "and depth: a change of ARM_LRS and the YAML's lr axis, committed and logged in CHECK_HISTORY.md as "
             "this rule's; the result is read on the extended grid. A best still at an edge after two points fails "
             "the precondition")
BUDGET = ("Budget (≤ 3 h at --jobs 2, --plan-only): 100 runs at T (DeepNorm 3 lrs × 3 depths, Post-LN 3 lrs at 6 "
          "layers and 4 at 18 and 24, × 5 seeds) and 100 decay branches at T/2, timed by v4's runs "
          "(experiments/deepnet_depth/runs.csv at f6f5fa0: 34–52 s at 6 layers, 103–161 s at 18, 139–215 s at 24): "
          "≈ 200 min of their own, ≈ 100 min at --jobs 2; an edge extension adds 5 runs and 5 branches, ≤ 10 min")

REGISTRATION = Registration(
    claim="With warm-up, each at its own best learning rate, Post-LN falls behind DeepNorm with depth: its gap to "
          "DeepNorm at 18 and 24 layers exceeds its gap at 6 layers by at least 0.3 nats, at T and at half the steps",
    detail=REGISTRATION_V4.detail + (
        " **Under protocol v5** (issue 59) the review found v4's *reproduced* reached only after an extension of "
        "Post-LN's 6-layer grid that no registered rule required, and its rescued precondition (both train at 6 "
        "layers) holding by 0.0002 nats (median 0.0998 ≤ 0.1, 3 of 5 seeds). v5 replaces that precondition by the "
        "claim itself read as a depth interaction: per seed, [Post-LN − DeepNorm](L) − [Post-LN − DeepNorm](6), each "
        "at its best lr at each depth (1.10 at 18 and 1.32 at 24 on v4's runs). That Post-LN is behind at depth is "
        "kept as a secondary check. Every arm and depth a check reads has an edge rule fixed now."),
    paper_number=REGISTRATION_V4.paper_number,
    metric=("Final validation loss (nats per byte, 512 fixed windows = 64 KB) after 1000 steps of WSD (a 100-step "
            "linear warm-up multiplying it, the peak lr until step 800, then linearly to 10%), evaluated every 5%, "
            f"at {DEPTHS} layers; DeepNorm at {LRS['DeepNorm']}, Post-LN at {LRS['Post-LN']} (factor 2). **Best "
            "lr, a rule fixed before the runs** (normtrain/study/best_lr.py, the held-out score of "
            "normtrain/study/best_against_best.py), per placement, depth and budget: the lowest median over seeds "
            "of the loss at the run's end on 511 held-out validation windows between the judged ones "
            "(`train.select_windows`); a diverged run counts as +∞, a tie goes to the smaller lr. The primary, per "
            "seed: gap(L) − gap(6), gap = Post-LN at its best lr − DeepNorm at its best lr at that depth, at L = 18 "
            "and 24 (a diverged run's loss is +∞). **T/2**: every run again at 500 steps, a decay branch that "
            "leaves its T run at step 400, each arm at its own best lr there. **Selection robustness**: the primary "
            "again with each arm whose runner-up lr is near-tied with its best (best_lr.runner_up) moved there. "
            f"{EDGE_RULE}. Seeds {SEEDS}. {BUDGET}."),
    norm=REGISTRATION_V4.norm,
    label="after_pilot",
    version=5,
    pilot=Pilot(
        runs="v4 (`REGISTRATION_V4` below; `experiments/deepnet_depth/` at f6f5fa0: runs.csv, result.json, "
             "DISCUSSION.md): the same model and depths, a cosine, seeds 3–7, both grids extended at their top edge "
             "during the runs (its CHECK_HISTORY entries 5 and 6).",
        numbers="v4, reproduced after the extensions (the registered grid's result: inconclusive, at 0b3ccba): "
                "Post-LN − DeepNorm at each one's best lr 1.202 (1.173–1.279) at 18 layers, 1.422 (1.347–1.461) at "
                "24; both_train_shallow median 0.0998 ≤ 0.1 (3/5 seeds). Best lrs: DeepNorm 4e-3 at every depth "
                "(8e-3 0.02–0.2 behind, 1.6e-2 on the unigram line); Post-LN 4e-3 at 6 layers (8e-3 collapsed), "
                "2.5e-4 at 18 (3.10), all lrs within 0.02 of the unigram line at 24.",
        changed=f"(1) The primary is the depth interaction gap(L) − gap(6) ≥ 0.3 by the 90% t interval (refuted "
                f"only below 0.3), at T and at T/2, read at every near-tied lr; both_train_shallow is dropped (the "
                f"interaction does its job) and post_fails_deep is secondary. (2) Grids around v4's bests "
                f"(DeepNorm {LRS['DeepNorm']}; Post-LN {LRS['Post-LN']}) with an edge rule over every arm and "
                f"depth, a flat deep Post-LN curve allowed. (3) WSD in place of the cosine; the best lr on held-out "
                f"windows. (4) New seeds {SEEDS}.",
        seeds=(0, 1, 2, 3, 4, 5, 6, 7),
    ),
    guard=REGISTRATION_V4.guard,
    primary=Rule("post_falls_behind_with_depth", "Post-LN's gap to DeepNorm (each at its best lr per depth) grows "
                 "from 6 layers to 18 and to 24 by at least 0.3 nats", "post_gap_growth_with_depth", ">=", 0.3,
                 decide="interval", sesoi=0.0, source="paper",
                 basis="0.3 nats, the guard's margin (the gap between learning something and learning byte "
                       "frequencies), is itself the smallest growth of interest (sesoi 0 past it)"),
    secondary=(
        Rule("post_fails_deep", "In the deep models (18 and 24 layers), Post-LN at its best lr ends far behind "
             "DeepNorm at its best lr (or diverges)", "post_minus_deepnorm_at_best", ">=", 0.3, decide="interval",
             sesoi=0.0, source="paper", basis=REGISTRATION_V4.primary.basis.split("; the one-sided")[0]),
        *(replace(r, source="paper")
          for r in REGISTRATION_V4.secondary),
    ),
    preconditions=(
        Rule("best_lr_inside_grid", "every arm's best lr at every depth is inside its grid (deep Post-LN: or its "
             "curve is flat; the edge rule in the metric)", "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             source="ours", basis="1 when the arm's best lr lies strictly inside its lr grid (or, for Post-LN at 18 "
                                  "and 24 layers, its curve is flat), 0 otherwise; one value per arm and depth"),
    ),
    reported=(*REGISTRATION_V4.reported,
              "At T/2: each arm at its own best lr per depth, and the depth interaction there.",
              "both_train_shallow's quantity, Post-LN − DeepNorm at 6 layers (v4's precondition), reported."),
)


# v3, the record v4 was written after (its pilot): unchanged.
REGISTRATION_V3 = Registration(
    claim="Post-LN degrades or fails as depth grows, even with warm-up; DeepNorm (and Pre-LN) keep training",
    detail=("Post-LN trains at moderate depth but degrades or fails as the model gets deeper: Admin's WMT14 En-De "
            "Post-LN reached 27.80 BLEU at 6 layers and failed to train at 12 and 18 (with warm-up); DeepNet's "
            "Post-LN baselines, trained with warm-up, became unstable at 50L-50L while DeepNorm trained 1000-layer "
            "models. The claim is about depth *with* the usual warm-up; without warm-up it is Xiong et al.'s "
            "(xiong_warmup)."),
    paper_number="Admin Table 1: Post-LN 27.80 BLEU at 6L, training failed at 12L and 18L; Pre-LN 27.27 / 28.26 / "
                 "28.38; DeepNet Fig. 1: Post-LN unstable from 50L-50L, DeepNorm trains 1000 layers",
    metric=("Final validation loss (nats per byte, 512 fixed windows = 64 KB) after 1000 steps of a cosine to 10% "
            "(from step 0) at 6 and 24 layers, in three arms: lr 1e-3 without warm-up; lr 1e-3 with a 100-step "
            "warm-up multiplying the schedule; lr 3e-4 with it. A diverged run counts as +∞. Differences are taken "
            "per seed (3 seeds); decisions on the 95% bootstrap interval of the median."),
    norm="LayerNorm, as the papers",
    label="after_pilot",
    pilot=Pilot(
        runs="v2 (commit af8f939, `experiments/deepnet_depth/` at that commit): d 64, 4 heads, FFN 256, lr 1e-3 "
             "without warm-up only, 200 steps at a constant lr, depths 6/24/48, 3 seeds.",
        numbers="Post-LN − Pre-LN at L = 48: 0.721 [0.713, 0.765]; Post-LN L48 − L6: 0.628; Post-LN collapsed at "
                "L = 24 and 48 (3.356 against the unigram 3.328); Pre-LN and DeepNorm 0.68–0.75 below the unigram "
                "line at every depth.",
        changed="The paper's claim is with warm-up, so two warm-up arms (lr 1e-3 and the lower 3e-4) join the "
                "no-warm-up one (which now repeats xiong_warmup's point at depth); 1000 steps (was 200); Post-LN is "
                "compared with DeepNorm (the paper's remedy) rather than Pre-LN; depths 6 and 24 (48 does not fit "
                "the CPU budget with three arms; the GPU preset has 48–192) of DeepNet's 64-128-2 model (FFN 128, 2 "
                "heads; v2's FFN 256 and 4 heads cost 30% more per step); decisions on the bootstrap interval of "
                "the median; a trainability guard.",
    ),
    guard=Guard(arm="Pre-LN and DeepNorm at every depth in every arm", margin=0.3,
                basis="the placements the papers say train must learn more than byte frequencies for a gap to "
                      "Post-LN to mean anything; the pilot's ended 0.68–0.75 nats below the line after 200 steps"),
    rules=(
        Rule("post_fails_deep_with_warmup", "With warm-up (both learning rates), Post-LN is far behind DeepNorm at "
             "the deepest model (or diverges)", "post_minus_deepnorm_deep_warmup", ">=", 0.3, decide="median_ci",
             basis="0.3 nats, the guard's margin: a gap as large as that between learning something and learning "
                   "byte frequencies (the pilot's no-warm-up gap was 0.72)"),
        Rule("post_degrades_with_warmup", "With warm-up, Post-LN is worse at the deepest model than at the "
             "shallowest", "post_deep_minus_shallow_warmup", ">=", 0.1, decide="median_ci",
             basis="a deeper model that trains ends lower, not higher; 0.1 nats is 5× the pilot's seed sd of "
                   "the trained placements' final loss (≈ 0.02)"),
        Rule("post_fails_deep_without_warmup", "Without warm-up, Post-LN is far behind DeepNorm at the deepest "
             "model", "post_minus_deepnorm_deep_no_warmup", ">=", 0.3, decide="median_ci",
             basis="as post_fails_deep_with_warmup"),
        Rule("deepnorm_keeps_training", "DeepNorm is no worse at the deepest model than at the shallowest, in every "
             "arm", "deepnorm_deep_minus_shallow", "<=", 0.05, decide="median_ci",
             basis="about twice the pilot's seed sd of the trained placements' final loss (≈ 0.02)"),
    ),
)
