"""Every normalization choice normtrain offers, as data: one ``Choice`` per choice, in the order the catalog prints.

Each names the config override that selects it (``select``, with the overrides it needs, ``needs``), its formula as
normtrain computes it, the papers, the reference code (a repository and, where we know it, the file) and the
published models that use it. ``tests/test_catalog.py`` holds it to the real config: every YAML of the ``norm``,
``placement`` and ``optim`` groups and every value of the catalog's keys has an entry, and every entry composes.
"""

from __future__ import annotations

from dataclasses import dataclass

from normtrain.catalog import papers as P
from normtrain.catalog.papers import Paper

KINDS = {
    "norm": "Norm types",
    "gain": "Gains (every norm, QK-norm included)",
    "placement": "Placements",
    "qk": "QK-norm forms",
    "logit": "Logit controls",
    "optim": "Optimizers",
    "init": "Initialization schemes (model.init)",
    "other": "Other model options",
}


@dataclass(frozen=True)
class Code:
    """Reference code: a GitHub repository (owner/name) and, where it helps, the file."""

    repo: str
    path: str = ""

    def __str__(self) -> str:
        return f"{self.repo} ({self.path})" if self.path else self.repo


@dataclass(frozen=True)
class Choice:
    kind: str  # a key of KINDS
    name: str
    select: str  # the override that selects it: "norm=rmsnorm", "model.qk_norm=per_head"
    formula: str
    papers: tuple[Paper, ...] = ()
    code: tuple[Code, ...] = ()
    models: tuple[str, ...] = ()  # published models that use it
    needs: tuple[str, ...] = ()  # the other overrides it takes effect with
    note: str = ""  # defaults, caveats


TORCH_NORMS = Code("pytorch/pytorch", "torch/nn/modules/normalization.py")
RMSNORM_CODE = Code("bzhangGo/rmsnorm", "rmsnorm_torch.py")
GEMMA2_CODE = Code("huggingface/transformers", "src/transformers/models/gemma2/modeling_gemma2.py")
OLMO2_CODE = Code("huggingface/transformers", "src/transformers/models/olmo2/modeling_olmo2.py")
NANOCHAT_CODE = Code("karpathy/nanochat", "nanochat/gpt.py")
NANOGPT_CODE = Code("karpathy/nanoGPT", "model.py")
NGPT_CODE = Code("NVIDIA/ngpt", "model.py, train.py")
HYBRID_CODE = Code("BryceZhuo/HybridNorm", "dense_model/olmo/model.py")
OSP_CODE = Code("dmis-lab/Outlier-Safe-Pre-Training")

NORMS = (
    Choice("norm", "LayerNorm", "norm=layernorm", "y = γ ⊙ (x − μ)/√(σ² + ε) + β",
           (P.BA_2016,), (TORCH_NORMS,), ("GPT-2", "GPT-3", "OPT", "Pythia"), note="ε = 1e-5, γ = 1, β = 0"),
    Choice("norm", "RMSNorm", "norm=rmsnorm",
           "y = γ ⊙ x / √(mean(x²) + ε), statistics in fp32, output in the input dtype",
           (P.ZHANG_2019,), (RMSNORM_CODE,), ("T5", "LLaMA 1–3", "Mistral", "Qwen 1–3", "Gemma 1–3", "OLMo 2"),
           note="ε = 1e-6; a fused Triton kernel on CUDA (norm.impl)"),
    Choice("norm", "partial RMSNorm", "norm=prmsnorm", "RMSNorm with the rms estimated from the first ⌈p·d⌉ "
           "features (at least one)", (P.ZHANG_2019,), (RMSNORM_CODE,), note="p = norm.p = 0.0625"),
    Choice("norm", "Dynamic Tanh (DyT)", "norm=dyt", "y = γ ⊙ tanh(α·x) + β, α a learned scalar; no statistics",
           (P.ZHU_2025,), (Code("jiachenzhu/DyT", "dynamic_tanh.py"),), note="α = norm.alpha_init = 0.5, γ = 1, β = 0"),
    Choice("norm", "Derf", "norm=derf", "y = γ ⊙ erf(α·x + s) + β, α and s learned scalars; no statistics",
           (P.CHEN_2025_DERF,), (Code("zlab-princeton/Derf"),), note="α = norm.alpha_init = 0.5, s = 0, γ = 1, β = 0"),
    Choice("norm", "L2 norm (unit sphere)", "norm=l2", "y = γ ⊙ x / √(Σx² + ε): the projection onto the unit "
           "sphere (RMSNorm / √d); nGPT's Norm", (P.LOSHCHILOV_2024_NGPT,), (NGPT_CODE,), ("nGPT",),
           note="ε = 1e-12, no gain by default; placement=ngpt selects it"),
    Choice("norm", "LayerNorm Scaling", "norm.depth_scaled=true", "every norm of block ℓ (ℓ = 1…L) multiplies its "
           "output by 1/√ℓ", (P.SUN_2025,), (Code("lmsdss/LayerNorm-Scaling"),),
           note="any norm; in Pre-LN exactly the paper's method"),
    Choice("norm", "BatchNorm", "norm=batchnorm", "y = γ ⊙ (x − μ_B)/√(σ²_B + ε) + β, statistics over batch × "
           "positions (future tokens included: it leaks)", (P.IOFFE_2015,),
           (Code("pytorch/pytorch", "torch/nn/modules/batchnorm.py"),), note="the batchnorm_leak experiment only"),
    Choice("norm", "causal BatchNorm", "norm=batchnorm_causal", "BatchNorm whose statistics at position t use "
           "positions ≤ t of every sequence", note="normtrain's control for the batchnorm_leak experiment only"),
)

GAINS = (
    Choice("gain", "vector gain", "norm.gain=vector", "γ ∈ R^d, init 1 (β per feature where the norm has one)",
           (P.BA_2016, P.ZHANG_2019), (TORCH_NORMS,), ("GPT-2", "LLaMA 1–3", "Qwen 1–3", "OLMo 2"),
           note="the default"),
    Choice("gain", "zero-centred gain", "norm.gain=zero_centred", "γ = 1 + w, w ∈ R^d init 0: the same function "
           "at init; weight decay pulls γ toward 1, not 0",
           code=(Code("huggingface/transformers", "src/transformers/models/gemma/modeling_gemma.py"),
                 Code("NVIDIA/Megatron-LM", "--apply-layernorm-1p")),
           models=("Gemma 1–3", "Qwen3-Next"),
           note="normtrain decays no 1-D parameter, so under AdamW it trains as vector does"),
    Choice("gain", "single-scale gain (SSNorm)", "norm.gain=scalar", "one γ ∈ R for the whole vector",
           (P.OSP_2025,), (OSP_CODE,), ("the OSP paper's 1.4B model",)),
    Choice("gain", "no gain", "norm.gain=none", "no γ and no β (= norm.affine=false)",
           code=(NANOCHAT_CODE,), models=("nanochat", "the modded-nanogpt speedrun", "OLMo 1 (LayerNorm)")),
    Choice("gain", "gain without β", "norm.bias=false", "y = γ ⊙ (x − μ)/√(σ² + ε): LayerNorm (and DyT, Derf) "
           "keeps γ and drops β", (P.PALM_2022,), (NANOGPT_CODE,), ("nanoGPT (bias=False)", "PaLM", "T5"),
           needs=("norm=layernorm",),
           note="null (the default) = the norm's convention; RMSNorm and L2 have no β (false changes nothing, true is "
                "refused), BatchNorm's affine part is γ and β together"),
)

PLACEMENTS = (
    Choice("placement", "Post-LN", "placement=post", "x ← N(x + F(x)); no final norm", (P.VASWANI_2017,),
           (Code("facebookresearch/fairseq", "fairseq/modules/transformer_layer.py"),),
           ("the original Transformer", "BERT", "GPT-1")),
    Choice("placement", "Pre-LN", "placement=pre", "x ← x + F(N(x)); final norm", (P.XIONG_2020,),
           (NANOGPT_CODE,), ("GPT-2", "GPT-3", "LLaMA 1–3", "Mistral", "Qwen 1–3")),
    Choice("placement", "DeepNorm", "placement=deepnorm", "x ← N(α·x + F(x)), α = (2L)^¼ on the shortcut; v, out "
           "and MLP init gain β = (8L)^-¼; no final norm", (P.WANG_2022_DEEPNET,),
           (Code("microsoft/torchscale", "torchscale/architecture/decoder.py"),), ("GLM-130B",)),
    Choice("placement", "Sub-LN (Magneto)", "placement=subln", "x ← x + W_out·N′(F′(N(x))): Pre-LN plus a norm "
           "before the attention output projection and before the MLP's down matrix (after the activation; SwiGLU, "
           "GeGLU: after the gated product); init gain √(log 2L); final norm", (P.WANG_2022_MAGNETO,),
           (Code("microsoft/torchscale", "subln=True"),),
           ("BitNet b1.58 2B4T",)),
    Choice("placement", "Admin", "placement=admin", "x ← N(ω ⊙ x + F(x)), ω profiled from data at init "
           "(ω_i² = Σ_{j<i} Var f_j), then learned; no final norm", (P.LIU_2020_ADMIN,),
           (Code("LiyuanLucasLiu/Transformer-Clinic"),)),
    Choice("placement", "Peri-LN", "placement=peri", "x ← x + N_out(F(N_in(x))); final norm",
           (P.KIM_2025_PERI, P.DING_2021_COGVIEW), (GEMMA2_CODE,), ("Gemma 2", "Gemma 3", "CogView")),
    Choice("placement", "Sandwich-LN", "placement=sandwich", "Peri-LN under CogView's name: an alias, recorded "
           "as placement=peri", (P.DING_2021_COGVIEW,), models=("CogView",)),
    Choice("placement", "OLMo-2 reordered norm", "placement=reorder", "x ← x + N(F(x)); final norm",
           (P.OLMO2_2024,), (OLMO2_CODE,), ("OLMo 2", "Swin Transformer V2 (res-post-norm)")),
    Choice("placement", "Mix-LN", "placement=mix", "Post-LN in the first ⌊f·L⌋ blocks, Pre-LN after; final norm "
           "when f < 1", (P.LI_2024_MIX,), (Code("pixeli99/MixLN"),), note="f = placement.post_fraction = 0.25"),
    Choice("placement", "ReZero", "placement=rezero", "x ← x + a·F(x), a learned scalar per sublayer, init 0; "
           "no norm", (P.BACHLECHNER_2020,), (Code("majumderb/rezero"),)),
    Choice("placement", "no norm", "placement=none", "x ← x + F(x): no norm anywhere, the baseline"),
    Choice("placement", "HybridNorm", "placement=hybrid", "attention on the raw stream with per-head norms on Q, K "
           "and V: Y = X + Attn(X); then Z = N(Y), X′ = Z + FFN(Z)", (P.ZHUO_2025_HYBRID,), (HYBRID_CODE,)),
    Choice("placement", "HybridNorm*", "placement.first_pre=true", "HybridNorm with block 0 a Pre-LN block",
           (P.ZHUO_2025_HYBRID,), (HYBRID_CODE,), needs=("placement=hybrid",)),
    Choice("placement", "NormFormer", "placement=normformer", "Pre-LN plus N on the attention output before the "
           "add, a learned scale per head (init 1) before W_O, N after the MLP activation, optional learned "
           "residual scale", (P.SHLEIFER_2021,),
           (Code("facebookresearch/fairseq", "fairseq/modules/transformer_layer.py"),),
           note="placement.head_scale, .post_act_norm, .resid_scale; the head scale sits before W_O as in the "
                "paper (fairseq applies it after)"),
    Choice("placement", "B2T connection", "placement=b2t", "x_a = N(x + Attn(x)); y = N(x_a + FFN(x_a) + x): "
           "Post-LN plus a shortcut from the block's input to its last norm", (P.TAKASE_2022_B2T,),
           (Code("takase/b2t_connection"),)),
    Choice("placement", "ResiDual", "placement=resi_dual", "x_{k+1} = N(x_k + F(x_k)) and d_{k+1} = d_k + F(x_k), "
           "d_0 the embedding; output x_L + N(d_L)", (P.XIE_2023_RESIDUAL,), (Code("microsoft/ResiDual"),)),
    Choice("placement", "nGPT", "placement=ngpt", "h ← Norm(h + |α|⊙(Norm(F(h)) − h)); every matrix normalized "
           "along the embedding dimension after each step; q, k normalized per head and scaled by s_qk",
           (P.LOSHCHILOV_2024_NGPT,), (NGPT_CODE,),
           note="no weight decay, no warm-up; NVIDIA's README says the claimed 4–20× speed-up is inflated by bf16 "
                "parameter storage hurting the baseline"),
    Choice("placement", "mHC (manifold-constrained hyper-connections)", "placement=mhc", "n streams per token; "
           "each sublayer: x ← H_res·x + H_postᵀ·F(N(H_pre·x)), from x̃ = RMSNorm(vec x): H_pre = σ(α·x̃φ + b), "
           "H_post = 2σ(α·x̃φ + b), H_res = Sinkhorn-Knopp(α·mat(x̃φ) + b), 20 iterations (doubly stochastic); "
           "streams start as copies of the embedding, their mean meets the final norm", (P.XIE_2025_MHC, P.ZHU_2024_HC),
           (Code("NVIDIA/Megatron-LM", "megatron/core/transformer/hyper_connection.py"),
            Code("huggingface/transformers", "src/transformers/models/deepseek_v4/modeling_deepseek_v4.py")),
           ("DeepSeek-V4",),
           note="n = placement.streams = 4, α init 0.01 (the paper); φ Xavier-uniform, b = 0, ε = 1e-6 guards and the "
                "mean at the exit from Megatron-LM, where the paper is silent; DeepSeek-V4 exits through learned "
                "weights instead"),
    Choice("placement", "GPAS", "placement.gpas=true", "after each residual add x ← x − SiLU(a)·sg(x), a scalar a "
           "per layer, init 0: the forward stream shrinks, the gradient passes unscaled", (P.CHEN_2025_GPAS,),
           (Code("dandingsky/GPAS"),), note="on every placement with a residual add"),
)

QK_FORMS = (
    Choice("qk", "QK-norm per head", "model.qk_norm=per_head", "q, k ← N(q), N(k) over each head's d_head "
           "features, before RoPE; one gain of d_head shared by the heads", (P.DEHGHANI_2023, P.WORTSMAN_2023),
           (Code("huggingface/transformers", "src/transformers/models/qwen3/modeling_qwen3.py"),),
           ("Qwen3", "Gemma 3", "ViT-22B")),
    Choice("qk", "QK-norm over all heads", "model.qk_norm=full", "one N over the whole q projection and one over "
           "the whole k projection (d features), before the split into heads and RoPE", (P.OLMO2_2024,),
           (OLMO2_CODE,), ("OLMo 2",)),
    Choice("qk", "QK-norm after RoPE", "model.qk_norm_at=after_rope", "N on the rotated q and k",
           (P.LOSHCHILOV_2024_NGPT,), (NANOCHAT_CODE, NGPT_CODE), ("nanochat", "nGPT"),
           needs=("model.qk_norm=per_head",)),
    Choice("qk", "gain-free QK-norm", "model.qk_norm_gain=false", "QK- (and V-) norms without γ (nor β)",
           code=(NANOCHAT_CODE,), models=("nanochat", "the modded-nanogpt speedrun"),
           needs=("model.qk_norm=per_head",)),
    Choice("qk", "V-norm", "model.v_norm=true", "the same N on the values, in QK-norm's form (per head without "
           "QK-norm)", (P.ZHUO_2025_HYBRID,),
           (Code("huggingface/transformers", "src/transformers/models/gemma3n/modeling_gemma3n.py"),),
           ("Gemma 3n (without a gain)",)),
)

LOGIT_CONTROLS = (
    Choice("logit", "attention soft-cap", "model.attn_softcap=50", "s ← c·tanh(s/c) on each attention logit "
           "s = q·k/√d_head, after the scale, before the causal mask", (P.GEMMA2_2024,), (GEMMA2_CODE,),
           ("Gemma 2 (c = 50)", "Grok-1 (c = 30)"), note="0 = off; the logged attn_logit_max stays uncapped"),
    Choice("logit", "output soft-cap", "model.logit_softcap=30", "z ← c·tanh(z/c) on the output logits",
           (P.GEMMA2_2024,), (GEMMA2_CODE, NANOCHAT_CODE),
           ("Gemma 2 (c = 30)", "nanochat (c = 15)", "the modded-nanogpt speedrun (c = 15)"), note="0 = off"),
    Choice("logit", "gated attention, per head", "model.attn_gate=head", "Y′ = Y ⊙ σ(X·W_θ) after SDPA, before "
           "W_O; one gate per head (W_θ: d → H)", (P.QIU_2025_GATE,), (Code("qiuzh20/gated_attention"),)),
    Choice("logit", "gated attention, per feature", "model.attn_gate=elementwise", "Y′ = Y ⊙ σ(X·W_θ) after SDPA, "
           "before W_O; one gate per feature (W_θ: d → d)", (P.QIU_2025_GATE,),
           (Code("huggingface/transformers", "src/transformers/models/qwen3_next/modeling_qwen3_next.py"),),
           ("Qwen3-Next",)),
    Choice("logit", "QK-Clip", "optim.qk_clip=100", "after each optimizer step, per head h: S_max the largest "
           "scaled q·k of the batch, γ = min(1, τ/S_max), W_q,h ← γ^α·W_q,h, W_k,h ← γ^(1−α)·W_k,h",
           (P.KIMI_K2_2025,), (Code("NVIDIA/Megatron-LM", "megatron/core/optimizer/qk_clip.py"),), ("Kimi K2",),
           note="τ = optim.qk_clip (0 = off), α = optim.qk_clip_alpha = 0.5"),
    Choice("logit", "z-loss", "optim.z_loss=1e-4", "loss = CE + C·mean(log² Z), Z the output softmax's normalizer",
           (P.PALM_2022, P.WORTSMAN_2023), models=("PaLM", "OLMo 2"), note="0 = off"),
)

OPTIMIZERS = (
    Choice("optim", "AdamW", "optim=adamw", "Adam with decoupled weight decay, on 2-D weights only",
           (P.LOSHCHILOV_2019_ADAMW,), (Code("pytorch/pytorch", "torch/optim/adamw.py"),),
           ("LLaMA 1–3", "OLMo 2")),
    Choice("optim", "SGD", "optim=sgd", "w ← w − lr·g (optional momentum): the setting of DeepNet's update bounds",
           (P.ROBBINS_1951,), (Code("pytorch/pytorch", "torch/optim/sgd.py"),)),
    Choice("optim", "Muon", "optim=muon", "momentum, then the update of each 2-D hidden matrix orthogonalized "
           "(Newton–Schulz); embeddings, LM head, gains and biases on AdamW", (P.JORDAN_2024_MUON, P.LIU_2025_MUON),
           (Code("pytorch/pytorch", "torch/optim/_muon.py"), Code("KellerJordan/Muon", "muon.py")),
           ("Kimi K2", "Moonlight", "nanochat", "the modded-nanogpt speedrun")),
    Choice("optim", "independent weight decay", "optim.independent_wd=true", "w ← w·(1 − λ·lr_t/lr) per step: "
           "follows the schedule's shape, not the lr's size", (P.WORTSMAN_2023,)),
)

OLMO_CORE_INIT = Code("allenai/OLMo-core", "src/olmo_core/nn/transformer/init.py")

INITS = (
    Choice("init", "Xavier", "model.init=xavier", "every matrix N(0, 2/(fan_in + fan_out)); embeddings N(0, "
           "emb_std²); β (placement.beta) multiplies the std of v, out and the MLP", (P.GLOROT_2010, P.XIONG_2020),
           (Code("pytorch/pytorch", "torch/nn/init.py"),), ("the original Transformer",),
           note="the default; model.emb_std = 1: unit-variance embeddings, as the Post-LN and DeepNorm analyses "
                "assume"),
    Choice("init", "GPT-2 (scaled output projections)", "model.init=gpt2", "every matrix and embedding N(0, σ²), "
           "the attention output and MLP down projections N(0, (σ/√(2L))²)",
           (P.RADFORD_2019_GPT2, P.SHOEYBI_2019_MEGATRON),
           (NANOGPT_CODE, Code("NVIDIA/Megatron-LM", "scaled_init_method_normal")),
           ("GPT-2", "nanoGPT", "Megatron-LM"), note="σ = model.init_std = 0.02"),
    Choice("init", "OLMo 2 (truncated normal)", "model.init=olmo2", "every matrix and embedding N(0, σ²) "
           "truncated at ±3σ, no depth scaling", (P.OLMO2_2024,), (OLMO_CORE_INIT,), ("OLMo 2",),
           note="σ = model.init_std = 0.02; OLMo-core's InitMethod.normal"),
    Choice("init", "OLMo 1 \"mitchell\"", "model.init=mitchell", "every matrix N(0, 1/fan_in) truncated at ±3 std "
           "(embeddings and head 1/√d); block ℓ's (from 0) output projections also × 1/√(2(ℓ+1))",
           (P.GROENEVELD_2024_OLMO,), (Code("allenai/OLMo", "olmo/initialization.py"),), ("OLMo 1",)),
    Choice("init", "SmallInit", "model.init=small", "every matrix and embedding N(0, 2/(5d))", (P.NGUYEN_2019,),
           (Code("EleutherAI/gpt-neox", "megatron/model/init_functions.py"),), ("GPT-NeoX-20B (its in-layers)",),
           note="for norm-free stacks (placement=none, rezero)"),
)

OTHER = (
    Choice("other", "tied embeddings", "model.tie_embeddings=true", "logits = E·h: the LM head is the token "
           "embedding E, one matrix (counted, stored and trained once)", (P.PRESS_2017, P.INAN_2017),
           (NANOGPT_CODE,), ("GPT-2", "nanoGPT", "Gemma 1–3", "OLMo 1B"),
           note="the matrix starts as the head (model.init); refused with placement=ngpt, which keeps two"),
    Choice("other", "embedding projection (EmbProj)", "model.emb_proj=true", "a learned d×d matrix, orthogonally "
           "initialised, after the token embedding and before the LM head", (P.OSP_2025,), (OSP_CODE,),
           ("the OSP paper's 1.4B model",)),
)

CHOICES: tuple[Choice, ...] = NORMS + GAINS + PLACEMENTS + QK_FORMS + LOGIT_CONTROLS + OPTIMIZERS + INITS + OTHER
