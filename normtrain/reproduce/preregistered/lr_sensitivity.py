"""Wortsman et al. 2023: learning-rate sensitivity of the placements, and what QK-norm does to it. Registration v3."""

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

REGISTRATION = Registration(
    claim="QK-norm lowers learning-rate sensitivity and keeps attention logits small; depth raises sensitivity; "
          "Post-LN is more sensitive than Pre-LN",
    detail=("Wortsman et al. (2023) show that small models reproduce large-scale training instabilities when the "
            "learning rate is high, and measure them with the LR sensitivity E_η[min(ℓ(η), ℓ0) − ℓ*] over a grid "
            "of peak learning rates. Attention-logit growth is one of the two instabilities they identify, and "
            "QK-layernorm removes it and lowers LR sensitivity (their Fig. 1, 3); sensitivity rises with depth "
            "faster than with width (§3.4). Their runs are ~1e5 steps; Post-LN's trouble at high learning rates is "
            "the older story of Xiong et al. (2020) and Liu et al. (2020)."),
    paper_number="Fig. 1/3: without QK-layernorm the attention logits grow and the loss degrades at high learning "
                 "rates; with it the loss-vs-lr curve stays flat over more of the grid (lower LR sensitivity)",
    metric=("Final validation loss ℓ(η) (nats per byte, 512 fixed windows = 64 KB) after 1000 steps (a 50-step "
            "warm-up, 5%, then cosine) at each peak learning rate η ∈ {1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1} (at 24 "
            "layers the top five); ℓ0 the loss at initialization, ℓ* the best ℓ(η) of that variant, depth and "
            "seed; a diverged run's ℓ counts as ℓ0. LR sensitivity = mean over η of min(ℓ(η), ℓ0) − ℓ*, per seed; "
            "the depth comparison uses the learning rates run at every depth. The max attention logit at the end "
            "is the largest `attn_logit_max/layer_i` of the run's last log step. 3 seeds; decisions on the 95% "
            "bootstrap interval of the median."),
    norm="LayerNorm (as Wortsman et al.'s qk-layernorm); QK-norm uses the same norm",
    label="after_pilot",
    pilot=Pilot(
        runs="v2 (commit af8f939, `experiments/lr_sensitivity/` at that commit): 100 steps, a 10-step warm-up, "
             "Pre, Pre + QK-norm, Post, DeepNorm, Peri at 2 and 8 layers, η 3e-4 … 3e-1, 3 seeds.",
        numbers="LR sensitivity at L = 8: Peri 0.301, Pre + QK 0.357, Pre 0.463, DeepNorm 0.634, Post 0.127 (Post-LN "
                "collapsed to the unigram line at every η ≥ 3e-3: low sensitivity because nothing was learned); "
                "QK-norm lowered sensitivity by 0.10–0.11 (3/3 seeds) and kept the logits at 14–56 against ~1e3–1e5; "
                "depth (L8 − L2 for Pre-LN) −0.034; Post − Pre +0.100 at L2, −0.387 at L8; at 100 steps η = 3e-4 "
                "left every variant near the unigram line.",
        changed="1000 steps (10× longer; ~5% warm-up) so the curves measure learning, not start-up; a trainability "
                "guard; a third depth (24) for Pre-LN with and without QK-norm on the grid's top five learning "
                "rates, the depth check comparing L = 24 with L = 2 on the learning rates run at both; the grid "
                "drops its lowest point (3e-4) to fit the budget; Post-LN at 2 and 8, Peri-LN and DeepNorm at 8 "
                "only; the ranking rule that v2 added after its results (below) is declared here.",
    ),
    guard=Guard(arm="Pre-LN at its best learning rate, at every depth", margin=0.3,
                basis="sensitivities compare falls from the best loss; if the best Pre-LN run has not learned more "
                      "than byte frequencies the curves measure start-up, not stability (the v2 pilot's fault)"),
    rules=(
        Rule("qk_norm_lowers_sensitivity", "Pre-LN + QK-norm is less LR-sensitive than Pre-LN, at every depth",
             "pre_minus_pre_qk_sensitivity", ">", 0.0, decide="median_ci",
             basis="a direction: the whole interval of the median above 0"),
        Rule("qk_norm_bounds_attention_logits", "QK-norm keeps the attention logits smaller at high learning rates "
             "(Pre-LN's final max logit over Pre-LN + QK-norm's, at the grid's two highest learning rates, every "
             "depth)", "pre_over_pre_qk_logit", ">", 1.0, decide="median_ci",
             basis="a direction: the whole interval of the median ratio above 1"),
        Rule("depth_raises_sensitivity", "Pre-LN is more LR-sensitive at 24 layers than at 2",
             "pre_deep_minus_shallow_sensitivity", ">", 0.0, decide="median_ci",
             basis="a direction: the whole interval of the median above 0"),
        Rule("post_more_sensitive", "Post-LN is more LR-sensitive than Pre-LN, at 2 and 8 layers",
             "post_minus_pre_sensitivity", ">", 0.0, decide="median_ci",
             basis="a direction: the whole interval of the median above 0"),
    ),
    reported=("A ranking of the variants at 8 layers by median LR sensitivity, least sensitive first, where a "
              "variant whose best final loss over the whole grid sits on the unigram line in most seeds ranks last "
              "(its sensitivity is low because nothing was learned; this rule was added after v2's results and is "
              "in the check history).",
              "The max stable learning rate: the largest η whose run neither diverged, collapsed nor ended "
              "undertrained on the unigram line, per seed."),
)
