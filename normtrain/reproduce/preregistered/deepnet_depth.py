"""Wang et al. 2022 (DeepNet) and Liu et al. 2020 (Admin): Post-LN fails with depth even with warm-up; DeepNorm
trains.

``REGISTRATION`` is v4 (issue 37: more deep points, more seeds, each placement at its own best learning rate at each
depth). ``REGISTRATION_V3`` below it is the v3 registration that the committed v3 result was judged by, kept
unchanged as a record: it is v4's pilot."""

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

DEPTHS = "6, 18, 24"  # configs/experiment/deepnet_depth.yaml: model.n_layers
POST_LRS, DEEPNORM_LRS = "1.25e-4, 2.5e-4, 5e-4, 1e-3", "5e-4, 1e-3, 2e-3, 4e-3"  # its optim.lr axis, per placement
EXTENSION = ("The grids were extended at their top edge during the runs, when all 60 Post-LN runs and DeepNorm's "
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
BUDGET = ("120 runs (2 placements × 4 lrs × 3 depths × 5 seeds). Estimate: on the quiet 2-core machine a v3 run "
          "(1000 steps, 5 evaluations) took 42–44 s at 6 layers and 156–161 s at 24 (experiments/reproduce_budget/"
          "sample_runs.csv); an evaluation of the 512 windows costs about as much as 21 training steps (64k tokens "
          "forward against 1k forward and backward), so a v3 run was ≈ 1105 step-equivalents at ≈ 6.0 ms per layer, "
          "and a v4 run, 1000 steps and 21 evaluations, ≈ 1441 of them: ≈ 8.7 s per layer. A seed's 8 (placement, "
          "lr) pairs over depths summing to 48 layers cost 8 × 48 × 8.7 s ≈ 3,320 s, 5 seeds ≈ 16,600 s of the runs' "
          "own time ≈ 138 min at --jobs 2 (this method, without the evaluations, estimated v3 at 49 min; it took 49 "
          "quiet-sampled, 83 on a loaded machine). To fit the 3 h, compute goes to the primary's arms, depths, lrs "
          "and seeds: Pre-LN (no check of the claim reads it), the no-warm-up arm (xiong_warmup's question) and a "
          "12-layer point (it would be reported only; +46 min) are left out")

REGISTRATION = Registration(
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
            f"layers; Post-LN at peak lrs {POST_LRS}, DeepNorm at {DEEPNORM_LRS} (log grids, factor 2). **Best lr, a "
            "rule fixed before the runs** (normtrain/reproduce/best_lr.py), per placement *and depth*: the lr whose "
            "runs have the lowest median over seeds of the *selection loss*, the mean training loss over the last "
            "10% of steps (logged every 10 steps; training batches, not the judged validation windows); a diverged "
            "run counts as +∞, a tie goes to the smaller lr. Judged quantities are read at each placement's best lr "
            "at that depth and paired by seed (a diverged run's loss is +∞). Seeds 3–7 (v3's pilot ran 0–2). "
            f"{BUDGET}. " + EXTENSION + "."),
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
                f"Post-LN at {POST_LRS}, DeepNorm at {DEEPNORM_LRS}; DeepNorm's best must lie inside its grid and "
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
