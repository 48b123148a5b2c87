"""DyT at more tokens (issue 39): does DyT's gap to RMSNorm grow with the token budget, as a 2026 replication reports?

Registered before any run of this experiment (``before_runs``). Its α₀ comes from an earlier experiment of this
project (experiments/dyt/, seen: it is named below); nothing of this experiment was run or seen. One change since,
no check among it: the lr grid's extension (``EXTENSION``). The settings and the CPU time estimate are in
configs/experiment/dyt_tokens.yaml."""

from normtrain.reproduce.preregistration import Guard, Registration, Rule

BUDGETS = "500 and 4000 steps of 8 × 128 bytes (0.51M and 4.10M tokens per run, a factor 8)"
LRS = "1e-3, 3e-3, 1e-2, 3e-2"  # the YAML's optim.lr axis: a log grid, factor ≈ 3 (3e-2: EXTENSION)
EXTENSION = ("The grid was registered as 1e-3, 3e-3, 1e-2; 3e-2 was added for both norms at both budgets (the same "
             "seeds) after the registered grid's RMSNorm runs had been seen and before any DyT run had finished: "
             "RMSNorm's best lr at 500 steps sat at the grid's top edge, failing the precondition "
             "best_lr_inside_grid, whose stated remedy is to extend the grid (issue 37: extend the grid when the "
             "best sits at its edge). No check changed (CHECK_HISTORY entry 2)")
ALPHA_RULE = ("α₀ per width, fixed before these runs: the best α₀ (lowest median final validation loss over 5 "
              "seeds) of the α₀ grid {0.1, 0.2, 0.5, 1, 2} that this project's dyt experiment ran on this very model "
              "(6 layers, d 64, 8 × 128 bytes a step) at ~0.8M tokens, the smaller budget's scale: α₀ = 1 at d 64 "
              "(experiments/dyt/, runs at commit 90b8580; at lr 1e-3 there, not re-tuned per lr here). The GPU "
              "scale keeps the width (its recipe grows tokens, not d), so the same α₀ holds there")

REGISTRATION = Registration(
    claim="DyT's loss gap to RMSNorm grows with the token budget: DyT − RMSNorm (each at its best lr, paired by "
          "seed) is larger at 8× the tokens than at the smaller budget",
    detail=("**Who claims what.** DyT (Zhu et al. 2025, *Transformers without Normalization*) replaces each norm by "
            "γ·tanh(α·x) + β and reports matching RMSNorm in LLaMA 7B–70B. A **2026 replication** (Verma, arXiv "
            "2604.23434, *When Does Removing LayerNorm Help?*) finds the effect regime-dependent: across GPT-2-family "
            "models of 64M–3.78B parameters and 1M–118M tokens, DyT improves the validation loss by 27.3% at "
            "64M parameters / 1M tokens and worsens it by 18.8% at 64M / 118M (an implicit regularizer that helps "
            "data-poor training and hurts data-rich). This **project's own dyt experiment** found DyT 0.18–0.22 nats "
            "behind LayerNorm and RMSNorm at ~0.8M tokens per run (6 layers, d 64 and 128, lr 1e-3 only). The "
            "primary check is the replication's direction, the claim that does not depend on the regime's absolute "
            "position: the gap grows with tokens. Caveat stated before the runs: the replication's runs span about "
            "0.02 (64M parameters, 1M tokens) to 1.84 (64M, 118M) tokens per parameter; this model (0.33M "
            "parameters, embeddings included) sees about 1.5 and 12, the smaller budget near the replication's "
            "data-rich end and the larger beyond its range, and every token is new (one pass over a larger "
            "corpus), so the replication's data-poor regime is not reproduced at this scale; "
            "secondary checks report the sign of the gap at each budget."),
    paper_number="DyT −27.3% validation loss at 64M parameters / 1M tokens, +18.8% at 64M / 118M (arXiv 2604.23434); "
                 "this project's dyt: DyT +0.18 to +0.22 nats at ~0.8M tokens",
    metric=(f"Final validation loss (nats per byte, 256 fixed windows) of Pre-LN models (6 layers, d 64) after "
            f"{BUDGETS}, RMSNorm and DyT each at peak learning rates {LRS}, seeds 0–4; warm-up 5% of each budget then "
            "cosine decay to 10%, evaluation every 5%. " + ALPHA_RULE + ". **Best lr, a rule fixed before the "
            "runs** (normtrain/reproduce/best_lr.py), per norm and budget: the lr whose runs have the lowest median "
            "over seeds of the mean training loss over the last 10% of the steps; a diverged run counts +∞; a tie "
            "goes to the smaller lr. Per seed s: gap(budget) = DyT seed s at its best lr − RMSNorm seed s at its "
            "best lr; the judged quantity is gap(4000 steps) − gap(500 steps). CPU time: about 80 min at --jobs 2 "
            "for the registered grid (the YAML's comment gives the estimate and its basis). " + EXTENSION + "."),
    norm="DyT (α₀ = 1, one learned scalar α per norm, γ = 1 and β = 0 at init) against RMSNorm",
    label="before_runs",
    guard=Guard(arm="RMSNorm at its best lr, at both budgets (the reference of every comparison)", margin=0.3,
                basis="0.3 nats below the unigram line: well clear of a model that learned byte frequencies only"),
    primary=Rule("gap_grows_with_tokens", "DyT − RMSNorm at the larger budget exceeds DyT − RMSNorm at the smaller, "
                 "seed by seed (each norm at its own best lr per budget)", "gap_growth", ">", 0.0,
                 decide="sign_test",
                 basis="the replication's direction (−27.3% at 1M tokens, +18.8% at 118M), tested one-sided on the "
                       "per-seed growth: with 5 seeds the sign test needs all 5 positive (p = 0.031)"),
    secondary=(
        Rule("dyt_helps_small", "At the smaller budget DyT's loss is below RMSNorm's (the replication's 1M-token "
             "result)", "gap_small", "<", 0.0, decide="sign_test",
             basis="the replication's sign at 1M tokens; this project's dyt experiment saw the opposite at ~0.8M"),
        Rule("dyt_hurts_large", "At the larger budget DyT's loss is above RMSNorm's (the replication's data-rich "
             "result)", "gap_large", ">", 0.0, decide="sign_test",
             basis="the replication's sign at 118M tokens"),
    ),
    preconditions=(
        Rule("dyt_trains", "DyT at its best lr learned more than byte frequencies at both budgets (a DyT that does "
             "not train makes its gap a failure to train, not a regime)", "dyt_margin", ">=", 0.3,
             basis="the guard's margin, applied to DyT"),
        Rule("best_lr_inside_grid", "Each norm's best lr at each budget is not the grid's smallest or largest (an edge "
             "best says: extend the grid)", "best_lr_inside_grid", ">=", 1.0, decide=1.0,
             basis="1 when the norm's best lr lies strictly inside its lr grid, 0 at an edge; one value per norm "
                   "and budget"),
    ),
    reported=("The whole loss-vs-lr curve per budget: final validation loss per norm and lr over seeds (median and "
              "range, each norm's best lr marked) and a figure with every seed; the validation curves at each norm's "
              "best lr.",
              "The gap at each budget in nats and relative (DyT / RMSNorm − 1, the replication's unit), per seed; the "
              "outcome labels per cell (the smaller budget's runs are expected to end still falling: a budget is "
              "the design, not a failure to train, so no plateau is required)."),
)
