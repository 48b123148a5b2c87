"""Liu et al. 2020 (Admin), §4 and Thm. 3: how much a weight perturbation moves the output, against depth."""

from normtrain.reproduce.preregistration import Registration, Rule

REGISTRATION = Registration(
    claim="A weight perturbation changes Post-LN's output by O(N) in depth N, Pre-LN's by O(log N); DeepNorm's "
          "stays bounded",
    detail=("Admin shows that Post-LN depends heavily on its residual branches, so that a small perturbation δ of "
            "the parameters changes the output by E‖F(x, W) − F(x, W + δ)‖² = O(N) in the number of layers N, "
            "against O(log N) for Pre-LN (Liu et al. 2020, §4, Thm. 3): Post-LN amplifies parameter updates with "
            "depth, which destabilizes training. DeepNorm (Wang et al. 2022) is built to keep the change bounded."),
    paper_number="Thm. 3: Var[F(x,W) − F(x,W+δ)] = O(N) for Post-LN, O(log N) for Pre-LN",
    metric=("At initialization, every block matrix gets the same absolute perturbation δ ~ N(0, 0.001²) per "
            "entry, whatever the model (a perturbation scaled by each matrix's size would favour models initialized "
            "small); E‖F(x,W) − F(x,W+δ)‖² per token, F the final hidden state the LM head reads, averaged over 4 "
            "draws of δ and 8 × 128 validation bytes; depths 6…192. Per seed: the log-log slope against N, and "
            "which growth model fits better, a + b·N or a + b·ln N (R² of each)."),
    norm="LayerNorm, as the paper; RMSNorm as a second, labelled variant (not judged)",
    rules=(
        Rule("post_linear", "Post-LN: the change grows about linearly with depth (log-log slope)", "post_slope",
             "between", (0.6, 1.4)),
        Rule("post_fits_linear", "Post-LN: O(N) fits better than O(log N)", "post_r2_linear_minus_log", ">", 0.0,
             decide=0.8),
        Rule("pre_fits_log", "Pre-LN: O(log N) fits better than O(N)", "pre_r2_log_minus_linear", ">", 0.0,
             decide=0.8),
        Rule("post_faster_than_pre", "Post-LN amplifies a perturbation much more with depth than Pre-LN "
             "(difference of log-log slopes)", "post_minus_pre_slope", ">", 0.5),
        Rule("deepnorm_bounded", "DeepNorm: the change stays bounded (deepest over shallowest)",
             "deepnorm_deep_over_shallow", "<=", 2.0),
    ),
)
