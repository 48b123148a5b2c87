"""Wang et al. 2022 (DeepNet) and Liu et al. 2020 (Admin): Post-LN degrades with depth; Pre-LN and DeepNorm train."""

from normtrain.reproduce.preregistration import Registration, Rule

REGISTRATION = Registration(
    claim="Without warm-up, Post-LN degrades or fails as depth grows; Pre-LN and DeepNorm keep training",
    detail=("Post-LN trains at moderate depth but degrades or fails as the model gets deeper: Admin's WMT14 En-De "
            "Post-LN reached 27.80 BLEU at 6 layers and failed to train at 12 and 18; DeepNet's Post-LN baselines "
            "became unstable at 50L-50L. Pre-LN and DeepNorm keep training (DeepNet trained 1000-layer models)."),
    paper_number="Admin Table 1: Post-LN 27.80 BLEU at 6L, training failed at 12L and 18L; Pre-LN 27.27 / 28.26 / "
                 "28.38",
    metric=("Final validation loss (nats per byte, 512 fixed windows = 64 KB) after 200 steps without warm-up at a "
            "learning rate at which Post-LN trains at 6 layers; a diverged run counts as +∞. Differences are taken "
            "per seed. 'Trains' means the final loss beats the unigram baseline by at least 0.3 nats."),
    norm="LayerNorm, as the papers",
    rules=(
        Rule("post_behind_pre_deep", "Post-LN is far behind Pre-LN at the deepest model (or diverges)",
             "post_minus_pre_deepest", ">=", 0.5),
        Rule("post_degrades", "Post-LN degrades with depth (deepest minus shallowest)", "post_deep_minus_shallow",
             ">=", 0.1),
        Rule("pre_deepnorm_train", "Pre-LN and DeepNorm train at every depth (margin below the unigram baseline)",
             "margin_below_unigram", ">=", 0.3),
    ),
)
