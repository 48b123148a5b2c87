"""Xiong et al. 2020, §3.2: Post-LN needs learning-rate warm-up, Pre-LN does not."""

from normtrain.reproduce.preregistration import Registration, Rule

REGISTRATION = Registration(
    claim="Post-LN ends worse without learning-rate warm-up, more so at the higher learning rate; Pre-LN does not "
          "need warm-up",
    detail=("Post-LN Transformers need a learning-rate warm-up: on IWSLT14 De-En (Adam β = (0.9, 0.98)) Post-LN "
            "without warm-up reached BLEU 8.45 against ≈ 34 with a 4000-step warm-up, and a 500-step warm-up worked "
            "at lr 5e-4 (31.16) but not at 1e-3 (2.77): the need grows with the learning rate. Pre-LN trains "
            "without warm-up (Xiong et al. 2020, §3.2 and Fig. 2; §5)."),
    paper_number="BLEU 8.45 without warm-up vs ≈ 34 with 4000 steps (Post-LN, IWSLT14); 500-step warm-up: 31.16 at "
                 "lr 5e-4, 2.77 at lr 1e-3",
    metric=("Final validation loss (nats per byte, 512 fixed windows = 64 KB) after 600 steps. The no-warm-up "
            "penalty of a seed is its final loss without warm-up minus its final loss with a linear warm-up over "
            "the first 150 steps (25% of the run), the learning rate constant after it, everything else equal; "
            "a diverged run's loss counts as +∞ (both diverged: penalty 0)."),
    norm="LayerNorm, as the paper",
    rules=(
        Rule("post_needs_warmup", "Post-LN without warm-up ends worse than with warm-up, at both learning rates",
             "post_penalty", ">=", 0.1),
        Rule("post_need_grows_with_lr", "Post-LN's need for warm-up grows with the learning rate",
             "post_penalty_growth", ">", 0.0),
        Rule("pre_insensitive", "Pre-LN barely cares: |penalty| small at both learning rates", "pre_abs_penalty",
             "<=", 0.1),
        Rule("pre_trains_without_warmup", "Pre-LN without warm-up trains: it beats the unigram baseline by a margin",
             "pre_no_warmup_margin", ">=", 0.3),
    ),
)
