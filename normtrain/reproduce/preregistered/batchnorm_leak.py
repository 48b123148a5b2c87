"""Why causal transformers do not use BatchNorm: its training-mode statistics see the future."""

from normtrain.reproduce.preregistration import Registration, Rule

REGISTRATION = Registration(
    claim="BatchNorm's batch statistics let a causal LM see future tokens: training-mode loss is optimistic, "
          "evaluation disagrees, small batches hurt",
    detail=("BatchNorm normalizes each feature with statistics over batch × positions. In a causal language model "
            "those statistics include future tokens, so the training-mode output at position t depends on tokens "
            "after t (a leak the model can exploit), training and evaluation (running statistics) disagree, and "
            "small batches make the statistics noisy (Shen et al. 2020, PowerNorm, §3, on BatchNorm's trouble in "
            "transformers). LayerNorm and RMSNorm normalize each token on its own."),
    paper_number="PowerNorm §3: BatchNorm's batch statistics in NLP fluctuate strongly and degrade transformers "
                 "(no single number for the causal leak)",
    metric=("Each final model scores the same 512 validation windows (64 KB) three ways: training mode with its own "
            "batch's statistics (what the training loss saw), training mode with the statistics of *another* batch "
            "of the same size (the control: batch statistics without the leak), and evaluation mode (running "
            "statistics). The leak is the largest change of a log-probability at positions 0…126 when only token "
            "127 of each sequence changes (training mode). Per seed."),
    norm="BatchNorm against the LayerNorm control (Pre-LN)",
    rules=(
        Rule("bn_leaks", "BatchNorm in training mode lets a future token change earlier outputs", "bn_leak", ">",
             1e-3, decide=1.0),
        Rule("ln_causal", "LayerNorm does not", "ln_leak", "<", 1e-5, decide=1.0),
        Rule("leak_exploited", "The model exploits the leak: its own batch's statistics score better than another "
             "batch's, at the smallest batch", "bn_other_minus_own_smallest", ">=", 0.02),
        Rule("modes_disagree", "BatchNorm's training and evaluation modes disagree, at every batch size",
             "bn_abs_eval_minus_own", ">=", 0.02),
        Rule("small_batches_hurt", "BatchNorm falls further behind LayerNorm at the smallest batch than at the "
             "largest (evaluation mode)", "bn_gap_small_minus_large", ">", 0.0),
        Rule("ln_control", "LayerNorm's three ways agree", "ln_max_mode_difference", "<", 1e-4, decide=1.0),
    ),
)
