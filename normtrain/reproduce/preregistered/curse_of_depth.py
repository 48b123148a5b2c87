"""Sun et al. 2025 (The Curse of Depth): Pre-LN's deep blocks approach the identity; LayerNorm Scaling makes them
count and lowers the loss.

``REGISTRATION`` is v4 (issue 37: the loss claim decides, each arm at its own best learning rate, new seeds, longer
runs). ``REGISTRATION_V3`` below it is the first registration (``before_runs``), that the committed v3 result (runs
at 90b8580) was judged by, kept unchanged as a record: it is v4's pilot."""

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

STEPS = 2000  # configs/experiment/curse_of_depth.yaml: train.max_steps
LRS = "2e-3, 5e-3 and 1.25e-2 (LNS also 3.125e-2)"  # its optim.lr axis: a log grid, factor 2.5
BUDGET = ("Budget (issue 37 item 8, ≤ 3 h at --jobs 2): 35 runs (Pre-LN 3 lrs, LNS 4, × 5 seeds) and 10 probes. "
          "v3's 24-layer runs took 248–252 s each for 1000 steps with per-layer monitoring every 10 steps (its "
          "runs.csv wall_time_s); at a fixed shape a run's time is linear in its steps, and v4 monitors only the "
          "loss (≈ 10% less), so 2000 steps ≈ 440 s, plus 21 evaluations of 512 windows at 24 layers (≈ 4 s each: "
          "1.5 s at 8 layers in experiments/reproduce_budget/, × 3 for the depth) ≈ 85 s: ≈ 525 s a run, 35 runs ≈ "
          "5.1 h of the runs' own time, ≈ 2.55 h at --jobs 2. The probe runs only at each arm's best lr: v3's 15 "
          "probes took ≈ 18 min of its 51.8 min at --jobs 2, so 10 take ≈ 12 min. About 2.75 h in all, under the "
          "3 h cap with little margin (a loaded machine takes longer)")
ORDER_AT_BEST = ("the paper's claim is a direction; per-seed paired differences (seed s of each arm at its own best "
                 "lr), a one-sided exact sign test at p ≤ 0.05 (with 5 seeds: all 5 in the paper's direction)")

REGISTRATION = Registration(
    claim="LayerNorm Scaling (each Pre-LN norm's output × 1/√ℓ) lowers the loss against Pre-LN, each at its own best "
          "learning rate; it does so by making the deep blocks count again",
    detail=("Sun et al. find that in Llama, Mistral, DeepSeek and Qwen models about half of the layers can be "
            "removed with little loss, mostly the deep ones (Fig. 1), and trace it to Pre-LN: the residual stream's "
            "variance grows with depth (exponentially in their bound), so a deep block's output is dominated by "
            "its input and its Jacobian approaches the identity. LayerNorm Scaling (LNS) multiplies the output of "
            "each Pre-LN norm of block ℓ by 1/√ℓ; across 130M to 7B parameters it lowers perplexity by 5–8% "
            "against Pre-LN (their tables), and the deep layers contribute more. The lower loss is the paper's "
            "main claim and decides; the deep blocks' contribution is the mechanism, reported beside it. LNS "
            "feeds block ℓ's sublayers inputs at 1/√ℓ of Pre-LN's scale (0.2–0.29 for blocks 12–23), which moves "
            "the learning rate it wants, so each arm is compared at its own best lr (issue 37). The authors warn "
            "against combining LNS with depth-scaled initialisation (this model has Xavier init, no depth "
            "scaling)."),
    paper_number="5–8% lower perplexity than Pre-LN from 130M to 7B parameters; about half of the layers of "
                 "Llama/Mistral/Qwen removable with little loss (Fig. 1)",
    metric=(f"Final validation loss (nats per byte, 512 fixed windows = 64 KB, a diverged run +∞) of 24-layer Pre-LN "
            f"models (d 64, RMSNorm) with and without LNS after {STEPS} steps, each arm at peak learning rates "
            f"{LRS}, seeds 5–9. **Best lr, a rule fixed before the runs** (normtrain/reproduce/best_lr.py): per "
            "arm, the lr whose runs have the lowest median over seeds of the mean training loss over the last 10% "
            "of the steps (training batches, logged every 5 steps, not the judged validation windows); a tie goes "
            "to the smaller lr. The judged quantities are read at each arm's best lr and paired by seed. After "
            "training, `normtrain-probe` measures the runs at each arm's best lr on their validation windows: the "
            "loss with block i skipped minus the full model's, the cosine of each block's input and output "
            "streams, the stream's rms after each block; the early half is blocks 0…11, the deep half 12…23, a "
            f"half's value the mean over its blocks. {BUDGET}."),
    norm="RMSNorm, as the authors' LLaMA code (its LNS variant scales LlamaRMSNorm's output; the paper calls every "
         "norm LayerNorm)",
    label="after_pilot",
    pilot=Pilot(
        runs="v3 (registered before_runs at 26b435e; runs at 90b8580, analysed at 2be2adb; `experiments/"
             "curse_of_depth/` at f574d06): Pre-LN, Pre-LN + LNS and Peri-LN at 24 layers, 1000 steps at lr 1e-3 "
             "only, seeds 0–4, evaluated at steps 500 and 1000.",
        numbers="v3, partly reproduced: final loss LNS − Pre-LN +0.323 nats (median; range 0.250 to 0.342, 0/5 "
                "seeds lower: lns_lower_loss failed), Pre-LN 1.608 ± 0.014, LNS 1.917 ± 0.034, Peri-LN 1.508 ± 0.019; "
                "deep-half skip Δ LNS − Pre-LN −0.035 (range −0.039 to −0.032, 0/5: lns_deep_blocks_count failed); "
                "deep-half cosine Pre-LN − LNS −0.020 (0/5: lns_deep_blocks_less_identity failed); Pre-LN's deep − "
                "early cosine +0.040 (range 0.037 to 0.051, 5/5: pre_deep_blocks_near_identity held). The losses "
                "fell 0.23 (Pre-LN) and 0.18 (LNS) nats from step 500 to 1000. The review (issue 37): one lr while "
                "LNS scales deep inputs by 0.2–0.29; runs still falling 0.16–0.26 nats; the only passing check "
                "would also hold at init.",
        changed=f"(1) Protocol v4: the paper's main claim, LNS's lower loss, is the primary check; the deep blocks' "
                "skip Δ and cosine (the mechanism) are secondary; Pre-LN's deep blocks being more identity-like than "
                "its early ones (v3's one passing check, true at initialization too) becomes a precondition: the "
                "curse LNS addresses must exist in our Pre-LN. (2) Best against best: Pre-LN at 3 lrs, LNS at 4 "
                f"({LRS}; LNS reaches one step higher because its scaled inputs may want a larger lr; Pre-LN's "
                "pilot in experiments/lr_sensitivity at 24 layers was best at 3e-3 of {1e-3…3e-1} and 0.74 nats "
                "worse at 3e-2, so that point is not run for it); each arm judged at its own best lr, which must "
                f"lie inside its grid (precondition). (3) Trained longer: {STEPS} steps (v3: 1000), a 5% warm-up, "
                "evaluated every 5% of the run; a precondition that each arm's validation loss has stopped falling "
                "(≤ 0.05 nats over the last quarter, outcome.py's `undertrained` threshold): a deficit of a run "
                "still falling is not the arm's quality. (4) New seeds 5–9 (v3: 0–4). (5) Peri-LN is dropped from "
                "this experiment (its comparison with Pre-LN is peri_variance's primary) and the probe runs only at "
                "each arm's best lr, to fit the budget (issue 37 item 8). (6) Per-layer monitoring during training "
                "is off: the probe measures the trained models.",
        seeds=(0, 1, 2, 3, 4),
    ),
    guard=Guard(arm="Pre-LN at its best lr (the reference of every comparison)", margin=0.3,
                basis="0.3 nats below the unigram line: a model whose blocks are probed must have learned more than "
                      "byte frequencies (the v3 pilot's Pre-LN ended 1.72 nats below it)"),
    primary=Rule("lns_lowers_loss", "LayerNorm Scaling at its best lr ends at a lower validation loss than Pre-LN at "
                 "its best lr", "lns_minus_pre_loss_at_best", "<", 0.0, decide="sign_test",
                 basis="5–8% lower perplexity is −0.05 to −0.08 nats per token, about −0.015 per byte for tokens "
                       "of ≈ 4 bytes, near the v3 pilot's paired spread of the difference (stats.paired_sd 0.036, "
                       "n = 5, at one lr): only the sign is required; " + ORDER_AT_BEST),
    secondary=(
        Rule("lns_deep_blocks_count", "With LayerNorm Scaling, skipping a deep block costs more than in Pre-LN "
             "(each at its best lr)", "lns_minus_pre_deep_skip_at_best", ">", 0.0, decide="sign_test",
             basis=ORDER_AT_BEST),
        Rule("lns_deep_blocks_less_identity", "With LayerNorm Scaling, the deep blocks' output is less aligned with "
             "their input than in Pre-LN (each at its best lr)", "pre_minus_lns_deep_cos_at_best", ">", 0.0,
             decide="sign_test", basis=ORDER_AT_BEST),
    ),
    preconditions=(
        Rule("curse_exists", "In Pre-LN at its best lr, the deep blocks' input/output cosine is higher than the "
             "early blocks' (the curse LNS addresses is there to address)", "pre_cos_deep_minus_early_at_best", ">",
             0.0, decide="median",
             basis="a precondition, not evidence: it holds at initialization too (the review of v3); the median "
                   "over seeds above 0"),
        Rule("best_lr_inside_grid", "each arm's best lr is not the smallest or largest of its grid (an edge best "
             "says: extend the grid)", "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             basis="1 when the arm's best lr lies strictly inside its lr grid, 0 at an edge; one value per arm"),
        Rule("trained_to_plateau", "at its best lr, each arm's validation loss has stopped falling: it fell by at "
             "most 0.05 nats over the last quarter of the run", "val_quarter_drop_at_best", "<=", 0.05,
             basis="outcome.py's STILL_FALLING: a larger fall labels a run undertrained (the v3 review: still "
                   "falling 0.16–0.26 nats at 1000 steps)"),
    ),
    reported=(
        "The whole loss-vs-lr curve: final validation loss per arm and lr over seeds (median and range, the best "
        "marked) and a figure with every seed; each arm's selection loss per lr; the best lr the judged loss itself "
        "would pick.",
        "At each arm's best lr: the skip Δ, cosine and stream-rms profiles per block, the early-half skip Δ, and "
        "the variance growth exponent k (Var(x_ℓ) ∝ ℓ^k, from the probe's rms).",
    ),
)


# v3, the record v4 was written after (its pilot): unchanged.

ORDERING = ("the paper's claim is a direction: a one-sided rule at 0 on per-seed paired differences, decided on "
            "the bootstrap interval of the median (with 5 seeds: every seed)")

REGISTRATION_V3 = Registration(
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
