"""Why causal transformers do not use BatchNorm: its training-mode statistics see the future. Registration v3."""

from normtrain.reproduce.preregistration import Guard, Pilot, Registration, Rule

REGISTRATION = Registration(
    claim="BatchNorm's batch statistics let a causal LM see future tokens: at every batch size the leak makes the "
          "training-mode loss look better than a causal twin's, and the model is no better for it in evaluation",
    detail=("BatchNorm normalizes each feature with statistics over batch × positions. In a causal language model "
            "those statistics include future tokens, so the training-mode output at position t depends on tokens "
            "after t: a leak the model can exploit, which flatters the training loss and is gone at evaluation "
            "(running statistics). Small batches also make the statistics noisy (Shen et al. 2020, PowerNorm, §3, "
            "on BatchNorm's trouble in transformers). The causal control, BatchNorm whose statistics at t use only "
            "positions ≤ t, keeps the batch statistics and their noise and removes the leak, so the difference "
            "between the two is the leak."),
    paper_number="PowerNorm §3: BatchNorm's batch statistics in NLP fluctuate strongly and degrade transformers "
                 "(no single number for the causal leak)",
    metric=("Each final model (1000 steps, 5 seeds) scores the same 512 validation windows (64 KB) in batches of its "
            "own batch size, in training mode with its own batch's statistics (what the training loss saw) and in "
            "evaluation mode (running statistics). The leak's gain at a batch size is the causal control's "
            "training-mode loss minus the leaky BatchNorm's (> 0: the leak flatters the training loss), paired by "
            "seed; its cost in evaluation is the leaky model's evaluation loss minus the control's. The leak itself "
            "is the largest change of a log-probability at positions 0…126 when only token 127 changes (training "
            "mode). Signed rules; decisions on the 95% bootstrap interval of the median."),
    norm="BatchNorm against its causal control (batch statistics over positions ≤ t) and LayerNorm (Pre-LN)",
    label="after_pilot",
    pilot=Pilot(
        runs="v2 (commit af8f939, `experiments/batchnorm_leak/` at that commit): BatchNorm and LayerNorm at batches "
             "1, 2, 8, 16, 3 seeds, scored with own, *another batch's* and running statistics.",
        numbers="BatchNorm's evaluation-mode minus own-batch loss: +0.24 at batch 1 but −0.11 to −0.18 at batches "
                "2, 8 and 16 (training mode scored *worse* than evaluation there), which `modes_disagree` passed "
                "because it took an absolute value; other − own batch statistics 0.30 at batch 1; BatchNorm's leak "
                "0.14–0.35; LayerNorm exactly causal; LayerNorm 0.8–1.2 nats below the unigram line.",
        changed="The control is now a trained causal BatchNorm (v2's 'another batch's statistics' changed the batch "
                "and the leak at once); every rule is signed (no absolute values); the claim is the sign of the "
                "leak's effect per batch size; 5 seeds (was 3); a trainability guard.",
    ),
    guard=Guard(arm="LayerNorm at every batch size", margin=0.3,
                basis="the reference model must learn more than byte frequencies at every batch size; the pilot's "
                      "LayerNorm ended 0.8–1.2 nats below the line"),
    rules=(
        Rule("bn_leaks", "BatchNorm in training mode lets a future token change earlier outputs, every seed",
             "bn_leak", ">", 1e-3, decide=1.0, basis="far above fp32 rounding (1e-6) and far below the pilot's "
                                                     "0.14"),
        Rule("control_causal", "The causal control and LayerNorm do not, every seed", "control_leak", "<", 1e-5,
             decide=1.0, basis="fp32 rounding of a log-probability"),
        Rule("leak_flatters_training_loss", "The leak makes the training-mode loss look better than the causal "
             "twin's, at every batch size", "leak_flatters_training_loss", ">", 0.0, decide="median_ci",
             basis="a sign: the whole interval of the median above 0"),
        Rule("leak_no_help_in_evaluation", "Trained with the leak, the model is no better in evaluation mode than "
             "its causal twin, at every batch size", "leak_hurts_evaluation", ">=", 0.0, decide="median_ci",
             basis="a sign: the whole interval of the median at or above 0"),
        Rule("small_batches_hurt", "BatchNorm falls further behind LayerNorm at the smallest batch than at the "
             "largest (evaluation mode)", "bn_gap_small_minus_large", ">", 0.0, decide="median_ci",
             basis="a sign: the whole interval of the median above 0"),
        Rule("ln_control", "LayerNorm's two ways of scoring agree", "ln_mode_difference", "<", 1e-4, decide=1.0,
             basis="fp32 rounding of a mean loss"),
    ),
    reported=("BatchNorm's evaluation − training-mode loss per batch size (v2's quantity), and the same for the "
              "causal control, in the table.",),
)
