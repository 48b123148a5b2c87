"""The peer itself: nanoGPT's model, written here from its published definition (karpathy/nanoGPT, model.py) as a
reference implementation (not imported), against the normtrain model that the peer options make of it:

    model.init=gpt2 model.tie_embeddings=true norm=layernorm norm.bias=false model.bias=false
    model.mlp=gelu model.pos=learned placement=pre

(nanoGPT's ``bias=False``; its ``bias=True`` is ``model.bias=true`` with LayerNorm's own β). The two have the same
parameter count, compute the same logits from the same weights (copied across: c_attn split into q, k, v), and
start with the same statistics per tensor."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import normtrain

# ---------------------------------------------------------------------------------------------------------------
# The reference: nanoGPT's GPT, its structure and init as published (dropout 0; flash attention = SDPA, causal).


@dataclass
class NanoConfig:
    block_size: int = 64
    vocab_size: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    bias: bool = False  # True: biases in Linears and LayerNorms, like GPT-2; False: a bit better and faster


class NanoLayerNorm(nn.Module):
    """LayerNorm with an optional bias (PyTorch's LayerNorm had no bias=False then)."""

    def __init__(self, ndim: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class NanoAttention(nn.Module):
    def __init__(self, c: NanoConfig):
        super().__init__()
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)  # q, k, v for all heads, in one batch
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
        self.n_head, self.n_embd = c.n_head, c.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class NanoMLP(nn.Module):
    def __init__(self, c: NanoConfig):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class NanoBlock(nn.Module):
    def __init__(self, c: NanoConfig):
        super().__init__()
        self.ln_1, self.attn = NanoLayerNorm(c.n_embd, c.bias), NanoAttention(c)
        self.ln_2, self.mlp = NanoLayerNorm(c.n_embd, c.bias), NanoMLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    def __init__(self, c: NanoConfig):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd), wpe=nn.Embedding(c.block_size, c.n_embd),
            h=nn.ModuleList([NanoBlock(c) for _ in range(c.n_layer)]), ln_f=NanoLayerNorm(c.n_embd, c.bias)))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():  # the scaled init of the residual projections, per GPT-2
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layer))

    def get_num_params(self, non_embedding: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n - self.transformer.wpe.weight.numel() if non_embedding else n

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))  # every position's logits (nanoGPT's training path)


# ---------------------------------------------------------------------------------------------------------------

NANO = NanoConfig()
PEER = ["model.init=gpt2", "model.tie_embeddings=true", "norm=layernorm", "model.mlp=gelu", "model.pos=learned",
        "placement=pre", f"model.n_layers={NANO.n_layer}", f"model.d_model={NANO.n_embd}",
        f"model.n_heads={NANO.n_head}", f"model.seq_len={NANO.block_size}", "logger=none"]


def ours(bias: bool, seed: int = 0):
    cfg = normtrain.compose([*PEER, f"model.bias={str(bias).lower()}", *([] if bias else ["norm.bias=false"])])
    torch.manual_seed(seed)
    return normtrain.build_model(cfg)


def nano(bias: bool, seed: int = 0) -> NanoGPT:
    torch.manual_seed(seed)
    return NanoGPT(NanoConfig(bias=bias))


def nano_to_ours(ref: NanoGPT) -> dict[str, torch.Tensor]:
    """nanoGPT's weights under normtrain's names (c_attn's rows are q, k, v)."""
    t, d = ref.transformer, ref.config.n_embd
    out = {"tok_emb.weight": t.wte.weight, "pos_emb.weight": t.wpe.weight, "final_norm.weight": t.ln_f.weight,
           "final_norm.bias": t.ln_f.bias}
    for i, block in enumerate(t.h):
        pairs = {"norm1": block.ln_1, "norm2": block.ln_2, "attn.out_proj": block.attn.c_proj,
                 "mlp.up": block.mlp.c_fc, "mlp.down": block.mlp.c_proj}
        for name, module in pairs.items():
            out[f"blocks.{i}.{name}.weight"], out[f"blocks.{i}.{name}.bias"] = module.weight, module.bias
        for j, p in enumerate("qkv"):
            out[f"blocks.{i}.attn.{p}_proj.weight"] = block.attn.c_attn.weight[j * d:(j + 1) * d]
            out[f"blocks.{i}.attn.{p}_proj.bias"] = (None if block.attn.c_attn.bias is None
                                                     else block.attn.c_attn.bias[j * d:(j + 1) * d])
    return {k: v.detach().clone() for k, v in out.items() if v is not None}


@pytest.mark.parametrize("bias", [False, True], ids=["bias=False", "bias=True"])
def test_the_peer_options_make_nanogpts_model_parameter_for_parameter(bias):
    mine, ref = ours(bias), nano(bias)
    assert mine.num_params() == sum(p.numel() for p in ref.parameters())
    assert mine.num_params() - mine.pos_emb.weight.numel() == ref.get_num_params()  # nanoGPT's reported count
    state = nano_to_ours(ref)
    assert set(state) == set(mine.state_dict()) - {"lm_head.weight"}  # the tied head: the embedding itself
    assert {k: v.shape for k, v in state.items()} == {k: v.shape for k, v in mine.unique_state_dict().items()}


@pytest.mark.parametrize("bias", [False, True], ids=["bias=False", "bias=True"])
def test_with_nanogpts_weights_the_logits_are_nanogpts(bias):
    """Every weight of the reference perturbed (gains, biases too), copied across: logits within 1e-5."""
    ref = nano(bias).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn_like(p))
    mine = ours(bias, seed=1).eval()
    mine.load_state_dict(nano_to_ours(ref))
    idx = torch.randint(0, NANO.vocab_size, (3, NANO.block_size), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        diff = (mine(idx)[0] - ref(idx)).abs().max().item()
    assert diff < 1e-5, diff


def test_the_init_statistics_of_each_tensor_are_nanogpts():
    """Each tensor's mean and std at init as nanoGPT's scheme draws it (another sample of the same law): std within
    5% (16k draws and more per tensor: ~0.6% noise each), mean within 5% of the std of 0; gains 1, no biases."""
    mine, ref = ours(False).unique_state_dict(), nano_to_ours(nano(False, seed=1))
    assert set(mine) == set(ref)
    for name, theirs in ref.items():
        a = mine[name]
        if theirs.dim() == 1:
            assert torch.equal(a, theirs) and torch.equal(a, torch.ones_like(a)), name
            continue
        assert a.std().item() == pytest.approx(theirs.std().item(), rel=0.05), name
        assert abs(a.mean().item()) < 0.05 * theirs.std().item() and abs(theirs.mean().item()) < 0.05 * a.std(), name
    residual = 0.02 / math.sqrt(2 * NANO.n_layer)
    assert ref["blocks.3.mlp.down.weight"].std().item() == pytest.approx(residual, rel=0.05)
    assert mine["tok_emb.weight"].std().item() == pytest.approx(0.02, rel=0.05)
