"""nGPT vs Pre-LN with fp32 and bf16 parameter storage: does bf16 storage explain part of nGPT's lead (NVIDIA's
caveat on its own reimplementation)? Registered before any run of this experiment (issue 39), under protocol v4."""

from normtrain.reproduce.preregistration import Guard, Registration, Rule

STEPS = 1000  # configs/experiment/ngpt_storage.yaml: train.max_steps
LRS = "Pre-LN 3e-3, 1e-2, 3e-2; nGPT 3e-3, 1e-2, 3e-2, 1e-1"  # its optim.lr axis per placement (keeps; 3e-3: EXTENSION)
EXTENSION = ("nGPT's grid was registered as 1e-2, 3e-2, 1e-1; 3e-3 was added for nGPT with both storages (the same "
             "seeds 0–4, 10 runs) during the runs, when every Pre-LN run (both storages), nGPT fp32 at 1e-2 (5 seeds) "
             "and at 3e-2 (1 seed) had finished and no nGPT bf16 run had: nGPT fp32's 1e-2 (median 1.370) was "
             "below its one 3e-2 run (1.422), so its best would sit at the grid's smallest lr and fail the "
             "precondition best_lr_inside_grid, whose stated remedy is to extend the grid (issue 37). No check, "
             "threshold or rule changed (experiments/ngpt_storage/CHECK_HISTORY.md entry 2)")
CPU_TIME = ("about 86 min at --jobs 2 on a quiet 2-core machine, estimated, not run: 60 runs of a 4-layer d-64 model, "
            "about 0.09 s a step in fp32 (lr_sensitivity's runs.csv: about 12 ms per block and step at 8 × 128 "
            "tokens, here 16 × 128) and twice that with bf16 storage (a CPU has no fast bf16 matmul: 448 → 859 ms "
            "Pre-LN, 391 → 869 ms nGPT, one thread on a loaded machine), plus 21 evaluations of 512 windows a run "
            "(configs/experiment/ngpt_storage.yaml shows the sum)")

REGISTRATION = Registration(
    claim="bf16 parameter storage explains part of nGPT's lead over a Pre-LN baseline: the gap Pre-LN − nGPT at "
          "equal steps and tokens is larger when both store their parameters in bf16 than when both store fp32",
    detail=("nGPT (Loshchilov, Hsieh, Sun & Ginsburg, ICLR 2025) reports reaching the baseline GPT's validation "
            "loss in 4× (1k context), 10× (4k) and 20× (8k) fewer steps at 0.5B and 1B parameters (Fig. 1, §4). "
            "The README of NVIDIA's reimplementation (github.com/NVIDIA/ngpt) adds a caveat, quoted in this "
            "project's README (placement=ngpt) and in issue 39: the speed-ups it shows are larger than they should "
            "be, because storing the parameters in bf16 hurts the GPT baseline much more than nGPT; against a "
            "baseline with fp32 parameters the speed-up is smaller. **Who makes the claim: the authors' own "
            "repository (NVIDIA), about their reimplementation**, not the paper, which gives no fp32-baseline "
            "number; the README's exact wording could not be retrieved offline when this was registered, so the "
            "claim is tested in the form issue 39 states it. The primary check is that caveat as a number, the "
            "interaction of architecture and storage; whether nGPT leads at all with fp32 storage is secondary."),
    paper_number="nGPT reaches the baseline's loss in 4×/10×/20× fewer steps (1k/4k/8k context, 0.5B–1B; paper "
                 "Fig. 1); NVIDIA's README: smaller against an fp32-parameter baseline (no number given)",
    metric=(f"Final validation loss (nats per byte, 512 fixed windows = 64 KB) after {STEPS} steps of 16 × 128 bytes "
            f"(the same steps and tokens for every arm), 4-layer d-64 models, four arms: Pre-LN (RMSNorm; AdamW, "
            f"weight decay 0.1, a 5% warm-up) and nGPT (no weight decay, no warm-up, as its paper), each with fp32 "
            f"and with bf16 parameter storage (`train.param_dtype=bfloat16`: parameters and AdamW's moments in "
            f"bf16, no fp32 master copy; on a CPU the bf16 model also computes in bf16, the cross-entropy in fp32); "
            f"peak lr {LRS}, cosine to 0; seeds 0–4. **Best lr, a rule fixed before the runs** "
            "(normtrain/reproduce/best_lr.py): for each of the four arms, the lr whose runs have the lowest median "
            "over seeds of the mean training loss over the last 10% of the steps; a tie goes to the smaller lr. "
            "Gap of a storage, per seed s: Pre-LN(s) − nGPT(s), each at its arm's best lr (positive: nGPT ahead). "
            "**Primary quantity** `storage_gap_change`(s) = gap_bf16(s) − gap_fp32(s). Seed s pairs the data "
            f"order and init draws of the four arms. CPU time: {CPU_TIME}. " + EXTENSION + "."),
    norm="Pre-LN with RMSNorm (the nGPT paper's baseline) against nGPT (no norm layers: x/‖x‖, norm=l2)",
    label="before_runs",
    guard=Guard(arm="Pre-LN with fp32 storage at its best lr (the baseline every gap is taken from)", margin=0.3,
                quantity="reference_margin",
                basis="0.3 nats below the unigram line: well clear of a model that learned byte frequencies only "
                      "(norm_types' 200-step Pre-LN runs of a larger model ended 1.36 nats below it)"),
    primary=Rule("bf16_widens_the_gap", "the gap Pre-LN − nGPT, each at its best lr, is larger with bf16 storage "
                 "than with fp32 storage (bf16 hurts the baseline more than nGPT)", "storage_gap_change", ">", 0.0,
                 decide="t_test",
                 basis="the caveat is a direction with no size, so the threshold is 0; a one-sided t-test over the "
                       "5 paired seeds at p ≤ 0.05, not a sign test (which would need 5 of 5): a difference of "
                       "differences of four runs has about twice one run's seed spread, within which an effect "
                       "of this kind may sit (issue 39: ≥ 5 seeds where the effect may be within twice the spread)"),
    secondary=(
        Rule("ngpt_ahead_fp32", "with fp32 storage for both, nGPT ends below Pre-LN at equal steps and tokens",
             "ngpt_gain_fp32", ">", 0.0, decide="t_test",
             basis="issue 39's first question (is there a speed-up against an fp32 baseline): any lead, one-sided "
                   "t-test over the paired seeds"),
        Rule("bf16_hurts_pre", "bf16 storage raises Pre-LN's final loss", "bf16_cost_pre", ">", 0.0,
             decide="t_test", basis="the caveat's mechanism on the baseline alone: any cost, one-sided t-test"),
    ),
    preconditions=(
        Rule("best_lr_inside_grid", "each of the four arms' best lr is not its grid's smallest or largest (an edge "
             "best says: extend the grid)", "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             basis="1 when the arm's best lr lies strictly inside its lr grid, 0 at an edge; one value per arm: "
                   "a gap at an edge lr compares an arm at a point that is not its best"),
    ),
    reported=("The whole loss-vs-lr curve of every arm (median and range over seeds, each arm's best lr marked) and "
              "a figure with every seed.",
              "`ngpt_gain_bf16` (the gap with bf16 storage) and `bf16_cost_ngpt` (nGPT bf16 − fp32), paired by seed.",
              "The paper's own measure, `step_speedup`: the run's length over the first evaluated step (every 5%) "
              "at which nGPT's validation loss is at or below Pre-LN's final one, per seed and storage (at most 20 "
              "on this evaluation grid; none where nGPT never reaches it)."),
)
