"""Wang et al. 2022 (DeepNet) and Liu et al. 2020 (Admin): Post-LN fails with depth even with warm-up; DeepNorm
trains. Registration v3."""

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

REGISTRATION = Registration(
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
        runs="v2 (commit af8f939, `experiments/deepnet_depth/` at that commit): the same model, lr 1e-3 without "
             "warm-up only, 200 steps at a constant lr, depths 6/24/48, 3 seeds.",
        numbers="Post-LN − Pre-LN at L = 48: 0.721 [0.713, 0.765]; Post-LN L48 − L6: 0.628; Post-LN collapsed at "
                "L = 24 and 48 (3.356 against the unigram 3.328); Pre-LN and DeepNorm 0.68–0.75 below the unigram "
                "line at every depth.",
        changed="The paper's claim is with warm-up, so two warm-up arms (lr 1e-3 and the lower 3e-4) join the "
                "no-warm-up one (which now repeats xiong_warmup's point at depth); 1000 steps (was 200); Post-LN is "
                "compared with DeepNorm (the paper's remedy) rather than Pre-LN; depths 6 and 24 (48 does not fit "
                "the CPU budget with three arms; the GPU preset has 48–192); decisions on the bootstrap interval of "
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
