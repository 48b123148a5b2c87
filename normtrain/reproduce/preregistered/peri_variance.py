"""Kim et al. 2025 (Peri-LN): Pre-LN's residual-stream variance grows fast with depth (massive activations), Post-LN's
early gradients vanish, Peri-LN balances both and ends lower. Registration v3, first registration."""

from normtrain.reproduce.preregistration import Guard, Registration, Rule

ORDERING = ("the paper's claim is an ordering, not a size at this scale: a one-sided rule at 0 on per-seed paired "
            "differences, decided on the bootstrap interval of the median (with 5 seeds: every seed)")

REGISTRATION = Registration(
    claim="Pre-LN's residual-stream variance grows faster with depth than Peri-LN's, with massive activations; "
          "Post-LN's early-layer gradients vanish; Peri-LN ends at a lower loss than Pre-LN",
    detail=("Peri-LN puts a norm on each sublayer's input *and* output, x ← x + N_out(F(N_in(x))), as Gemma 2/3 and "
            "OLMo-2's variants do. Kim et al. analyse the three placements: under Pre-LN the hidden state's variance "
            "can grow exponentially with depth and keeps growing over training (\"massive activations\"); under "
            "Post-LN the gradients of the early layers vanish; under Peri-LN the variance grows about linearly "
            "(Var(x_{ℓ+1}) ≈ Var(x_ℓ) + a constant) and the gradients stay steady. Trained at 400M, 1.5B and 3.2B "
            "parameters on 30B tokens of DCLM-baseline, Peri-LN reaches a lower loss and higher benchmark scores "
            "than Pre-LN, with fewer gradient-norm spikes and less spread over training seeds (their §4; a "
            "secondary summary of their 400M table quotes a C4 loss of 3.34 against Pre-LN's 3.43 and about half as "
            "many gradient spikes; not checked against the paper here). Their models are 400M+ parameters trained "
            "for billions of tokens; here a d 64 model trains for 1M bytes, so the checks test the directions, "
            "not the sizes."),
    paper_number="Peri-LN below Pre-LN in loss at 400M, 1.5B and 3.2B, with fewer gradient spikes and less seed "
                 "spread; Pre-LN's variance grows exponentially with depth in their bound, Peri-LN's about linearly",
    metric=("From each run's own logs every 10 steps: the stream's rms and max |x| after each block "
            "(`monitor.residual_stats`) and each block's gradient norm. k: the least-squares exponent of "
            "Var(x_ℓ) ∝ ℓ^k over the blocks ℓ = 1…L at the last logged step (Var = rms²). Final max |x|: the "
            "largest over blocks at the last logged step. Gradient first/last: block 0's gradient norm over the "
            "last block's, median over the logged steps. Final validation loss: nats per byte on 512 fixed windows "
            "(64 KB), a diverged run +∞. Post-LN, Pre-LN and Peri-LN at 6 and 24 layers, 5 seeds, paired by seed "
            "index; decisions on the 95% bootstrap interval of the median."),
    norm="LayerNorm (the paper writes LN for LayerNorm or RMSNorm and trained with Megatron-LM, whose default is "
         "LayerNorm; which norm each of its tables used is not confirmed here); `norm=rmsnorm` is a one-override "
         "variant, not run",
    label="before_runs",
    guard=Guard(arm="Pre-LN and Peri-LN at both depths", margin=0.3,
                basis="0.3 nats below the unigram line, the margin of every v3 registration: well clear of a model "
                      "that learned byte frequencies only (d 64 models of deepnet_depth's pilot ended 0.68–0.75 "
                      "nats below it after 200 steps)"),
    rules=(
        Rule("pre_variance_grows_faster", "Pre-LN's stream variance grows faster over depth than Peri-LN's (at "
             "both depths)", "pre_minus_peri_growth_exponent", ">", 0.0, decide="median_ci", basis=ORDERING),
        Rule("pre_massive_activations", "Pre-LN's largest |x| in the stream at the end is far above Peri-LN's (the "
             "deepest model)", "pre_over_peri_absmax", ">=", 2.0, decide="median_ci",
             basis="a factor 2, far below the paper's orders of magnitude (massive activations), so a pass shows "
                   "the direction with a margin, not the paper's size; per seed, paired"),
        Rule("peri_lower_loss", "Peri-LN ends at a lower validation loss than Pre-LN (at both depths)",
             "peri_minus_pre_loss", "<", 0.0, decide="median_ci", basis=ORDERING),
        Rule("post_early_gradients_vanish", "Post-LN's first block gets a smaller share of the gradient (relative "
             "to its last block) than Pre-LN's (the deepest model)", "post_over_pre_grad_ratio", "<", 1.0,
             decide="median_ci", basis="the direction of the paper's claim (and of Xiong et al.'s gradient "
                                       "profiles): the ratio of the two placements' first/last ratios below 1"),
    ),
    reported=(
        "The seed spread (sd over seeds of the final loss) of each placement at each depth: the paper's "
        "'less seed-to-seed spread' for Peri-LN; not judged, 5 seeds do not pin down a standard deviation.",
        "Gradient-norm and loss spikes (OLMo-2 score: points ≥ 7σ from the mean of the previous 100 steps), "
        "summed over seeds, per placement and depth.",
        "Growth over training: the final max |x| over that at step 0, per placement and depth; Post-LN's k.",
    ),
)
