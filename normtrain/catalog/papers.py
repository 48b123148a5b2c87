"""The papers the catalog cites, one constant each (several choices share one: OLMo 2, Gemma 2, nGPT, OSP, ...).

Authors, year, title and where it appeared, as the paper's own page gives them; ``venue`` is empty for a preprint,
``arxiv`` empty for a paper that has no arXiv id. A fact we could not check is left out, not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    authors: str  # "Zhang & Sennrich", "Kim et al."
    year: int
    title: str
    venue: str = ""  # "NeurIPS 2019"; "" for a preprint (or a blog post: see ``url``)
    arxiv: str = ""  # "1910.07467"
    url: str = ""  # where a paper without an arXiv id lives

    def cite(self, title: bool = True) -> str:
        """``Zhang & Sennrich 2019, "Root Mean Square Layer Normalization", NeurIPS 2019, arXiv:1910.07467``
        (without the title for the README's table)."""
        where = [w for w in (self.venue, f"arXiv:{self.arxiv}" if self.arxiv else "", self.url) if w]
        head = f"{self.authors} {self.year}" + (f', "{self.title}"' if title else "")
        return ", ".join([head, *where])


# Norm types
BA_2016 = Paper("Ba, Kiros & Hinton", 2016, "Layer Normalization", arxiv="1607.06450")
ZHANG_2019 = Paper("Zhang & Sennrich", 2019, "Root Mean Square Layer Normalization", "NeurIPS 2019", "1910.07467")
IOFFE_2015 = Paper("Ioffe & Szegedy", 2015, "Batch Normalization: Accelerating Deep Network Training by Reducing "
                   "Internal Covariate Shift", "ICML 2015", "1502.03167")
ZHU_2025 = Paper("Zhu, Chen, He, LeCun & Liu", 2025, "Transformers without Normalization", "CVPR 2025", "2503.10622")
CHEN_2025_DERF = Paper("Chen, Lu, Zhu, Sun & Liu", 2025, "Stronger Normalization-Free Transformers",
                       arxiv="2512.10938")
SUN_2025 = Paper("Sun, Song, Li, Yin, Zheng & Liu", 2025, "The Curse of Depth in Large Language Models",
                 "NeurIPS 2025", "2502.05795")
OSP_2025 = Paper("Park, Lee, Yoon, Hwang & Kang", 2025, "Outlier-Safe Pre-Training for Robust 4-Bit Quantization "
                 "of Large Language Models", "ACL 2025", "2506.19697")

# Placements
VASWANI_2017 = Paper("Vaswani et al.", 2017, "Attention Is All You Need", "NeurIPS 2017", "1706.03762")
XIONG_2020 = Paper("Xiong et al.", 2020, "On Layer Normalization in the Transformer Architecture", "ICML 2020",
                   "2002.04745")
WANG_2022_DEEPNET = Paper("Wang, Ma, Dong, Huang, Zhang & Wei", 2022, "DeepNet: Scaling Transformers to 1,000 Layers",
                          arxiv="2203.00555")
WANG_2022_MAGNETO = Paper("Wang et al.", 2022, "Foundation Transformers", "ICML 2023", "2210.06423")
LIU_2020_ADMIN = Paper("Liu, Liu, Gao, Chen & Han", 2020, "Understanding the Difficulty of Training Transformers",
                       "EMNLP 2020", "2004.08249")
KIM_2025_PERI = Paper("Kim et al.", 2025, "Peri-LN: Revisiting Normalization Layer in the Transformer Architecture",
                      "ICML 2025", "2502.02732")
DING_2021_COGVIEW = Paper("Ding et al.", 2021, "CogView: Mastering Text-to-Image Generation via Transformers",
                          "NeurIPS 2021", "2105.13290")
OLMO2_2024 = Paper("Team OLMo et al.", 2024, "2 OLMo 2 Furious", arxiv="2501.00656")
LI_2024_MIX = Paper("Li, Yin & Liu", 2024, "Mix-LN: Unleashing the Power of Deeper Layers by Combining Pre-LN and "
                    "Post-LN", "ICLR 2025", "2412.13795")
BACHLECHNER_2020 = Paper("Bachlechner, Majumder, Mao, Cottrell & McAuley", 2020, "ReZero is All You Need: Fast "
                         "Convergence at Large Depth", "UAI 2021", "2003.04887")
ZHUO_2025_HYBRID = Paper("Zhuo et al.", 2025, "HybridNorm: Towards Stable and Efficient Transformer Training via "
                         "Hybrid Normalization", "NeurIPS 2025", "2503.04598")
SHLEIFER_2021 = Paper("Shleifer, Weston & Ott", 2021, "NormFormer: Improved Transformer Pretraining with Extra "
                      "Normalization", arxiv="2110.09456")
TAKASE_2022_B2T = Paper("Takase, Kiyono, Kobayashi & Suzuki", 2022, "B2T Connection: Serving Stability and "
                        "Performance in Deep Transformers", "Findings of ACL 2023", "2206.00330")
XIE_2023_RESIDUAL = Paper("Xie et al.", 2023, "ResiDual: Transformer with Dual Residual Connections",
                          arxiv="2304.14802")
LOSHCHILOV_2024_NGPT = Paper("Loshchilov, Hsieh, Sun & Ginsburg", 2024, "nGPT: Normalized Transformer with "
                             "Representation Learning on the Hypersphere", "ICLR 2025", "2410.01131")
XIE_2025_MHC = Paper("Xie, Wei, Cao et al. (DeepSeek-AI)", 2025, "mHC: Manifold-Constrained Hyper-Connections",
                     arxiv="2512.24880")
ZHU_2024_HC = Paper("Zhu et al.", 2024, "Hyper-Connections", "ICLR 2025", "2409.19606")
CHEN_2025_GPAS = Paper("Chen, Xu et al.", 2025, "GPAS: Accelerating Convergence of LLM Pretraining via "
                       "Gradient-Preserving Activation Scaling", "NeurIPS 2025", "2506.22049")

# Attention and output logits
DEHGHANI_2023 = Paper("Dehghani et al.", 2023, "Scaling Vision Transformers to 22 Billion Parameters", "ICML 2023",
                      "2302.05442")
WORTSMAN_2023 = Paper("Wortsman et al.", 2023, "Small-scale proxies for large-scale Transformer training "
                      "instabilities", "ICLR 2024", "2309.14322")
GEMMA2_2024 = Paper("Gemma Team", 2024, "Gemma 2: Improving Open Language Models at a Practical Size",
                    arxiv="2408.00118")
QIU_2025_GATE = Paper("Qiu et al.", 2025, "Gated Attention for Large Language Models: Non-linearity, Sparsity, and "
                      "Attention-Sink-Free", "NeurIPS 2025", "2505.06708")
KIMI_K2_2025 = Paper("Kimi Team", 2025, "Kimi K2: Open Agentic Intelligence", arxiv="2507.20534")
PALM_2022 = Paper("Chowdhery et al.", 2022, "PaLM: Scaling Language Modeling with Pathways", arxiv="2204.02311")

# Optimizers
LOSHCHILOV_2019_ADAMW = Paper("Loshchilov & Hutter", 2019, "Decoupled Weight Decay Regularization", "ICLR 2019",
                              "1711.05101")
ROBBINS_1951 = Paper("Robbins & Monro", 1951, "A Stochastic Approximation Method",
                     "Annals of Mathematical Statistics")
JORDAN_2024_MUON = Paper("Jordan et al.", 2024, "Muon: An optimizer for hidden layers in neural networks",
                         url="kellerjordan.github.io/posts/muon (blog post)")
LIU_2025_MUON = Paper("Liu et al.", 2025, "Muon is Scalable for LLM Training", arxiv="2502.16982")

# Initialization and tied embeddings
GLOROT_2010 = Paper("Glorot & Bengio", 2010, "Understanding the difficulty of training deep feedforward neural "
                    "networks", "AISTATS 2010", url="proceedings.mlr.press/v9/glorot10a.html")
RADFORD_2019_GPT2 = Paper("Radford et al.", 2019, "Language Models are Unsupervised Multitask Learners",
                          url="cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf")
SHOEYBI_2019_MEGATRON = Paper("Shoeybi et al.", 2019, "Megatron-LM: Training Multi-Billion Parameter Language Models "
                              "Using Model Parallelism", arxiv="1909.08053")
GROENEVELD_2024_OLMO = Paper("Groeneveld et al.", 2024, "OLMo: Accelerating the Science of Language Models",
                             "ACL 2024", "2402.00838")
NGUYEN_2019 = Paper("Nguyen & Salazar", 2019, "Transformers without Tears: Improving the Normalization of "
                    "Self-Attention", "IWSLT 2019", "1910.05895")
PRESS_2017 = Paper("Press & Wolf", 2017, "Using the Output Embedding to Improve Language Models", "EACL 2017",
                   "1608.05859")
INAN_2017 = Paper("Inan, Khosravi & Socher", 2017, "Tying Word Vectors and Word Classifiers: A Loss Framework for "
                  "Language Modeling", "ICLR 2017", "1611.01462")
