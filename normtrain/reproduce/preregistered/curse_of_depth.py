"""Sun et al. 2025 (The Curse of Depth): Pre-LN's deep blocks approach the identity; LayerNorm Scaling makes them
count and lowers the loss. Registration v3, first registration."""

from normtrain.reproduce.preregistration import Guard, Registration, Rule

ORDERING = ("the paper's claim is a direction: a one-sided rule at 0 on per-seed paired differences, decided on "
            "the bootstrap interval of the median (with 5 seeds: every seed)")

REGISTRATION = Registration(
    claim="In Pre-LN the deep blocks approach the identity and skipping one costs little; LayerNorm Scaling "
          "(each block's norms × 1/√ℓ) makes them count again and lowers the loss",
    detail=("Sun et al. find that in Llama, Mistral, DeepSeek and Qwen models about half of the layers can be "
            "removed with little loss, mostly the deep ones (Fig. 1), and trace it to Pre-LN: the residual stream's "
            "variance grows with depth (exponentially in their bound), so a deep block's output is dominated by "
            "its input and its Jacobian approaches the identity. LayerNorm Scaling (LNS) multiplies the output of "
            "each Pre-LN norm of block ℓ by 1/√ℓ; across 130M to 7B parameters it lowers perplexity by 5–8% "
            "against Pre-LN, and the deep layers contribute more. The authors warn against combining it with "
            "depth-scaled initialisation (this model has Xavier init, no depth scaling)."),
    paper_number="5–8% lower perplexity than Pre-LN from 130M to 7B parameters; about half of the layers of "
                 "Llama/Mistral/Qwen removable with little loss (Fig. 1)",
    metric=("After 1000 training steps, `normtrain-probe` on each run's 512 validation windows (64 KB): the eval "
            "loss with block i skipped (the stream passes through unchanged) minus the full model's, the cosine of "
            "each block's input and output streams (per token, averaged), and the stream's rms after each block. "
            "The early half is blocks 0…11 of 24, the deep half 12…23; a half's value is the mean over its blocks. "
            "Final validation loss on the same windows, a diverged run +∞. Pre-LN, Pre-LN + LNS and Peri-LN, 5 seeds, "
            "paired by seed index; decisions on the 95% bootstrap interval of the median."),
    norm="RMSNorm, as the authors' LLaMA code (its LNS variant scales LlamaRMSNorm's output; the paper calls every "
         "norm LayerNorm)",
    label="before_runs",
    guard=Guard(arm="Pre-LN (the reference of every comparison)", margin=0.3,
                basis="0.3 nats below the unigram line, the margin of every v3 registration: a model whose blocks "
                      "are probed must have learned more than byte frequencies"),
    rules=(
        Rule("lns_deep_blocks_count", "With LayerNorm Scaling, skipping a deep block costs more than in Pre-LN",
             "lns_minus_pre_deep_skip", ">", 0.0, decide="median_ci", basis=ORDERING),
        Rule("lns_deep_blocks_less_identity", "With LayerNorm Scaling, the deep blocks' output is less aligned with "
             "their input than in Pre-LN", "pre_minus_lns_deep_cos", ">", 0.0, decide="median_ci", basis=ORDERING),
        Rule("pre_deep_blocks_near_identity", "In Pre-LN, the deep blocks' input/output cosine is higher than the "
             "early blocks'", "pre_cos_deep_minus_early", ">", 0.0, decide="median_ci", basis=ORDERING),
        Rule("lns_lower_loss", "LayerNorm Scaling ends at a lower validation loss than Pre-LN", "lns_minus_pre_loss",
             "<", 0.0, decide="median_ci",
             basis="5–8% lower perplexity is −0.05 to −0.08 nats per token, about −0.015 per byte for tokens of "
                   "≈ 4 bytes, near the seed sd of a final loss here (≈ 0.01, norm_types' pilot): only the sign is "
                   "required, in every seed"),
    ),
    reported=(
        "Peri-LN (the third arm): the same skip Δ and cosine by half, its final loss.",
        "The variance growth exponent k (Var(x_ℓ) ∝ ℓ^k, from the probe's rms after each block) of every arm.",
        "Pre-LN's early-half skip Δ against its deep-half skip Δ (the paper's 'removing an early layer costs a lot').",
    ),
)
