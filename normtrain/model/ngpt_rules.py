"""What ``placement=ngpt`` allows with it: the choices that contradict nGPT (refused, exit 2, by ``config.validate``)
and the ones the paper did without that still make a model (a warning at the start of a run).

nGPT (Loshchilov et al., ICLR 2025) is one design: unit hidden states, unit weight vectors, its own scales. A norm
type, a gain, a second QK-norm, a bias or a learned position vector would each take a piece of it away while the
run still said ``ngpt``. Weight decay and warm-up only change how it trains; the paper uses neither (§2.6), and
``experiment=ngpt`` sets its optimizer.
"""

from __future__ import annotations

from typing import Any

REFUSED = "contradicts placement=ngpt"


def ngpt_model_problems(m: Any, n: Any, pl: Any) -> list[str]:
    """The model keys that contradict nGPT (empty for any other placement)."""
    from normtrain.model.config import qk_norm_form

    if pl.name != "ngpt":
        return []
    p: list[str] = []
    if n.name != "l2":
        p.append(f"norm={n.name} {REFUSED}, which normalizes with its own parameter-free projection x/‖x‖ "
                 "(norm=l2, selected by placement=ngpt): drop the norm choice, or pick another placement")
    elif n.gain != "none":
        p.append(f"norm.gain={n.gain} {REFUSED}: its normalizations have no gain (its learned scales are α, s_qk, "
                 "s_u, s_ν and s_z); use norm.gain=none")
    if qk_norm_form(m.qk_norm) != "none":
        p.append(f"model.qk_norm={m.qk_norm} {REFUSED}, which already normalizes each head's q and k after RoPE and "
                 "scales them by s_qk: a second norm would replace that; use model.qk_norm=none")
    if m.attn_gate != "none":
        p.append(f"model.attn_gate={m.attn_gate} {REFUSED}: nGPT keeps every matrix at unit norm along d_model, and "
                 "the gate's W_θ has no place in that design; use model.attn_gate=none")
    if m.mlp == "gelu":
        p.append("model.mlp=gelu has no gate ν for nGPT's s_ν·√d_model (§2.4.2): use model.mlp=swiglu (the "
                 "paper's) or geglu")
    if m.pos == "learned":
        p.append(f"model.pos=learned {REFUSED}: a position vector added to the unit token embedding moves the "
                 "stream off the sphere; nGPT uses RoPE (model.pos=rope)")
    if m.bias:
        p.append(f"model.bias=true {REFUSED}: its matrices are unit vectors along d_model and have no bias")
    if m.emb_std != 1.0:
        p.append(f"model.emb_std={m.emb_std} does not apply to placement=ngpt: its embedding rows are unit vectors")
    if m.tie_embeddings:
        p.append(f"model.tie_embeddings=true {REFUSED}, which keeps the input embedding and the LM head as two "
                 "matrices (E_input, E_output, §2.1), projects the rows of each back to unit norm after every step and "
                 "scales the logits by s_z; the paper and NVIDIA/ngpt never tie them")
    if m.init != "xavier" or m.init_std is not None:
        p.append(f"model.init={m.init} does not apply to placement=ngpt: it draws every matrix and projects its "
                 "vectors to unit norm (any init scale is removed); leave model.init=xavier and model.init_std=null")
    if pl.beta not in (None, "auto"):
        p.append(f"placement.beta={pl.beta} does not apply to placement=ngpt: an init gain is what the unit-norm "
                 "projection of every matrix removes; use 'auto'")
    return p


def ngpt_training_problems(cfg: Any) -> list[str]:
    """Training settings nGPT cannot run under here."""
    if cfg.placement.name != "ngpt":
        return []
    p = []
    if cfg.train.strategy == "fsdp":
        p.append("train.strategy=fsdp with placement=ngpt: the unit-norm projection after each step normalizes W_o "
                 "and W_down along the dimension FSDP2 shards, which is untested here; use train.strategy=ddp")
    if cfg.optim.get("qk_clip", 0) > 0:
        p.append(f"optim.qk_clip={cfg.optim.qk_clip} with placement=ngpt: nGPT's q and k are unit vectors scaled by "
                 "s_qk, so rescaling W_q and W_k is undone by that normalization (and by the unit-norm projection "
                 "after the step); use optim.qk_clip=0")
    return p


def ngpt_warnings(cfg: Any) -> list[str]:
    """Settings the paper did without (§2.6: no weight decay, no warm-up), each with what it changes."""
    if cfg.placement.name != "ngpt":
        return []
    o, w = cfg.optim, []
    for key in ("weight_decay", "muon_weight_decay"):
        if o.get(key, 0) > 0:
            w.append(f"optim.{key}={o[key]} with placement=ngpt: the paper uses no weight decay; the decay shrinks "
                     "each matrix before the step's unit-norm projection restores it, which enlarges the update's "
                     f"relative size (experiment=ngpt sets optim.{key}=0)")
    if o.warmup_steps > 0:
        w.append(f"optim.warmup_steps={o.warmup_steps} with placement=ngpt: the paper trains without warm-up "
                 "(experiment=ngpt sets optim.warmup_steps=0)")
    return w
