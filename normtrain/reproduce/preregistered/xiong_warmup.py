"""Xiong et al. 2020, §3.2: Post-LN needs learning-rate warm-up, Pre-LN does not. Registration v3."""

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

REGISTRATION = Registration(
    claim="Post-LN ends worse without learning-rate warm-up, more so at the higher learning rate; Pre-LN does not "
          "need warm-up",
    detail=("Post-LN Transformers need a learning-rate warm-up: on IWSLT14 De-En (Adam β = (0.9, 0.98)) Post-LN "
            "without warm-up reached BLEU 8.45 against ≈ 34 with a 4000-step warm-up, and a 500-step warm-up worked "
            "at lr 5e-4 (31.16) but not at 1e-3 (2.77): the need grows with the learning rate. Pre-LN trains "
            "without warm-up (Xiong et al. 2020, §3.2 and Fig. 2; §5). The claim is a difference of differences: "
            "Post-LN's warm-up penalty exceeds Pre-LN's."),
    paper_number="BLEU 8.45 without warm-up vs ≈ 34 with 4000 steps (Post-LN, IWSLT14); 500-step warm-up: 31.16 at "
                 "lr 5e-4, 2.77 at lr 1e-3",
    metric=("Final validation loss (nats per byte, 512 fixed windows = 64 KB) after 1500 steps of a cosine schedule "
            "to 10% of the peak, counted from step 0. The no-warm-up penalty of a seed is its final loss without "
            "warm-up minus its final loss with a linear warm-up over the first 150 steps (10%) that multiplies the "
            "same schedule (`optim.warmup_overlaps`): the pair differs in the ramp alone. A diverged run's loss "
            "counts as +∞ (both diverged: penalty 0). Seeds are paired across placements by index. 5 seeds; "
            "decisions on the 95% bootstrap interval of the median."),
    norm="LayerNorm, as the paper",
    label="after_pilot",
    pilot=Pilot(
        runs="v2 (commit af8f939, `experiments/xiong_warmup/` at that commit): the same 12-layer model, 600 steps "
             "at a constant lr after a 150-step warm-up, 3 seeds.",
        numbers="Post-LN penalty 0.453 [0.334, 0.669] at lr 1e-3 (its no-warm-up runs collapsed to the unigram "
                "line, 3.33) and 0.276 [0.145, 0.314] at 5e-4; Pre-LN |penalty| 0.018 and 0.040 (warm-up made "
                "Pre-LN slightly worse); every run still falling at step 600 (Pre-LN ≈ 0.1 nats per 150 steps); "
                "seed sd of the final loss: Post-LN with warm-up 0.054 (5e-4) and 0.18 (1e-3), Pre-LN 0.012 and "
                "0.025.",
        changed="Runs 2.5× longer with a decaying schedule so the with-warm-up runs flatten (their fall over the "
                "last 20% is reported); the warm-up multiplies a schedule counted from step 0 (v2's pairs already "
                "differed only in the ramp, at a constant lr); 5 seeds; a direct check on the difference of "
                "penalties (Post − Pre); Pre-LN's insensitivity a two-sided band; decisions on the bootstrap "
                "interval of the median; a trainability guard.",
    ),
    guard=Guard(arm="every with-warm-up run (Post-LN and Pre-LN, both learning rates)", margin=0.3,
                basis="a penalty is only meaningful when the warmed-up run learned more than byte frequencies; 0.3 "
                      "nats below the unigram line (the pilot's warmed-up Post-LN runs ended 0.34–0.71 below it)"),
    rules=(
        Rule("post_needs_warmup", "Post-LN without warm-up ends worse than with warm-up, at both learning rates",
             "post_penalty", ">=", 0.1, decide="median_ci",
             basis="about twice the pilot's seed sd of Post-LN's final loss with warm-up at lr 5e-4 (0.054)"),
        Rule("post_penalty_exceeds_pre", "Post-LN's warm-up penalty exceeds Pre-LN's (the claim itself), at both "
             "learning rates", "post_minus_pre_penalty", ">=", 0.1, decide="median_ci",
             basis="the same 0.1 nats as Post-LN's own penalty"),
        Rule("post_need_grows_with_lr", "Post-LN's need for warm-up grows with the learning rate",
             "post_penalty_growth", ">", 0.0, decide="median_ci",
             basis="a direction: the whole interval of the median above 0"),
        Rule("pre_insensitive", "Pre-LN barely cares: its penalty is about 0, at both learning rates", "pre_penalty",
             "between", (-0.05, 0.05), decide="median_ci",
             basis="±0.05 nats: twice the pilot's larger seed sd of Pre-LN's final loss (0.025 at lr 1e-3)"),
    ),
    reported=("The fitted fall of each run's training loss over its last 20% (300 steps), to show whether the "
              "with-warm-up runs have stopped falling (normtrain/outcome.py's trend).",),
)
