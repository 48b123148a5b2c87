"""Wang et al. 2022 (DeepNet), Fig. 4(a), 5 and Thm. 4.1/4.2: the early model update by placement and depth."""

from normtrain.reproduce.preregistration import Registration, Rule

REGISTRATION = Registration(
    claim="Post-LN's early model update is large and grows with depth; DeepNorm's is several times smaller and "
          "bounded in depth",
    detail=("DeepNet attributes Post-LN's instability to an exploding model update ‖F(x, θt) − F(x, θ0)‖ at the "
            "beginning of training, which grows with the number of layers (Thm. 4.1), and shows that DeepNorm's "
            "α/β keep the update bounded by a constant independent of depth (Thm. 4.2); Fig. 4(a) and Fig. 5 "
            "show Post-LN's update jumping early while DeepNorm's stays small."),
    paper_number="Fig. 4(a) (18L-18L, WMT-17): Post-LN's model update jumps in the first steps, DeepNet's stays "
                 "small; Thm. 4.2: DeepNorm's update is O(1) in depth",
    metric=("KL(p_θ0 ‖ p_θt) per token between the output distributions of the initial and the current model on 8 "
            "fixed validation sequences (`update/output_kl`), logged at every one of the first 100 steps: an "
            "unsaturated model update (the final hidden state is normalized, so ‖ΔF‖ measured on it saturates at "
            "≈ √2·‖F‖). 'Early' is step 10. Ratios are taken per seed."),
    norm="LayerNorm, as the paper",
    rules=(
        Rule("deepnorm_smaller", "DeepNorm's early update is several times smaller than Post-LN's, at every depth",
             "post_over_deepnorm", ">=", 3.0),
        Rule("post_grows_with_depth", "Post-LN's early update grows with depth (deepest over shallowest)",
             "post_deep_over_shallow", ">=", 2.0),
        Rule("deepnorm_bounded", "DeepNorm's early update stays bounded with depth (deepest over shallowest)",
             "deepnorm_deep_over_shallow", "<=", 2.0),
    ),
)
