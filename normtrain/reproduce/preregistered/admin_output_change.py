"""Liu et al. 2020 (Admin), §4 and Thm. 3: how much a weight perturbation moves the output, against depth.
Registration v3."""

from normtrain.reproduce.preregistration import Pilot, Registration, Rule

REGISTRATION = Registration(
    claim="A weight perturbation changes Post-LN's output by O(N) in depth N, Pre-LN's by O(log N); DeepNorm's "
          "stays bounded",
    detail=("Admin shows that Post-LN depends heavily on its residual branches, so that a small perturbation δ of "
            "the parameters changes the output by E‖F(x, W) − F(x, W + δ)‖² = O(N) in the number of layers N, "
            "against O(log N) for Pre-LN (Liu et al. 2020, §4, Thm. 3): Post-LN amplifies parameter updates with "
            "depth, which destabilizes training. DeepNorm (Wang et al. 2022) is built to keep the change bounded. "
            "The theorem is a first-order (linear-response) statement about small δ."),
    paper_number="Thm. 3: Var[F(x,W) − F(x,W+δ)] = O(N) for Post-LN, O(log N) for Pre-LN",
    metric=("At initialization, every block matrix gets the same absolute perturbation δ ~ N(0, σ²) per entry, "
            "σ = 1e-3 and 1e-2 (an order apart, the same 16 draws scaled), whatever the model; "
            "E‖F(x,W) − F(x,W+δ)‖² per token, F the final hidden state the LM head reads, averaged over the draws "
            "and 8 × 128 validation bytes; depths 6…192, 20 seeds. Per seed: the log-log slope against N, and "
            "which growth model fits better, a + b·N or a + b·ln N (R² of each), at σ = 1e-3; the slope's change "
            "from σ = 1e-3 to 1e-2 tests the linear regime. Per-seed slopes are heavy-tailed, so every check "
            "decides on the 95% bootstrap interval of the median over seeds."),
    norm="LayerNorm, as the paper; RMSNorm as a second, labelled variant (5 seeds, not judged)",
    label="after_pilot",
    pilot=Pilot(
        runs="v2 (commit af8f939, `experiments/admin_output_change/` at that commit): σ = 1e-3 only, 4 draws, "
             "5 seeds, the same depths and models.",
        numbers="log-log slope Post-LN median 1.146 [0.661, 1.454] (mean 1.148 ± 0.314), Pre-LN 0.389 ± 0.038; "
                "Post-LN's O(N) fit better than O(log N) in 3 of 5 seeds (R² gap median 0.027); Pre-LN's O(log N) "
                "fit better in 5/5; slope difference median 0.716; DeepNorm L192/L6 0.844 ± 0.033.",
        changed="A second σ ten times larger, so the linear regime is checked (a new rule); 20 seeds × 16 draws "
                "(was 5 × 4); decisions on the bootstrap interval of the median (the per-seed slopes are "
                "heavy-tailed: v2 ranged 0.66–1.45); DeepNorm's 'bounded' is a two-sided band (was ≤ 2 only).",
    ),
    rules=(
        Rule("post_linear", "Post-LN: the change grows about linearly with depth (log-log slope)", "post_slope",
             "between", (0.6, 1.4), decide="median_ci",
             basis="O(N) means slope 1; ±0.4 keeps clear of Pre-LN's O(log N), whose local slope over 6–192 is "
                   "1/ln N ≈ 0.2–0.5 (the pilot's Pre-LN: 0.39)"),
        Rule("linear_regime", "The perturbations are small enough for the theorem: the depth slope does not change "
             "when σ grows tenfold, for every placement", "slope_change_with_sigma", "between", (-0.1, 0.1),
             decide="median_ci",
             basis="in the linear regime E‖ΔF‖² ∝ σ² at every depth, so the slopes agree exactly up to draw noise; "
                   "0.1 is a tenth of Post-LN's slope and a quarter of the narrowest gap the checks must resolve "
                   "(Post − Pre > 0.5)"),
        Rule("post_fits_linear", "Post-LN: O(N) fits better than O(log N)", "post_r2_linear_minus_log", ">", 0.0,
             decide="median_ci", basis="a direction: the whole interval of the median R² gap above 0"),
        Rule("pre_fits_log", "Pre-LN: O(log N) fits better than O(N)", "pre_r2_log_minus_linear", ">", 0.0,
             decide="median_ci", basis="a direction: the whole interval of the median R² gap above 0"),
        Rule("post_faster_than_pre", "Post-LN amplifies a perturbation much more with depth than Pre-LN "
             "(difference of log-log slopes)", "post_minus_pre_slope", ">", 0.5, decide="median_ci",
             basis="half the gap between O(N) (slope 1) and no growth (0)"),
        Rule("deepnorm_bounded", "DeepNorm: the change stays bounded (deepest over shallowest)",
             "deepnorm_deep_over_shallow", "between", (0.5, 2.0), decide="median_ci",
             basis="within a factor 2 either way over a 32× range of depth; O(log N) growth would give "
                   "ln 192 / ln 6 = 2.9, O(N) 32"),
    ),
)
