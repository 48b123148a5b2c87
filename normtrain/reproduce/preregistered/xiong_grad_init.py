"""Xiong et al. 2020, Fig. 3: the gradient of the FFN's second matrix per layer at initialization."""

from normtrain.reproduce.preregistration import Registration, Rule

REGISTRATION = Registration(
    claim="At init, Post-LN's FFN gradient grows toward the output and its last layer's is depth-independent; "
          "Pre-LN's is flat and its last layer's shrinks ~ L^-1/2",
    detail=("At initialization the gradient norm of the FFN's second weight matrix (W², `fc2`) in Post-LN grows with "
            "the layer index, largest next to the output, and the last layer's does not depend on the depth L "
            "(Xiong et al. 2020, Thm. 1 and Fig. 3). In Pre-LN it is about the same in every layer, and the last "
            "layer's shrinks with depth as O(d·√(ln d / L)), i.e. about as L^-1/2."),
    paper_number="Fig. 3 (d 512, 6 layers, IWSLT14): Post-LN's fc2 gradient grows layer by layer toward the "
                 "output; Pre-LN's stays flat",
    metric=("‖∇W‖ of each block's FFN down-projection (`mlp.down`, the paper's W²) after one forward and backward "
            "pass of the freshly initialized model on one training batch (16 × 128 bytes, the batch its seed "
            "draws first). Ratios last/first block and the log-log slope of the last block's value against L are "
            "taken per seed."),
    norm="LayerNorm, as the paper; RMSNorm as a second, labelled variant (not judged)",
    rules=(
        Rule("post_rises", "Post-LN: the fc2 gradient grows toward the output", "post_last_over_first", ">", 1.0,
             decide=0.8),
        Rule("post_last_flat", "Post-LN: the last layer's fc2 gradient is about independent of depth",
             "post_last_max_over_min", "<=", 1.5),
        Rule("pre_last_shrinks", "Pre-LN: the last layer's fc2 gradient falls about as L^-1/2", "pre_last_slope",
             "between", (-0.8, -0.25)),
        Rule("pre_flat", "Pre-LN: the profile is flat or falling toward the output", "pre_last_over_first", "<=",
             1.2),
    ),
)
