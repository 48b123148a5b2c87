"""Zhang & Sennrich 2019: RMSNorm (and pRMSNorm) match LayerNorm's quality at a lower cost."""

from normtrain.reproduce.preregistration import Registration, Rule

REGISTRATION = Registration(
    claim="RMSNorm matches LayerNorm's quality and computes faster; pRMSNorm (p = 6.25%) is comparable",
    detail=("RMSNorm drops LayerNorm's re-centering and keeps only the re-scaling: across their tasks it reaches "
            "LayerNorm's quality while running 7%–64% faster depending on the model; partial RMSNorm, which "
            "estimates the RMS from the first p = 6.25% of the features, performs comparably "
            "(Zhang & Sennrich 2019, Tables 1–5)."),
    paper_number="same quality, 7%–64% faster than LayerNorm (their Tables 1–5)",
    metric=("Quality: final validation loss (nats per byte, 512 fixed windows = 64 KB) of Pre-LN models after 200 "
            "steps, differences to LayerNorm taken per seed. Speed, like with like: forward + backward time of "
            "one norm call on the model's activation shape (16·128 tokens × 128 features, fp32) on this device, "
            "(a) with every norm written in the same composite torch ops (the algorithmic cost the paper "
            "argues about) and (b) with each norm's best implementation here (torch's fused `layer_norm`, "
            "`rms_norm`, normtrain's kernel where it is used); 7 interleaved repeats, each the median of 30 calls."),
    norm="LayerNorm, RMSNorm and pRMSNorm compared",
    rules=(
        Rule("rms_quality", "RMSNorm's final loss matches LayerNorm's", "rms_minus_ln", "between", (-0.05, 0.05)),
        Rule("prms_quality", "pRMSNorm's final loss is comparable to LayerNorm's", "prms_minus_ln", "between",
             (-0.1, 0.1)),
        Rule("rms_faster", "RMSNorm computes faster than LayerNorm (same composite form, time ratio)",
             "rms_over_ln_composite_time", "<", 1.0),
    ),
)
