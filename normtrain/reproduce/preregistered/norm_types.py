"""Zhang & Sennrich 2019: RMSNorm (and pRMSNorm) match LayerNorm's quality at a lower cost.

``REGISTRATION`` is v7 (protocol v5, issue 59): v6's model and steps under WSD, read at T and at T/2, the best lr on
held-out windows, new seeds; the last registration of this claim at CPU scale. ``REGISTRATION_V6`` (protocol v4,
issue 37) is v7's pilot: v5's design trained 2× longer, each norm at 3 lrs of its own around
its v5 best, new seeds, pRMSNorm not run again; one change since its runs began, no check among it: RMSNorm's lr
grid's extension (``EXTENSION``). ``REGISTRATION_V5`` below it (its result, inconclusive on
trained_to_plateau alone, is v6's pilot; one change after its runs began, no check among it: the lr grid's extension,
``EXTENSION_V5``), ``REGISTRATION_V4`` (v5's pilot) and ``REGISTRATION_V3`` (v4's pilot, commit e9d2dde) are kept
unchanged as records."""

from normtrain.reproduce.preregistered.norm_types_v3_v4 import (  # noqa: F401 (records, importable from here)
    EQUIVALENCE,
    LRS_V4,
    REGISTRATION_V3,
    REGISTRATION_V4,
    STEPS_V4,
)
from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

STEPS_V5 = 2000  # configs/experiment/norm_types.yaml: train.max_steps
LRS_V5 = "5e-3, 1.25e-2, 3.125e-2, 7.8125e-2"  # its optim.lr axis: a log grid, factor 2.5
PRMS_LRS_V5 = "1.25e-2, 3.125e-2, 7.8125e-2"  # pRMSNorm (secondary): the grid less its smallest point
EXTENSION_V5 = ("The lr grid was extended after the registered grid's 49 runs had been seen, the same seeds, no check "
             "changed (CHECK_HISTORY entry 6): LayerNorm's best lr by the selection rule was 5e-3, the grid's lower "
             "edge (median selection loss 1.193 at 5e-3 against 1.194 at 1.25e-2), so 2e-3 (one step of the grid's "
             "factor 2.5) was added for LayerNorm (5 runs). This fails the precondition best_lr_inside_grid, whose "
             "stated remedy is to extend the grid (issue 37: extend the grid when the best sits at its edge). "
             "RMSNorm's best, 1.25e-2, lay inside its grid, so RMSNorm does not run at 2e-3. pRMSNorm's best was "
             "1.25e-2, the smallest of its registered points, so it also runs at 5e-3 on its seeds 10–12 (3 runs). "
             "8 runs, ≈ 10 min at --jobs 2")
BUDGET_V5 = ("Budget (issue 37 item 8, ≤ 3 h at --jobs 2): v4's 500-step runs of this model took 86 s on a quiet "
          "machine (its runs.csv: the fastest of 30; the others ran beside other work), about 0.17 s a step with "
          "its 21 evaluations; a run's time is linear in its steps at a fixed shape, so 2000 steps ≈ 350 s. 40 "
          "primary runs (2 norms × 4 lrs × 5 seeds) ≈ 233 min and 9 pRMSNorm runs ≈ 53 min of the runs' own time, "
          "≈ 143 min at --jobs 2, plus the timing (≈ 3 min): about 2.4 h. The secondary arm gives up the grid's "
          "smallest lr and two seeds before the primary gives up anything")

STEPS_V6 = 4000  # v6's train.max_steps
ARM_LRS_V6 = {"LayerNorm": "2e-3, 5e-3, 1.25e-2", "RMSNorm": "5e-3, 1.25e-2, 3.125e-2"}  # each arm's own grid
BUDGET_V6 = ("Budget (issue 37 item 8, ≤ 3 h at --jobs 2): v5's 2000-step runs of this model took 121–143 s each "
          "(median 136) on the quiet machine; 4000 steps ≈ 270 s (the 21 evaluations do not double). 30 runs "
          "(2 norms × 3 lrs × 5 seeds) ≈ 135 min of the runs' own time, ≈ 68 min at --jobs 2; the step timing "
          "is v5's, reused (the same model and batch, the same code of the timed step). pRMSNorm, secondary, is "
          "not run again: v5's measurement of it stands (the compute goes to the primary, issue 37 item 8)")

EXTENSION_V6 = ("The lr grid was extended after the registered grid's 30 runs had been seen, the same seeds, no check "
             "changed (CHECK_HISTORY entry 8): RMSNorm's best lr by the selection rule was 5e-3, its grid's lower "
             "edge (median selection loss 1.111 at 5e-3, 1.130 at 1.25e-2, 1.207 at 3.125e-2), which fails the "
             "precondition best_lr_inside_grid, whose stated remedy is to extend the grid; so RMSNorm also runs at "
             "2e-3, one step of the factor 2.5 (5 runs, ≈ 17 min at --jobs 2). LayerNorm's best, 5e-3, lay inside "
             "its grid")

REGISTRATION_V6 = Registration(
    claim="RMSNorm matches LayerNorm's quality, each at its own best learning rate (and trains faster)",
    detail=("RMSNorm drops LayerNorm's re-centering and keeps only the re-scaling: across their tasks it reaches "
            "LayerNorm's quality while running 7%–64% faster depending on the model; partial RMSNorm, which "
            "estimates the RMS from the first p = 6.25% of the features, performs comparably "
            "(Zhang & Sennrich 2019, Tables 1–5). Their speed numbers are training times of whole models. The "
            "quality claim is the paper's main one and decides; a norm's loss at one learning rate is one point of "
            "its lr curve, so each norm is compared at its own best learning rate (issue 37). pRMSNorm was measured "
            "by v5 (its pilot, below) and is not run here."),
    paper_number="same quality, 7%–64% faster than LayerNorm (their Tables 1–5)",
    metric=(f"Final validation loss (nats per byte, 512 fixed windows = 64 KB) of Pre-LN models (4 layers, d 64) "
            f"after {STEPS_V6} steps, each norm at its own 3 peak learning rates (LayerNorm {ARM_LRS_V6['LayerNorm']}; "
            f"RMSNorm {ARM_LRS_V6['RMSNorm']}: one step of the factor 2.5 either side of its v5 best), seeds 15–19. "
            "**Best lr, a rule fixed before the runs** (normtrain/reproduce/best_lr.py): for each norm, the lr "
            "whose runs have the lowest median over seeds of the *selection loss*, the mean training loss over the "
            "last 10% of the steps (logged every 20 steps: training batches, a different split from the "
            "validation windows the comparison is judged on); a tie goes to the smaller lr. The judged quantities "
            "are read at each norm's best lr and paired by seed (RMSNorm seed s at its best lr − LayerNorm seed s "
            "at its best lr). Speed: the whole training step of that model (forward, backward, clipping, AdamW "
            "update) with each norm in its best implementation on the device (CPU: torch's fused `layer_norm` for "
            "LayerNorm, `torch.nn.functional.rms_norm` for RMSNorm, which torch 2.13 does not fuse on a CPU; "
            "CUDA: normtrain's fused Triton RMSNorm), one thread on a CPU, 7 interleaved repeats each the median "
            "of 20 steps; the ratio RMSNorm/LayerNorm is taken per repeat (repeats of one measurement, not seeds). "
            f"{BUDGET_V6}. {EXTENSION_V6}."),
    norm="LayerNorm and RMSNorm compared (pRMSNorm: v5's measurement)",
    label="after_pilot",
    pilot=Pilot(
        runs="v5 (`REGISTRATION_V5` below, committed before its runs at 963fac1, its grid extended at c401c3b, "
             "runs at be2c4c5, 5862795 and 2b05af2, result 00154a4, `experiments/norm_types/` at c67ffee): "
             "LayerNorm and RMSNorm at lrs 5e-3, 1.25e-2, 3.125e-2, 7.8125e-2 (LayerNorm also 2e-3), seeds "
             "10–14; pRMSNorm at 5e-3 to 7.8125e-2, seeds 10–12; 2000 steps of a 4-layer d-64 model. Its own "
             "pilot was v4.",
        numbers="v5, inconclusive (precondition) on trained_to_plateau alone: at each norm's best lr by the "
                "selection rule (LayerNorm 5e-3, RMSNorm 1.25e-2, both inside their grids) the validation loss "
                "still fell 0.052 (LayerNorm, range of 5 seeds 0.048 to 0.056) and 0.068 (RMSNorm, 0.067 to "
                "0.075) nats over the last quarter, against ≤ 0.05. The primary: RMSNorm − LayerNorm +0.0058 nats "
                "(range of 5 seeds −0.016 to 0.014), 5/5 seeds inside ±0.02. Median selection loss LayerNorm "
                "1.266 / 1.193 / 1.194 / 1.316 at 2e-3 / 5e-3 / 1.25e-2 / 3.125e-2; RMSNorm 1.200 / 1.196 / 1.286 "
                "at 5e-3 / 1.25e-2 / 3.125e-2. Secondary: pRMSNorm − LayerNorm +0.034 (0.029 to 0.055, 0/3 "
                "inside ±0.02); whole-step time RMSNorm/LayerNorm 1.085 ± 0.049 (7 repeats). A one-seed "
                "constant-lr pilot after it (not registered, DISCUSSION.md): without the anneal the last "
                "quarter's fall was 0.050 and 0.054, so the runs were still learning, not only annealing.",
        changed=f"(1) Trained 2× longer: {STEPS_V6} steps (v5: 2000), the warm-up (200) and the evaluations (every "
                "200: 21 points, 5 in the last quarter) scaled with it, the training loss logged every 20 steps "
                "(the selection loss still averages 21 points): v5's runs still fell 0.05–0.07 nats over their "
                "last quarter, and learning, not the anneal, was most of it. (2) Each norm runs at 3 lrs of its "
                f"own, its v5 best and one step of the grid's factor 2.5 either side (LayerNorm "
                f"{ARM_LRS_V6['LayerNorm']}; RMSNorm {ARM_LRS_V6['RMSNorm']}); v5's points 3.125e-2 (LayerNorm) and "
                "7.8125e-2, 0.09 to 0.5 nats behind the best by the selection loss, are not run. A longer run "
                "usually wants a somewhat smaller lr, and each grid keeps one point below the v5 best. (3) New "
                "seeds 15–19 (v5: 10–14). (4) pRMSNorm and its secondary check `prms_comparable` are not run: "
                "v5 measured it (above), and the compute goes to the primary (issue 37 item 8). (5) The step "
                "timing (secondary `rms_trains_faster`) is v5's, reused: the same model, batch and timed code. "
                "The primary check and its ±0.02 band, the best-lr rule, both preconditions and their thresholds "
                "are v5's, unchanged.",
        seeds=(10, 11, 12, 13, 14),
    ),
    guard=Guard(arm="LayerNorm at its best lr (the reference of every quality comparison)", margin=0.3,
                quantity="reference_margin",
                basis="0.3 nats below the unigram line: well clear of a model that learned byte frequencies only "
                      "(the v5 pilot's LayerNorm at its best lr ended 2.14 nats below it)"),
    primary=Rule("rms_matches_ln", "RMSNorm's final loss at its best lr matches LayerNorm's at its best lr",
                 "rms_minus_ln_at_best", "between", (-0.02, 0.02), decide="median_ci", basis=EQUIVALENCE),
    secondary=(
        Rule("rms_trains_faster", "A training step with RMSNorm takes less time than with LayerNorm (each norm's "
             "best implementation on the device)", "rms_over_ln_step_time", "<", 1.0,
             basis="the paper's claim is any speed-up (7%–64%); below 1 in the median over repeats"),
    ),
    preconditions=(
        Rule("best_lr_inside_grid", "LayerNorm's and RMSNorm's best lr is not the smallest or largest of its grid "
             "(an edge best says: extend the grid)", "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             basis="1 when the arm's best lr lies strictly inside its lr grid, 0 at an edge; one value per arm"),
        Rule("trained_to_plateau", "at its best lr, each primary norm's validation loss has stopped falling: it "
             "fell by at most 0.05 nats over the last quarter of the run", "val_quarter_drop_at_best", "<=", 0.05,
             basis="outcome.py's STILL_FALLING: a larger fall labels a run undertrained (the v5 pilot: 0.052 "
                   "and 0.068 nats over the last quarter of 2000 steps)"),
    ),
    reported=("The whole loss-vs-lr curve: final validation loss per norm and lr over seeds (median and range, each "
              "norm's best lr marked) and a figure with every seed; each norm's selection loss per lr; the best lr "
              "that the judged loss itself would pick (for comparison with the selection rule's).",
              "Per-call forward + backward time of each norm alone on the model's activation shape, in the same "
              "composite torch ops and in each norm's best form (timings.csv), as ratios to LayerNorm per repeat."),
)



STEPS, HALF, BRANCH = 4000, 2000, 1600  # the YAML's train.max_steps; T/2 and the step its decay branch leaves T at
LRS = "2e-3, 5e-3, 1.25e-2"  # each norm's grid: v6's best for both, 5e-3, and one step of the factor 2.5 either side
SEEDS = "20–24"
EDGE_RULE = ("**Edges, a rule fixed now.** Both norms' best lr must lie strictly inside their grid (precondition "
             "`best_lr_inside_grid`). A best at an edge extends that norm's grid by one point beyond it (factor "
             "2.5), for every seed, at most twice per norm: a change of the YAML's lr axis (and ARM_LRS), "
             "committed and logged in CHECK_HISTORY.md as this rule's; the result is read on the extended grid. A "
             "best still at an edge after two points fails the precondition")
BUDGET = ("Budget (≤ 3 h at --jobs 2, --plan-only): 30 runs at T (2 norms × 3 lrs × 5 seeds) and 30 decay branches "
          "at T/2. v6's 4000-step runs of this model took 302–356 s each (median per grid point, "
          "experiments/norm_types/runs.csv at f6f5fa0, on a machine shared with other work); a branch trains 400 "
          "of the 4000 steps, ≈ 33 s: ≈ 180 min of their own, ≈ 90 min at --jobs 2; an edge extension adds 5 runs "
          "and 5 branches, ≈ 15 min at --jobs 2. The step timing is v6's, reused (the same model, batch and timed "
          "code)")
CAP = ("**The last registration of this claim at CPU scale** (issue 59: v3 → v6 followed precondition failures "
       "while the primary sat in its band): if a precondition fails here, the verdict stays *inconclusive* with its "
       "reason, and a further test of the claim is a GPU one")

REGISTRATION = Registration(
    claim="RMSNorm matches LayerNorm's quality, each at its own best learning rate, at T and at half the steps",
    detail=("RMSNorm drops LayerNorm's re-centering and keeps only the re-scaling: across their tasks it reaches "
            "LayerNorm's quality while running 7%–64% faster depending on the model; partial RMSNorm, which "
            "estimates the RMS from the first p = 6.25% of the features, performs comparably "
            "(Zhang & Sennrich 2019, Tables 1–5). Their speed numbers are training times of whole models. The "
            "quality claim is the paper's main one and decides, each norm at its own best learning rate (issue "
            "37). **Under protocol v5** (issue 59) the equivalence is read from the 90% t interval of the paired "
            "differences, at T and at T/2 (budget stability): v6's `trained_to_plateau`, which no run passed "
            "(0.051 and 0.053 nats of fall over the last quarter at 4000 steps, as at 2000), is gone. **The "
            "speed claim is not testable on a CPU**: torch 2.13 fuses LayerNorm there but not RMSNorm, so a CPU "
            "step compares an unfused kernel with a fused one, not the two norms (v6 measured 1.085× LayerNorm's "
            "step time); it is a check on a GPU, where both are fused (normtrain's Triton RMSNorm), and at CPU "
            "scale it is not measured. pRMSNorm was measured by v5 and is not run. " + CAP + "."),
    paper_number="same quality, 7%–64% faster than LayerNorm (their Tables 1–5)",
    metric=(f"Final validation loss (nats per byte, 512 fixed windows = 64 KB) of Pre-LN models (4 layers, d 64) "
            f"after {STEPS} steps of WSD (a 200-step warm-up, the peak lr until step 3200, then linearly to 10% of "
            f"it), evaluated every 200 steps, each norm at the peak learning rates {LRS}, seeds {SEEDS}. **Best "
            "lr, a rule fixed before the runs** (normtrain/study/best_lr.py, the held-out score of "
            "normtrain/study/best_against_best.py): per norm and budget, the lr whose runs have the lowest median "
            "over seeds of the *selection loss*, the loss at the run's end on 511 held-out validation windows "
            "between the judged ones (`train.select_windows`); a diverged run counts as +∞, a tie goes to the "
            "smaller lr. The judged quantities are read at each norm's best lr and paired by seed (RMSNorm seed s "
            f"at its best lr − LayerNorm seed s at its best lr). **T/2**: every run again at {HALF} steps, a "
            f"decay branch that leaves its T run at step {BRANCH} (normtrain/study/branches.py), each norm at its "
            "own best lr there. **Selection robustness**: for each norm whose runner-up lr is near-tied with its "
            "best (best_lr.runner_up), the primary again with that norm at its runner-up. " + EDGE_RULE + ". "
            f"{BUDGET}."),
    norm="LayerNorm and RMSNorm compared (pRMSNorm: v5's measurement)",
    label="after_pilot",
    version=5,
    pilot=Pilot(
        runs="v6 (`REGISTRATION_V6` below; `experiments/norm_types/` at f6f5fa0: runs.csv, result.json, "
             "timings.csv): LayerNorm at 2e-3, 5e-3, 1.25e-2 and RMSNorm at 2e-3 … 3.125e-2, seeds 15–19, 4000 "
             "steps of a 5% warm-up and a cosine to 10%, the best lr by the training loss's last 10%.",
        numbers="v6, inconclusive (precondition) on trained_to_plateau alone: RMSNorm − LayerNorm, both at their "
                "best lr 5e-3, median +0.0037 nats (range of 5 seeds −0.0035 to 0.0080), 5/5 seeds inside ±0.02: "
                "the primary held (as on v5's seeds at 2000 steps, +0.0058); the validation loss still fell 0.051 "
                "(LayerNorm) and 0.053 (RMSNorm) nats over the last quarter against ≤ 0.05. RMSNorm's best was its "
                "grid's lower edge 5e-3 until its grid was extended to 2e-3 (CHECK_HISTORY entry 8). The review "
                "(issue 59) read the primary on the evaluations along the run: +0.0042 / +0.0028 / +0.0037 at "
                "50 / 75 / 100% of the steps. Training-step time RMSNorm/LayerNorm 1.085 ± 0.049 (7 repeats) on "
                "the CPU, unfused against fused.",
        changed=f"(1) Protocol v5: the primary, its band ±0.02 unchanged, is decided by the 90% t interval and must "
                f"give the same call at T/2; trained_to_plateau is dropped, budget stability replaces it. (2) WSD "
                f"in place of the cosine, so that T/2 is a decay branch of a tenth of a run. (3) The best lr on "
                f"held-out validation windows, not training batches. (4) Both norms at {LRS} (v6's best for both "
                f"was 5e-3), with a registered edge rule. (5) rms_trains_faster is not measured at CPU scale (the "
                f"detail says why); it stays a secondary check for a GPU. (6) New seeds {SEEDS}. (7) The cap "
                f"above.",
        seeds=(15, 16, 17, 18, 19),
    ),
    guard=REGISTRATION_V6.guard,
    primary=Rule("rms_matches_ln", "RMSNorm's final loss at its best lr matches LayerNorm's at its best lr",
                 "rms_minus_ln_at_best", "between", (-0.02, 0.02), decide="interval", basis=EQUIVALENCE,
                 source="paper"),
    secondary=(
        Rule("rms_trains_faster", "A training step with RMSNorm takes less time than with LayerNorm, each norm "
             "fused (on a GPU only: not measured at CPU scale, where torch fuses LayerNorm alone)",
             "rms_over_ln_step_time", "<", 1.0, source="paper",
             basis="the paper's claim is any speed-up (7%–64%); below 1 in the median over repeats"),
    ),
    preconditions=(
        Rule("best_lr_inside_grid", "LayerNorm's and RMSNorm's best lr is neither the smallest nor the largest of "
             "its grid (the edge rule in the metric)", "best_lr_inside_grid", ">=", 1.0, decide=1.0, source="ours",
             basis="1 when the arm's best lr lies strictly inside its lr grid, 0 at an edge; one value per arm"),
    ),
    reported=("The whole loss-vs-lr curve at T and at T/2: final validation loss per norm and lr over seeds (median "
              "and range, each norm's best lr marked) and a figure with every seed; each norm's selection loss per "
              "lr; the best lr that the judged loss itself would pick.",
              "Each norm's validation loss fall over the last quarter at its best lr (v6's plateau reading, now "
              "reported only).",
              "The step and per-call timings on this device (v6's timings.csv, reused on a CPU) as ratios to "
              "LayerNorm per repeat, reported only at CPU scale."),
)


# v5, the record v6 was written after (its pilot): unchanged.
REGISTRATION_V5 = Registration(
    claim="RMSNorm matches LayerNorm's quality, each at its own best learning rate (and trains faster); pRMSNorm "
          "(p = 6.25%) is comparable",
    detail=("RMSNorm drops LayerNorm's re-centering and keeps only the re-scaling: across their tasks it reaches "
            "LayerNorm's quality while running 7%–64% faster depending on the model; partial RMSNorm, which "
            "estimates the RMS from the first p = 6.25% of the features, performs comparably "
            "(Zhang & Sennrich 2019, Tables 1–5). Their speed numbers are training times of whole models. The "
            "quality claim is the paper's main one and decides; a norm's loss at one learning rate is one point of "
            "its lr curve, so each norm is compared at its own best learning rate (issue 37)."),
    paper_number="same quality, 7%–64% faster than LayerNorm (their Tables 1–5)",
    metric=(f"Final validation loss (nats per byte, 512 fixed windows = 64 KB) of Pre-LN models (4 layers, d 64) "
            f"after {STEPS_V5} steps at peak learning rates {LRS_V5} per norm, seeds 10–14 (pRMSNorm: "
            f"{PRMS_LRS_V5}, seeds 10–12). **Best lr, a rule fixed before the runs** "
            "(normtrain/reproduce/best_lr.py): for each norm, "
            "the lr whose runs have the lowest median over seeds of the *selection loss*, the mean training loss "
            "over the last 10% of the steps (logged every 10 steps: training batches, a different split from the "
            "validation windows the comparison is judged on); a tie goes to the smaller lr. The judged quantities "
            "are read at each norm's best lr and paired by seed (RMSNorm seed s at its best lr − LayerNorm seed s "
            "at its best lr). Speed: the whole training step of that model (forward, backward, clipping, AdamW "
            "update) with each norm in its best implementation on the device (CPU: torch's fused `layer_norm` for "
            "LayerNorm, `torch.nn.functional.rms_norm` for RMSNorm, which torch 2.13 does not fuse on a CPU, and "
            "normtrain's composite formula for pRMSNorm; CUDA: normtrain's fused Triton RMSNorm), one thread on a "
            "CPU, 7 interleaved repeats each the median of 20 steps; the ratio RMSNorm/LayerNorm is taken per "
            f"repeat (repeats of one measurement, not seeds). {BUDGET_V5}. {EXTENSION_V5}."),
    norm="LayerNorm, RMSNorm and pRMSNorm compared",
    label="after_pilot",
    pilot=Pilot(
        runs="v4 (`REGISTRATION_V4` below, committed before its runs; runs at 6b6c02f, result "
             "0de9573, `experiments/norm_types/` at 6260f04): LayerNorm and RMSNorm at lrs 2e-3, 5e-3, 1.25e-2, "
             "seeds 5–9, 500 steps of a 4-layer d-64 model; pRMSNorm not run. Its own pilot was v3.",
        numbers="v4, inconclusive (precondition): both norms best at the grid's largest lr 1.25e-2 by the "
                "selection rule and by the validation loss alike (median selection loss LayerNorm 1.721 / 1.540 / "
                "1.501, RMSNorm 1.726 / 1.564 / 1.527 at 2e-3 / 5e-3 / 1.25e-2: best_lr_inside_grid failed); the "
                "validation loss still fell 0.102 (LayerNorm) and 0.097 (RMSNorm) nats over the last quarter "
                "(trained_to_plateau failed); RMSNorm − LayerNorm at 1.25e-2 +0.011 (median; range of 5 seeds "
                "0.0013 to 0.025, 5/5 seeds worse, 3/5 within ±0.02); whole-step time ratio 1.067 ± 0.182 (n = 7, "
                "a loaded machine); LayerNorm's final loss 1.505 ± 0.017.",
        changed=f"(1) The lr grid moves up one step and widens to 4 points ({LRS_V5}, factor 2.5): v4's best was its "
                "largest point for both norms, and a run 4× longer usually wants a somewhat smaller lr, so the grid "
                f"keeps 5e-3 below the v4 best. (2) Trained 4× longer: {STEPS_V5} steps (v4: 500), a 5% warm-up, "
                "evaluated every 5%; the preconditions (best lr inside the grid, ≤ 0.05 nats of fall over the "
                "last quarter) and the primary check and its ±0.02 band are unchanged. (3) New seeds 10–14 (v4: "
                f"5–9, v3: 0–4). (4) pRMSNorm (secondary) runs at {PRMS_LRS_V5} on seeds 10–12 only: compute goes to "
                "the primary first (issue 37 item 8). (5) The training loss is logged every 10 steps (v4: 5): the "
                "selection loss still averages 21 points.",
        seeds=(5, 6, 7, 8, 9),
    ),
    guard=Guard(arm="LayerNorm at its best lr (the reference of every quality comparison)", margin=0.3,
                quantity="reference_margin",
                basis="0.3 nats below the unigram line: well clear of a model that learned byte frequencies only "
                      "(the v4 pilot's LayerNorm runs ended 1.82 nats below it)"),
    primary=Rule("rms_matches_ln", "RMSNorm's final loss at its best lr matches LayerNorm's at its best lr",
                 "rms_minus_ln_at_best", "between", (-0.02, 0.02), decide="median_ci", basis=EQUIVALENCE),
    secondary=(
        Rule("prms_comparable", "pRMSNorm's final loss at its best lr is comparable to LayerNorm's at its best lr",
             "prms_minus_ln_at_best", "between", (-0.02, 0.02), decide="median_ci", basis=EQUIVALENCE),
        Rule("rms_trains_faster", "A training step with RMSNorm takes less time than with LayerNorm (each norm's "
             "best implementation on the device)", "rms_over_ln_step_time", "<", 1.0,
             basis="the paper's claim is any speed-up (7%–64%); below 1 in the median over repeats"),
    ),
    preconditions=(
        Rule("best_lr_inside_grid", "LayerNorm's and RMSNorm's best lr is not the grid's smallest or largest (an edge "
             "best says: extend the grid)", "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             basis="1 when the arm's best lr lies strictly inside its lr grid, 0 at an edge; one value per arm"),
        Rule("trained_to_plateau", "at its best lr, each primary norm's validation loss has stopped falling: it "
             "fell by at most 0.05 nats over the last quarter of the run", "val_quarter_drop_at_best", "<=", 0.05,
             basis="outcome.py's STILL_FALLING: a larger fall labels a run undertrained (the v4 pilot: 0.10 nats "
                   "over the last quarter of 500 steps)"),
    ),
    reported=("The whole loss-vs-lr curve: final validation loss per norm and lr over seeds (median and range, each "
              "norm's best lr marked) and a figure with every seed; each norm's selection loss per lr; the best lr "
              "that the judged loss itself would pick (for comparison with the selection rule's).",
              "Per-call forward + backward time of each norm alone on the model's activation shape, in the same "
              "composite torch ops and in each norm's best form (timings.csv), as ratios to LayerNorm per repeat."),
)
