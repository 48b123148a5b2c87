"""HybridNorm past 16 layers (issue 39): does HybridNorm train at 24 and 48 layers where Pre-LN does?

``REGISTRATION`` is v5 (issue 59, the review's major: a positive control at 12 layers with the reference's init and
warm-up first, then 24 layers, protocol v5's interval call at T and T/2, new seeds). ``REGISTRATION_V4`` is the one
the committed result (seeds 0–2) was judged by, kept unchanged as a record: first registered before any run, revised
after a one-seed pilot (seed 100; experiments/hybrid_depth/CHECK_HISTORY.md entries 2 and 3). The settings are in
configs/experiment/hybrid_depth.yaml."""

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

STEPS_V4 = 600  # v4's train.max_steps
LRS_V4 = ("Pre-LN 1e-3, 3e-3, 1e-2; HybridNorm and HybridNorm* 3e-4, 1e-3, 3e-3 (log grids, factor ≈ 3; "
       "normtrain/reproduce/hybrid_depth.py ARM_LRS)")
EXTEND_V4 = ("**Where a primary arm's best lr sits at its grid's edge at a depth, the grid is extended there by one "
          "point of the same factor on that side, same seeds, before the verdict** (fixed now, before the runs: "
          "issue 37's 'extend the grid when the best sits at its edge'); the result of the registered grid alone "
          "is kept beside it. Applied after the registered grid's 63 runs (CHECK_HISTORY entry 4): Pre-LN 3e-2 "
          "at 12 layers, HybridNorm 1e-4 at 24 layers, and HybridNorm* (secondary, beyond the rule) 1e-4 at 24 "
          "layers; HybridNorm's best at 48 layers (1e-3) was inside its grid, though every one of its lrs "
          "collapsed there")
BAND = ("+0.02 nats, an a-priori non-inferiority margin: about 1% of the final loss at this scale, the margin "
        "norm_types uses for an equivalence of two norms. The pilot of this experiment (one seed) gives no paired "
        "spread to take it from (stats.paired_sd is reported beside the verdict); norm_types' pilot paired spread "
        "of two norms was 0.0016 nats, and a placement swap at 24–48 layers is expected to be noisier, so the band "
        "is judged on the median's interval over seeds (6 at --scale gpu: a bootstrap CI; ≤ 5: the range, every "
        "seed)")

REGISTRATION_V4 = Registration(
    claim="HybridNorm trains at 24 and 48 layers where Pre-LN does: no divergence, and a final loss at its best lr "
          "not worse than Pre-LN's at its best lr beyond a paired band",
    detail=("**Who claims what.** The paper (Zhuo et al. 2025, *HybridNorm*, NeurIPS 2025, arXiv 2503.04598; code "
            "BryceZhuo/HybridNorm, an OLMo fork) proposes per-head QKV-norm in the attention and Post-LN around the "
            "FFN (HybridNorm), and HybridNorm* with a Pre-LN first block, and reports them training stably with a "
            "lower loss than Pre-Norm; its dense models have at most 16 layers (its reviewers' point: 'limited to "
            "models with up to 16 layers'). A **reimplementation** reports HybridNorm diverging deeper (SCIENCE.md's "
            "catalog notes; we have no number from it). The question is therefore not the paper's own figure but "
            "whether its claim extends past its depths: **at 24 and 48 layers, does HybridNorm train where Pre-LN "
            "does?** Each arm is compared at its own best learning rate (issue 37): a placement that needs a "
            "smaller lr at depth is not penalised for it, one that diverges at every lr where Pre-LN trains is."),
    paper_number="no number beyond 16 layers: HybridNorm below Pre-Norm in loss at ≤ 16 layers (their 550M and 1.2B "
                 "dense models); the reimplementation's divergence deeper comes with no number we could locate",
    metric=(f"Final validation loss (nats per byte, 128 fixed windows at the CPU scale) of RMSNorm models of 12, "
            f"24 and 48 layers (d 64 at the CPU scale) after {STEPS_V4} steps, per arm (Pre-LN, HybridNorm, "
            f"HybridNorm*; at the CPU scale HybridNorm* at 24 layers only) at peak learning rates {LRS_V4}. "
            "**Best lr, a rule fixed before the runs** (normtrain/reproduce/best_lr.py), at each depth and arm: the "
            "lr whose runs have the lowest median over seeds of the *selection loss*, the mean training loss over "
            "the last 10% of the steps (training batches, not the validation windows judged); a diverged run "
            "counts +∞; a tie goes to the smaller lr. The judged difference is HybridNorm seed s at its best lr − "
            "Pre-LN seed s at its best lr (+∞ where HybridNorm's run diverged), at 24 and at 48 layers; its "
            "growth with depth is that difference at 24 (48) layers minus the same seed's at 12. " + EXTEND_V4 + ". A "
            "divergence is the trainer's (a non-finite loss, normtrain/training). CPU time: 63 runs, about 1 h "
            "45 min at --jobs 2 (the YAML's comment gives the estimate and its basis)."),
    norm="RMSNorm in every arm (the reference code's norm; HybridNorm's QKV-norms are per-head RMSNorms with a gain)",
    label="after_pilot",
    pilot=Pilot(
        runs="one seed (100) at the first registration's settings (300 steps, d 64, RMSNorm, evaluated at the end), "
             "`normtrain experiment=hybrid_depth placement=… model.n_layers=… optim.lr=… train.seed=100`: Pre-LN at "
             "12 and 24 layers and HybridNorm at 12 over 1e-4…3e-2; then four runs at 12 layers (HybridNorm 1e-3 "
             "with a 60-step warm-up; HybridNorm 1e-3 and 3e-3 and Pre-LN 1e-2 over 600 steps). Run folders "
             "hybrid_pilot and hybrid_pilot2 on the project's CPU machine (not committed); every number is in "
             "CHECK_HISTORY entries 2 and 3.",
        numbers="final validation loss (the unigram line ≈ 3.35), 300 steps: Pre-LN 12 layers 2.310 / 2.025 / "
                "1.934 / 2.338 at 1e-3 / 3e-3 / 1e-2 / 3e-2; Pre-LN 24 layers 2.319 / 2.035 / 2.104 / 2.472; "
                "HybridNorm 12 layers 3.593 / 2.949 / 2.714 / 3.180 / 3.357 / 3.358 at 1e-4 … 3e-2 (best 1e-3, "
                "the first grid's smallest; 0.78 nats behind Pre-LN). A 60-step warm-up: HybridNorm 1e-3 2.588. "
                "600 steps: HybridNorm 2.297 at 1e-3 (still falling 0.04 nats over the last quarter) and 3.355 at "
                "3e-3 (flat on the unigram line from step 60: collapsed); Pre-LN 1.618 at 1e-2 (falling 0.10 over "
                "the last quarter).",
        changed="(1) Each arm its own three lrs: HybridNorm and HybridNorm* at 3e-4, 1e-3, 3e-3 (the first grid "
                "would have put its best at the edge, 1e-3, with 1e-2 on the unigram line); Pre-LN keeps 1e-3, "
                "3e-3, 1e-2 (its pilot best 1e-2 at 12 layers, 3e-3 at 24, inside). (2) 600 steps instead of 300 "
                "(HybridNorm gained 0.42 nats from the doubling, Pre-LN 0.32; a longer warm-up gained 0.13), paid "
                "for by 128 validation windows instead of 256 and, at the CPU scale only, HybridNorm* (secondary) "
                "at 24 layers only (issue 37: compute to the primary claim first). (3) A new secondary check, "
                "`hybrid_gap_flat_with_depth`: the pilot shows HybridNorm far behind Pre-LN at 12 layers already, "
                "inside the paper's depths, at this width and length; whether the gap *grows* with depth is the "
                "part of 'trains where Pre-LN does' that this scale can answer. (4) The grid-extension rule in the "
                "metric, fixed before the runs. No threshold changed; the pilot's seed is not among the registered "
                "ones.",
        seeds=(100,)),
    guard=Guard(arm="Pre-LN at its best lr, at every depth (the reference of every comparison)", margin=0.3,
                basis="0.3 nats below the unigram line: well clear of a model that learned byte frequencies only"),
    primary=Rule("hybrid_trains_deep", "At 24 and at 48 layers HybridNorm's final loss at its best lr is not worse "
                 "than Pre-LN's at its best lr by more than the band (a diverged HybridNorm run counts +∞)",
                 "hybrid_minus_pre_deep", "<=", 0.02, decide="median_ci", basis=BAND),
    secondary=(
        Rule("star_trains_deep", "At 24 and 48 layers HybridNorm* (block 0 Pre-LN) is not worse than Pre-LN by more "
             "than the band, each at its best lr", "star_minus_pre_deep", "<=", 0.02, decide="median_ci", basis=BAND),
        Rule("hybrid_gap_flat_with_depth", "HybridNorm's gap to Pre-LN (each at its best lr) does not grow from 12 "
             "layers to 24 or to 48: the gap at the deeper depth minus the gap at 12, paired by seed, is ≤ 0",
             "hybrid_gap_growth_deep", "<=", 0.0, decide="median",
             basis="the reimplementation's report is that HybridNorm fails deeper, not that it is behind at every "
                   "depth; at a scale where it is behind already at 12 layers (the pilot), a gap that grows with "
                   "depth is that report's sign; a direction, so the threshold is 0 on the median over seeds "
                   "(reported: the sign test's p)"),
        Rule("hybrid_no_divergence_deep", "At 24 and 48 layers HybridNorm diverges at no learning rate at which "
             "Pre-LN (same lr, same seed) trains", "hybrid_diverged_where_pre_trains", "<=", 0.0, decide=1.0,
             basis="the reimplementation's report is of divergence: one lr of one seed where HybridNorm diverges "
                   "and Pre-LN does not contradicts 'trains where Pre-LN does'"),
        Rule("hybrid_beats_pre_shallow", "At 12 layers (inside the paper's depths) HybridNorm's loss at its best lr "
             "is below Pre-LN's at its best lr", "hybrid_minus_pre_shallow", "<", 0.0, decide="median",
             basis="the paper's own claim at its depths, in the median over seeds (reported: the sign test's p)"),
    ),
    preconditions=(
        Rule("best_lr_inside_grid", "At 24 and 48 layers, Pre-LN's and HybridNorm's best lr is not the grid's "
             "smallest or largest (an edge best says: extend the grid)", "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             basis="1 when the arm's best lr lies strictly inside its lr grid, 0 at an edge; one value per arm and "
                   "depth"),
        Rule("trained_to_plateau", "At 24 and 48 layers, at its best lr, each primary arm's validation loss has "
             "stopped falling: it fell by at most 0.05 nats over the last quarter of the run",
             "val_quarter_drop_at_best", "<=", 0.05,
             basis="outcome.py's STILL_FALLING: a larger fall labels a run undertrained, and a comparison of "
                   "undertrained runs compares how fast they learn, not whether they train"),
    ),
    infeasible=(("cpu", "48 layers on 2 CPU cores fit the 2 h budget only at d 64, 600 steps (≈ 0.6M tokens per "
                        "run), 3 seeds and HybridNorm* at 24 layers only, while the claim needs ≥ 5 seeds for a "
                        "0.02-nat band (the paired spread is unknown and may be of that size) and the divergence the "
                        "reimplementation reports is one of longer, wider runs; the CPU runs are reported, --scale "
                        "gpu (up to 6 seeds, wider, longer) decides"),),
    reported=("The whole loss-vs-lr curve at every depth: final validation loss per arm and lr over seeds (median and "
              "range, each arm's best lr marked) and a figure with every seed; the validation curves at each arm's "
              "best lr.",
              "Per depth and arm: diverged runs by lr; the paired spread (stats.paired_sd) of HybridNorm − Pre-LN at "
              "their best lrs."),
)


STEPS, HALF, BRANCH, WARMUP = 600, 300, 240, 100  # the YAML's: T, T/2 and the step its branch leaves T at, warm-up
LRS = "Pre-LN 3e-3, 1e-2, 3e-2; HybridNorm 3e-4, 1e-3, 3e-3 (each around its v4 bests, factor ≈ 3: ARM_LRS)"
SEEDS = "10–14 (48 layers: 10–12)"
EDGE_RULE = ("**Edges, a rule fixed now.** Every arm a check reads (Pre-LN and HybridNorm at 12, 24 and 48 layers) "
             "must have its best lr strictly inside its grid (precondition `best_lr_inside_grid`). A best at an edge "
             "extends that arm's grid at that depth by one point beyond it (factor ≈ 3), for every seed, at most "
             "twice: a change of CPU_EXTENSION (and the YAML's lr axis), committed and logged in CHECK_HISTORY.md as "
             "this rule's; the result is read on the extended grid. A best still at an edge after two points fails "
             "the precondition")
BUDGET = ("Budget (≤ 3 h at --jobs 2, --plan-only): 78 runs at T (Pre-LN and HybridNorm × 3 lrs × 5 seeds at 12 and "
          "24 layers, × 3 seeds at 48) and 78 decay branches at T/2, timed by v4's runs of the same shapes "
          "(experiments/hybrid_depth/runs.csv at f6f5fa0: 111–116 s at 12 layers, 160–202 s at 24, 388–390 s at 48): "
          "≈ 291 min of their own, ≈ 146 min at --jobs 2; an edge extension adds 5 runs and 5 branches at one depth, "
          "≈ 5–12 min at --jobs 2. HybridNorm* runs at --scale gpu only")
WARMUP_BASIS = ("the reference (BryceZhuo/HybridNorm, dense 1.2B config) warms up over 2000 steps of a long run; a "
                "600-step run cannot, and v4's 30 steps (5%) was short for a block whose FFN is Post-LN (the review). "
                f"{WARMUP} steps is 2.5× the ≈ 2/(1 − β₂) = 40 steps over which Adam's second-moment estimate is "
                "noisy with β₂ = 0.95 (Liu et al. 2020's account of why Post-LN needs warm-up), the same for every "
                "arm")
CONTROL = ("the paper's ordering at its own depths (≤ 16 layers): HybridNorm below Pre-LN, each at its best lr, the "
           "whole 90% interval below 0 (sesoi 0: the control asks for the ordering, not a size). It comes before "
           "depth: if it fails, the method is not reproduced here and the deeper numbers are reported, not judged")

REGISTRATION = Registration(
    claim="With the reference's init and a Post-LN warm-up, HybridNorm reproduces the paper's ordering at 12 layers "
          "(below Pre-LN) and then trains at 24 layers where Pre-LN does: not worse by more than 0.02 nats, each at "
          "its own best lr, at T and at half the steps",
    detail=REGISTRATION_V4.detail + (
        " **Under protocol v5** (issue 59, the review: major) v4's positive control failed: at 12 layers, inside "
        "the paper's depths, HybridNorm ended 0.704 nats behind Pre-LN (0.629–0.746) and at 48 layers it sat on the "
        "unigram line at every lr; but the setup was not the reference's: a 30-step warm-up for a block whose FFN "
        "is Post-LN, and the project's Xavier init where the reference's OLMo fork draws N(0, σ²) with each "
        "block's output projections ÷ √(2L) (its `full_megatron`, cut at 3σ; ours `model.init=gpt2`, uncut). v5 "
        "uses the reference's init and a longer warm-up for every arm, and registers a 12-layer control that must "
        "reproduce the paper's ordering first (a precondition that can fail); only then is depth read: 24 layers "
        "decides (5 seeds), 48 layers is secondary (3 seeds, to fit the budget). 'Trains at 24 layers' is an "
        "extrapolation past the paper's depths, so the primary is ours; the control is the paper's."),
    paper_number=REGISTRATION_V4.paper_number,
    metric=(f"Final validation loss (nats per byte, 128 fixed windows) of RMSNorm models of 12, 24 and 48 layers (d "
            f"64) after {STEPS} steps of WSD (a {WARMUP}-step warm-up, the peak lr until step 480, then linearly to "
            f"10%), `model.init=gpt2`, per arm (Pre-LN, HybridNorm) at peak learning rates {LRS}; seeds {SEEDS}. "
            "**Best lr, a rule fixed before the runs** (normtrain/study/best_lr.py, the held-out score of "
            "normtrain/study/best_against_best.py), at each depth, arm and budget: the lr whose runs have the lowest "
            "median over seeds of the loss at the run's end on 127 held-out validation windows between the judged "
            "ones (`train.select_windows`); a diverged run counts +∞; a tie goes to the smaller lr. The judged "
            "difference is HybridNorm seed s at its best lr − Pre-LN seed s at its best lr (+∞ where HybridNorm's "
            "run diverged). **T/2**: every run again at "
            f"{HALF} steps, a decay branch that leaves its T run at step {BRANCH}, each arm at its own best lr "
            "there. **Selection robustness**: at 24 layers, the primary again with an arm at its runner-up lr where "
            f"that is near-tied with its best (best_lr.runner_up). {EDGE_RULE}. A divergence is the trainer's (a "
            f"non-finite loss). {BUDGET}."),
    norm=REGISTRATION_V4.norm,
    label="after_pilot",
    version=5,
    pilot=Pilot(
        runs="v4 (`REGISTRATION_V4` below; `experiments/hybrid_depth/` at f6f5fa0: runs.csv, result.json): Pre-LN, "
             "HybridNorm and HybridNorm* (24 layers) at 12, 24, 48 layers, seeds 0–2, 600 steps of a 30-step "
             "warm-up and a cosine, Xavier init; and its own one-seed pilot (seed 100, CHECK_HISTORY entries 2, 3).",
        numbers="v4, inconclusive at this scale (declared), the primary failing: HybridNorm − Pre-LN at each one's "
                "best lr +0.704 at 12 layers (0.629–0.746), +1.521 at 24 (1.419–1.557), +1.607 at 48 (1.599–1.608); "
                "HybridNorm at 24 and 48 layers on or near the unigram line (3.35) at every lr but 3e-4 at 24 "
                "(3.14–3.29), none diverged; Pre-LN 1.65–1.70 at 12, 1.70–1.74 at 24, 1.75 at 48 (best lrs 1e-2, "
                "1e-2 or 3e-3, 3e-3); HybridNorm's best 1e-3 at 12 layers, 3e-4 at 24; HybridNorm* − Pre-LN +1.405 "
                "at 24. The pilot: a 60-step warm-up gained HybridNorm 0.13 nats at 300 steps.",
        changed=f"(1) The reference's init (`model.init=gpt2`) and a {WARMUP}-step warm-up for every arm (v4: Xavier, "
                f"30 steps). (2) A precondition that can fail, before depth: HybridNorm below Pre-LN at 12 layers "
                f"(the paper's ordering), decided by its interval. (3) The primary at 24 layers (5 seeds), by the "
                f"90% t interval against the 0.02-nat margin, at T and at T/2, its source ours; 48 layers "
                f"secondary (3 seeds). (4) HybridNorm* at --scale gpu only. (5) The grids: {LRS}, with an edge "
                f"rule over every arm and depth; WSD in place of the cosine; the best lr on held-out windows. "
                f"(6) New seeds {SEEDS}. (7) The CPU scale is no longer declared infeasible: the primary is read "
                f"at 24 layers with 5 seeds, which fit.",
        seeds=(0, 1, 2, 100),
    ),
    guard=REGISTRATION_V4.guard,
    primary=Rule("hybrid_trains_at_24", "At 24 layers HybridNorm's final loss at its best lr is not worse than "
                 "Pre-LN's at its best lr by more than 0.02 nats (a diverged HybridNorm run counts +∞)",
                 "hybrid_minus_pre_24", "<=", 0.02, decide="interval", sesoi=0.0,
                 basis=BAND + ". The margin is itself the smallest effect of interest (sesoi 0 past it): an interval "
                       "wholly above 0.02 refutes the claim", source="ours"),
    secondary=(
        Rule("hybrid_trains_at_48", "At 48 layers HybridNorm is not worse than Pre-LN by more than 0.02 nats, each "
             "at its best lr (3 seeds)", "hybrid_minus_pre_deeper", "<=", 0.02, decide="interval", sesoi=0.0,
             basis="as the primary; 3 seeds, so an interval wide enough to be open unless the gap is large",
             source="ours"),
        Rule("hybrid_gap_flat_with_depth", "HybridNorm's gap to Pre-LN (each at its best lr) does not grow from 12 "
             "layers to 24 or to 48: the gap at the deeper depth minus the gap at 12, paired by seed, is ≤ 0",
             "hybrid_gap_growth_deep", "<=", 0.0, decide="interval", sesoi=0.0, source="secondary",
             basis="the reimplementation's report (a secondary source) is that HybridNorm fails deeper; a gap that "
                   "grows with depth is its sign; refuted only by an interval wholly above 0"),
        Rule("hybrid_no_divergence_deep", "At 24 and 48 layers HybridNorm diverges at no learning rate at which "
             "Pre-LN (same lr, same seed) trains", "hybrid_diverged_where_pre_trains", "<=", 0.0, decide=1.0,
             source="secondary",
             basis="the reimplementation's report is of divergence: one lr of one seed where HybridNorm diverges "
                   "and Pre-LN does not contradicts 'trains where Pre-LN does'"),
    ),
    preconditions=(
        Rule("hybrid_beats_pre_at_12", "At 12 layers (inside the paper's depths) HybridNorm's loss at its best lr is "
             "below Pre-LN's at its best lr: the method reproduced before it is extended",
             "hybrid_minus_pre_shallow", "<", 0.0, decide="interval", sesoi=0.0, basis=CONTROL, source="paper"),
        Rule("best_lr_inside_grid", "At every depth, Pre-LN's and HybridNorm's best lr is neither the grid's "
             "smallest nor its largest (the edge rule in the metric)", "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             source="ours", basis="1 when the arm's best lr lies strictly inside its lr grid, 0 at an edge; one "
                                  "value per arm and depth"),
    ),
    reported=(*REGISTRATION_V4.reported,
              "At T/2: each arm at its own best lr at every depth, and HybridNorm − Pre-LN.",
              f"The warm-up's basis: {WARMUP_BASIS}.",
              "Each arm's validation loss fall over the last quarter at its best lr (v4's plateau reading)."),
)
