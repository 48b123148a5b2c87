"""Wang et al. 2022 (DeepNet), Fig. 4(a) and Thm. 4.1/4.2: the early model update by placement, depth and optimizer.
Registration v4 (v3, commit fc9c669, is its pilot)."""

from normtrain.reproduce.preregistration import Pilot, Registration, Rule

REGISTRATION = Registration(
    claim="Under SGD (the theorem's setting) Post-LN's early model update grows with depth while DeepNorm's stays "
          "bounded and several times smaller; under Adam, DeepNorm's grows with depth (its steps are sized by the lr)",
    detail=("DeepNet attributes Post-LN's instability to an exploding model update ‖F(x, θt) − F(x, θ0)‖ at the "
            "beginning of training, which grows with the number of layers (Thm. 4.1), and shows that DeepNorm's "
            "α/β keep the update bounded by a constant independent of depth (Thm. 4.2); Fig. 4(a) shows Post-LN's "
            "update jumping in the first steps while DeepNet's stays small. The bounds are for SGD-like steps, "
            "whose size follows the gradient; Adam's first steps have a size set by the learning rate alone, which "
            "can cancel the down-scaling β that the bound rests on (a hypothesis from our v2 results)."),
    paper_number="Fig. 4(a) (18L-18L, WMT-17): Post-LN's model update jumps in the first steps, DeepNet's stays "
                 "small; Thm. 4.2: DeepNorm's update is O(1) in depth (SGD)",
    metric=("‖F(x, θt) − F(x, θ0)‖ / ‖F(x, θ0)‖ on 8 fixed validation sequences, F the residual stream before the "
            "final norm (Post-LN and DeepNorm: the last block's output, the paper's F), logged at every one of the "
            "first 100 steps (`update/stream_change`); 'early' is its mean over steps 1–3 of a run. Depths 6, 24, "
            "96, 192; Post-LN and DeepNorm; SGD lr 1e-3 and Adam lr 5e-4 (β = (0.9, 0.98)), constant, no warm-up, no "
            "clipping; 5 seeds. Per seed: the log-log slope of the early update against depth, and Post-LN / "
            "DeepNorm at each depth. Decisions on the 95% bootstrap interval of the median. Every step also logs "
            "the gradient norms (`grad_norm/total`, `grad_norm/layer_i`) for the reported numbers below."),
    norm="LayerNorm, as the paper",
    label="after_pilot",
    pilot=Pilot(
        runs="v3 (commit fc9c669, re-analysed at 68809fb, `experiments/deepnet_update/` there): this registration's "
             "rules on Post-LN, Pre-LN and DeepNorm × L 6/24/96/192 × SGD 1e-3 and Adam 5e-4 × 5 seeds, 120 runs of "
             "100 steps; partly reproduced. Its own pilots were v2 (commit af8f939: Adam only, KL(p_θ0 ‖ p_θt) at "
             "step 10, depths 6/24/96, 5 seeds) and an SGD learning-rate pilot (2026-11-24, one seed, 5 steps), "
             "recorded in v3's registration, which chose SGD's lr 1e-3.",
        numbers="v3, per-seed median [min, max]: SGD Post-LN depth slope 0.866 [0.709, 0.922] (holds); SGD DeepNorm "
                "depth slope 0.903 [0.890, 0.927] (the ±0.2 band fails); Post-LN / DeepNorm ≥ 3 holds at every SGD "
                "depth (23–82) and at Adam L 6/24 (11.0, 7.9), fails at Adam L 96 (3.19 [2.35, 3.76]) and L 192 "
                "(1.63); Adam DeepNorm depth slope 0.657 (holds); Adam − SGD DeepNorm slope −0.240 (fails). Pre-LN, "
                "which no check reads: early update 0.33 → 1.62 (Adam) and 0.0055 → 0.041 (SGD) from L 6 to 192. "
                "120 runs, 0 diverged, 46 collapsed; over 2 h at --jobs 2 (the runs' own times sum to 598 min on a "
                "loaded machine, 257 min at their best).",
        changed="Rules, thresholds and the rest of the grid are v3's, unchanged. (1) Pre-LN leaves the grid: no "
                "check reads it, it cost a third of the runs' time, and the experiment has to fit issue 21's "
                "2-hour budget; v3's Pre-LN numbers stay in git and above. (2) Gradient norms are logged at every "
                "step, for v3's unexplained failure (DISCUSSION.md: does DeepNorm's SGD update grow with depth "
                "because the step η·g grows, or because the output's response to a step of fixed size grows?); "
                "what is computed from them is reported, not judged (below)."),
    reported=(
        "The gradient at initialization (step 0; the same for both optimizers), per placement: the per-seed "
        "log-log slope against depth of its total norm ‖g₀‖ and of the median over blocks of each block's "
        "gradient norm.",
        "SGD's first step, per placement: its step is exactly η·g₀, so the update per unit of step, "
        "(‖ΔF‖/‖F‖ at step 1) / (η‖g₀‖), separates the two sources; the per-seed log-log slope of it against "
        "depth, beside the slope of ‖g₀‖ (the two add up to the slope of the step-1 update).",
    ),
    rules=(
        Rule("sgd_post_grows", "SGD: Post-LN's early update grows with depth", "sgd_post_depth_slope", ">", 0.2,
             decide="median_ci", basis="at least 2× over the 32× range of depth (slope 0.2)"),
        Rule("sgd_deepnorm_bounded", "SGD: DeepNorm's early update is bounded in depth (Thm. 4.2)",
             "sgd_deepnorm_depth_slope", "between", (-0.2, 0.2), decide="median_ci",
             basis="within 2× either way over the 32× range of depth (slope ±0.2); Thm. 4.2's bound does not "
                   "depend on depth at all"),
        Rule("deepnorm_smaller", "DeepNorm's early update is several times smaller than Post-LN's, at every depth, "
             "under both optimizers", "post_over_deepnorm", ">=", 3.0, decide="median_ci",
             basis="'several times' (Fig. 4a); 3×, as v2 registered"),
        Rule("adam_deepnorm_grows", "Adam: DeepNorm's early update grows with depth (lr-sized steps cancel β)",
             "adam_deepnorm_depth_slope", ">=", 0.3, decide="median_ci",
             basis="half of the v2 observation (step-1 KL ~N^0.7 under Adam)"),
        Rule("adam_scales_faster_than_sgd", "DeepNorm's depth slope is larger under Adam than under SGD",
             "deepnorm_adam_minus_sgd_slope", ">", 0.2, decide="median_ci",
             basis="the difference between the SGD band's edge (0.2) and Adam's expected growth; a smaller "
                   "difference is within two bands' widths of each other"),
    ),
)
