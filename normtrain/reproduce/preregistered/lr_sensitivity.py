"""Wortsman et al. 2023: learning-rate sensitivity of the placements, and what QK-norm does to it."""

from normtrain.reproduce.preregistration import Registration, Rule

REGISTRATION = Registration(
    claim="QK-norm lowers learning-rate sensitivity and keeps attention logits small; depth raises sensitivity; "
          "Post-LN is more sensitive than Pre-LN",
    detail=("Wortsman et al. (2023) show that small models reproduce large-scale training instabilities when the "
            "learning rate is high, and measure them with the LR sensitivity E_η[min(ℓ(η), ℓ0) − ℓ*] over a grid "
            "of peak learning rates. Attention-logit growth is one of the two instabilities they identify, and "
            "QK-layernorm removes it and lowers LR sensitivity (their Fig. 1, 3); sensitivity rises with depth "
            "faster than with width (§3.4). Post-LN's trouble at high learning rates is the older story of Xiong "
            "et al. (2020) and Liu et al. (2020)."),
    paper_number="Fig. 1/3: without QK-layernorm the attention logits grow and the loss degrades at high learning "
                 "rates; with it the loss-vs-lr curve stays flat over more of the grid (lower LR sensitivity)",
    metric=("Final validation loss ℓ(η) (nats per byte, 512 fixed windows = 64 KB) after 100 steps at each peak "
            "learning rate η ∈ {3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1}; ℓ0 the loss at initialization, ℓ* the "
            "best ℓ(η) of that variant, depth and seed; a diverged run's ℓ counts as ℓ0. LR sensitivity = mean "
            "over η of min(ℓ(η), ℓ0) − ℓ*, per seed. The max attention logit at the end is the largest "
            "`attn_logit_max/layer_i` of the run's last log step. The max stable learning rate (reported, not "
            "judged) is the largest η whose run neither diverged nor ended collapsed on the unigram line."),
    norm="LayerNorm (as Wortsman et al.'s qk-layernorm); QK-norm uses the same norm",
    rules=(
        Rule("qk_norm_lowers_sensitivity", "Pre-LN + QK-norm is less LR-sensitive than Pre-LN, at both depths",
             "pre_minus_pre_qk_sensitivity", ">", 0.0),
        Rule("qk_norm_bounds_attention_logits", "QK-norm keeps the attention logits smaller at high learning "
             "rates (Pre-LN's final max logit over Pre-LN + QK-norm's, at the grid's two highest learning "
             "rates, both depths)",
             "pre_over_pre_qk_logit", ">", 1.0),
        Rule("depth_raises_sensitivity", "Pre-LN is more LR-sensitive at the larger depth",
             "pre_deep_minus_shallow_sensitivity", ">", 0.0),
        Rule("post_more_sensitive", "Post-LN is more LR-sensitive than Pre-LN, at both depths",
             "post_minus_pre_sensitivity", ">", 0.0),
    ),
)
