"""Sun et al. 2025 (The Curse of Depth): Pre-LN's deep blocks approach the identity; LayerNorm Scaling makes them
count and lowers the loss.

``REGISTRATION`` is v5 (issue 59: protocol v5's interval call at T and at T/2 against the paper's −0.015 nats per
byte, held-out selection, an edge rule on both arms, new seeds). ``REGISTRATION_V4`` (issue 37: the loss claim
decides, each arm at its own best learning rate, new seeds, longer runs) and ``REGISTRATION_V3``, the first
registration (``before_runs``), that the committed v3 result (runs at 90b8580) was judged by: records kept
unchanged, each the next one's pilot."""

from dataclasses import replace

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

STEPS_V4 = 2000  # v4's train.max_steps
LRS_V4 = "2e-3, 5e-3 and 1.25e-2 (LNS also 3.125e-2)"  # its optim.lr axis: a log grid, factor 2.5
BUDGET_V4 = ("Budget (issue 37 item 8, ≤ 3 h at --jobs 2): 35 runs (Pre-LN 3 lrs, LNS 4, × 5 seeds) and 10 probes. "
          "v3's 24-layer runs took 248–252 s each for 1000 steps with per-layer monitoring every 10 steps (its "
          "runs.csv wall_time_s); at a fixed shape a run's time is linear in its steps, and v4 monitors only the "
          "loss (≈ 10% less), so 2000 steps ≈ 440 s, plus 21 evaluations of 512 windows at 24 layers (≈ 4 s each: "
          "1.5 s at 8 layers in experiments/reproduce_budget/, × 3 for the depth) ≈ 85 s: ≈ 525 s a run, 35 runs ≈ "
          "5.1 h of the runs' own time, ≈ 2.55 h at --jobs 2. The probe runs only at each arm's best lr: v3's 15 "
          "probes took ≈ 18 min of its 51.8 min at --jobs 2, so 10 take ≈ 12 min. About 2.75 h in all, under the "
          "3 h cap with little margin (a loaded machine takes longer)")
ORDER_AT_BEST = ("the paper's claim is a direction; per-seed paired differences (seed s of each arm at its own best "
                 "lr), a one-sided exact sign test at p ≤ 0.05 (with 5 seeds: all 5 in the paper's direction)")

REGISTRATION_V4 = Registration(
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
            f"models (d 64, RMSNorm) with and without LNS after {STEPS_V4} steps, each arm at peak learning rates "
            f"{LRS_V4}, seeds 5–9. **Best lr, a rule fixed before the runs** (normtrain/reproduce/best_lr.py): per "
            "arm, the lr whose runs have the lowest median over seeds of the mean training loss over the last 10% "
            "of the steps (training batches, logged every 5 steps, not the judged validation windows); a tie goes "
            "to the smaller lr. The judged quantities are read at each arm's best lr and paired by seed. After "
            "training, `normtrain-probe` measures the runs at each arm's best lr on their validation windows: the "
            "loss with block i skipped minus the full model's, the cosine of each block's input and output "
            "streams, the stream's rms after each block; the early half is blocks 0…11, the deep half 12…23, a "
            f"half's value the mean over its blocks. {BUDGET_V4}."),
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
                f"({LRS_V4}; LNS reaches one step higher because its scaled inputs may want a larger lr; Pre-LN's "
                "pilot in experiments/lr_sensitivity at 24 layers was best at 3e-3 of {1e-3…3e-1} and 0.74 nats "
                "worse at 3e-2, so that point is not run for it); each arm judged at its own best lr, which must "
                f"lie inside its grid (precondition). (3) Trained longer: {STEPS_V4} steps (v3: 1000), a 5% warm-up, "
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



STEPS, HALF, BRANCH = 2000, 1000, 800  # the YAML's train.max_steps; T/2 and the step its decay branch leaves T at
LRS = {"Pre-LN": "2e-3, 5e-3, 1.25e-2", "LNS": "5e-3, 1.25e-2, 3.125e-2"}  # each around its v4 best, factor 2.5
SEEDS = "15–18"
SESOI = ("the paper's own effect: 5–8% lower perplexity is −0.05 to −0.08 nats per token, about −0.015 nats per "
         "byte for tokens of ≈ 4 bytes (v4 stated it and did not use it; the review, issue 59). The interval "
         "refutes the claim only when its lower end lies above −0.015: LNS is then not 0.015 nats ahead")
EDGE_RULE = ("**Edges, a rule fixed now.** Both arms' best lr must lie strictly inside their grid (precondition "
             "`best_lr_inside_grid`). A best at an edge extends that arm's grid by one point beyond it (factor 2.5), "
             "for every seed, at most twice per arm: a change of the YAML's lr axis (and ARM_LRS), committed and "
             "logged in CHECK_HISTORY.md as this rule's; the result is read on the extended grid. A best still at "
             "an edge after two points fails the precondition")
BUDGET = ("Budget (≤ 3 h at --jobs 2, --plan-only): 24 runs at T (2 arms × 3 lrs × 4 seeds), 24 decay branches "
          "at T/2 and 8 probes. v4's 2000-step runs took 598–775 s each (median per grid point, "
          "experiments/curse_of_depth/runs.csv at f6f5fa0, with the same 21 evaluations); a branch trains 200 of "
          "the 2000 steps, ≈ 68 s: ≈ 290 min of their own, "
          "≈ 145 min at --jobs 2, and the probes ≈ 10 min. Four seeds, not five, keep it under 3 h (five: ≈ 190 "
          "min); an edge extension adds 4 runs and 4 branches, ≈ 25 min at --jobs 2")

REGISTRATION = Registration(
    claim="LayerNorm Scaling (each Pre-LN norm's output × 1/√ℓ) lowers the loss against Pre-LN, each at its own best "
          "learning rate, at T and at half the steps; it does so by making the deep blocks count again",
    detail=REGISTRATION_V4.detail + (
        " **Under protocol v5** (issue 59) the loss claim is read from the 90% t interval of the paired differences, "
        "at T and at T/2 (budget stability) in place of v4's `trained_to_plateau`, which no run passed (every "
        "best-lr run still fell 0.070–0.094 nats over its last quarter while the gap closed, +0.066 at step 1000 "
        "to +0.028 at 2000), and it is refuted only by an interval that excludes the paper's own effect."),
    paper_number=REGISTRATION_V4.paper_number,
    metric=(f"Final validation loss (nats per byte, 512 fixed windows = 64 KB, a diverged run +∞) of 24-layer Pre-LN "
            f"models (d 64, RMSNorm) with and without LNS after {STEPS} steps of WSD (a 100-step warm-up, the peak "
            f"lr until step 1600, then linearly to 10% of it), evaluated every 100 steps; Pre-LN at peak learning "
            f"rates {LRS['Pre-LN']}, LNS at {LRS['LNS']}; seeds {SEEDS}. **Best lr, a rule fixed before the runs** "
            "(normtrain/study/best_lr.py, the held-out score of normtrain/study/best_against_best.py): per arm and "
            "budget, the lr whose runs have the lowest median over seeds of the *selection loss*, the loss at the "
            "run's end on 511 held-out validation windows between the judged ones (`train.select_windows`); a tie "
            "goes to the smaller lr. The judged quantities are read at each arm's best lr and paired by seed. "
            f"**T/2**: every run again at {HALF} steps, a decay branch that leaves its T run at step {BRANCH} "
            "(normtrain/study/branches.py), each arm at its own best lr there. **Selection robustness**: for each "
            "arm whose runner-up lr is near-tied with its best (best_lr.runner_up), the primary again with that arm "
            "at its runner-up. After training, `normtrain-probe` measures the T runs at each arm's best lr on their "
            "validation windows: the loss with block i skipped minus the full model's, the cosine of each block's "
            "input and output streams, the stream's rms after each block; the early half is blocks 0…11, the deep "
            f"half 12…23, a half's value the mean over its blocks. {EDGE_RULE}. {BUDGET}."),
    norm=REGISTRATION_V4.norm,
    label="after_pilot",
    version=5,
    pilot=Pilot(
        runs="v4 (`REGISTRATION_V4` below; `experiments/curse_of_depth/` at f6f5fa0: runs.csv, result.json, "
             "DISCUSSION.md): Pre-LN at 2e-3, 5e-3, 1.25e-2 and LNS also at 3.125e-2, seeds 5–9, 2000 steps of a 5% "
             "warm-up and a cosine to 10%, the best lr by the training loss's last 10%, probes at the bests.",
        numbers="v4, inconclusive (precondition) on trained_to_plateau alone: each at its own best lr (Pre-LN 5e-3, "
                "LNS 1.25e-2), LNS − Pre-LN final loss +0.028 nats (median; range of 5 seeds 0.014 to 0.030), 0/5 "
                "seeds lower, so the primary (a sign test) would fail; every best-lr run still fell 0.070–0.094 "
                "nats over its last quarter and the gap was closing (+0.066 at step 1000); at a common 1.25e-2 LNS "
                "was 0.024 ahead. Secondary, both failed: deep-half skip Δ LNS − Pre-LN −0.011 (−0.020 to −0.0097), "
                "deep cosine Pre-LN − LNS −0.0074; curse_exists held (+0.032, 5/5); LNS's stream variance exponent "
                "0.49 against Pre-LN's 0.90. Runs took 598–775 s each: 401 min of their own with the probes.",
        changed=f"(1) Protocol v5: the primary, the same quantity, is decided by the 90% t interval, refuted only "
                f"when it excludes LNS's lead of 0.015 nats (the paper's effect, sesoi), and must give the same "
                f"call at T/2; trained_to_plateau is dropped, budget stability replaces it. (2) WSD in place of the "
                f"cosine, so that T/2 is a decay branch of a tenth of a run. (3) The best lr on held-out windows; "
                f"the training loss logged every 20 steps (v4's every 5 fed the training-tail selection), "
                f"evaluations every 5% as v4. (4) Each arm at 3 lrs around its v4 best (Pre-LN {LRS['Pre-LN']}, "
                f"LNS {LRS['LNS']}: LNS's 2e-3 dropped, far below its best), with a registered edge rule. (5) The "
                f"secondary checks are read from t intervals (4 seeds leave a sign test no way to pass: 1/16 > "
                f"5%). (6) New seeds {SEEDS}, four of them, to fit the 3 h.",
        seeds=(5, 6, 7, 8, 9),
    ),
    guard=REGISTRATION_V4.guard,
    primary=Rule("lns_lowers_loss", "LayerNorm Scaling at its best lr ends at a lower validation loss than Pre-LN at "
                 "its best lr", "lns_minus_pre_loss_at_best", "<", 0.0, decide="interval", sesoi=0.015, basis=SESOI,
                 source="paper"),
    secondary=(
        Rule("lns_deep_blocks_count", "With LayerNorm Scaling, skipping a deep block costs more than in Pre-LN "
             "(each at its best lr)", "lns_minus_pre_deep_skip_at_best", ">", 0.0, decide="interval", sesoi=0.0,
             source="paper", basis="a direction (the paper gives no size at this scale): refuted only by an "
                                   "interval wholly below 0"),
        Rule("lns_deep_blocks_less_identity", "With LayerNorm Scaling, the deep blocks' output is less aligned with "
             "their input than in Pre-LN (each at its best lr)", "pre_minus_lns_deep_cos_at_best", ">", 0.0,
             decide="interval", sesoi=0.0, source="paper",
             basis="a direction (the paper gives no size at this scale): refuted only by an interval wholly below 0"),
    ),
    preconditions=(
        replace(REGISTRATION_V4.preconditions[0], source="paper"),  # curse_exists: the paper's premise
        Rule("best_lr_inside_grid", "each arm's best lr is neither the smallest nor the largest of its grid (the "
             "edge rule in the metric)", "best_lr_inside_grid", ">=", 1.0, decide=1.0, source="ours",
             basis="1 when the arm's best lr lies strictly inside its lr grid, 0 at an edge; one value per arm"),
    ),
    reported=(*REGISTRATION_V4.reported,
              "At T/2: each arm at its own best lr, its final loss and the paired difference.",
              "Each arm's validation loss fall over the last quarter at its best lr (v4's plateau reading, now "
              "reported only)."),
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
