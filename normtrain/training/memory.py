"""Will the run fit? Its memory estimated before anything of the model is allocated, against what the device has;
a run that cannot fit is refused (exit 2) with the numbers and the shapes that would fit, instead of climbing into
swap or the OOM killer inside one long allocation that no Ctrl-C can stop.

The estimate counts what training holds at once, per process:

  weights ....... the parameters, counted on a model built on the meta device (exact, and allocates nothing)
  gradients ..... one per weight, of the weight's size
  optimizer ..... AdamW two moments per weight (8 bytes in fp32), SGD with momentum and Muon about one, plain SGD none
  activations ... roughly: per token and block, the tensors the backward pass keeps (``ACT_FLOATS_PER_D`` of d,
                  ``ACT_FLOATS_PER_FF`` of the MLP width; not the attention weights, which torch's fused attention
                  does not keep), and the logits with their gradient (three floats per vocabulary entry and token)

It is a floor more than a ceiling (allocator slack, the evaluation batches, the CUDA context are left out): a
refusal means the run certainly does not fit; passing it does not promise that it will. FSDP shards weights,
gradients and optimizer state over the processes; DDP holds all of them on each.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

import torch
from omegaconf import DictConfig

from normtrain.config import model_config
from normtrain.model import GPT
from normtrain.util.errors import ConfigError

ACT_FLOATS_PER_D = 16  # residual, norm outputs, q, k, v, attention output, projections: about 16·d floats a token
ACT_FLOATS_PER_FF = 3  # the MLP's hidden activations (gate, up, their product)
LOGIT_FLOATS = 3  # logits, log-softmax, their gradient
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Estimate:
    """Bytes a run holds while it trains, per process (see the module docstring), and how they scale: with
    ``n_layers`` exactly (one block's parameters and activations each), with ``d_model`` about as d² (a block's
    matrices) and d (the embeddings, the activations)."""

    n_params: int
    block_params: int  # one block's
    state_bytes: tuple[float, float]  # per parameter: a weight (and its gradient), its optimizer state
    tokens: int  # per micro-batch
    vocab: int
    n_layers: int
    d_model: int
    ff_per_d: float | None  # the MLP width over d_model; None: a fixed model.d_ff
    d_ff: int
    n_heads: int

    def at(self, n_layers: int | None = None, d_model: int | None = None) -> dict[str, float]:
        """The estimate's parts at another depth or width (the same shape otherwise)."""
        n, d = n_layers or self.n_layers, d_model or self.d_model
        scale = d / self.d_model
        block = self.block_params * scale ** 2
        params = (self.n_params - self.n_layers * self.block_params) * scale + n * block
        ff = self.ff_per_d * d if self.ff_per_d is not None else self.d_ff
        per_token = n * (ACT_FLOATS_PER_D * d + ACT_FLOATS_PER_FF * ff)
        weights = params * self.state_bytes[0]
        return {"weights": weights, "gradients": weights, "optimizer": params * self.state_bytes[1],
                "activations": self.tokens * (per_token + LOGIT_FLOATS * self.vocab) * FLOAT_BYTES,
                "params": params}

    def total(self, n_layers: int | None = None, d_model: int | None = None) -> float:
        parts = self.at(n_layers, d_model)
        return parts["weights"] + parts["gradients"] + parts["optimizer"] + parts["activations"]


def optimizer_states(cfg: DictConfig) -> int:
    """States per weight the optimizer keeps: AdamW's two moments, a momentum buffer, or none."""
    name = cfg.optim.name
    if name == "sgd":
        return 1 if cfg.optim.get("momentum", 0.0) else 0
    return 1 if name == "muon" else 2


def estimate(cfg: DictConfig, vocab: int, world_size: int = 1) -> Estimate:
    """The memory of training ``cfg``'s model with a ``vocab``-entry vocabulary, per process."""
    m = model_config(cfg, vocab=vocab)
    with torch.device("meta"):  # shapes only: nothing is allocated, however large the model
        model = GPT(m)
    size = torch.empty((), dtype=getattr(torch, cfg.train.param_dtype)).element_size()
    shard = world_size if cfg.train.strategy == "fsdp" else 1
    return Estimate(n_params=model.num_params(), block_params=sum(p.numel() for p in model.blocks[0].parameters()),
                    state_bytes=(size / shard, size * optimizer_states(cfg) / shard),
                    tokens=cfg.train.batch_size * m.seq_len, vocab=vocab, n_layers=cfg.model.n_layers,
                    d_model=m.d_model, ff_per_d=None if m.d_ff else m.ff_width / m.d_model, d_ff=m.ff_width,
                    n_heads=m.n_heads)


def available(device: torch.device) -> tuple[float, str]:
    """Bytes this process can still use on ``device``, and where the number comes from."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free), f"free on {torch.cuda.get_device_name(device)}"
    ram, where = _mem_available(), "available RAM (MemAvailable)"
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        left = soft - _vm_size()
        if left < ram:
            ram, where = left, "left under this process's address-space limit (ulimit -v)"
    return float(ram), where


def _mem_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def check_fits(cfg: DictConfig, vocab: int, device: torch.device, world_size: int = 1) -> Estimate:
    """Refuse (ConfigError, exit 2) a run whose estimate exceeds what ``device`` has, naming what would fit."""
    need = estimate(cfg, vocab, world_size)
    have, where = available(device)
    if need.total() <= have:
        return need
    parts, m = need.at(), cfg.model
    raise ConfigError(
        f"the model does not fit in memory: model.d_model={m.d_model}, model.n_layers={m.n_layers} has "
        f"{need.n_params:.3g} parameters, and training it ({cfg.optim.name}, {cfg.train.param_dtype}) needs about "
        f"{gb(need.total())} (weights {gb(parts['weights'])}, gradients {gb(parts['gradients'])}, optimizer "
        f"state {gb(parts['optimizer'])}, activations {gb(parts['activations'])}), more than the {gb(have)} "
        f"{where} on {device}. {what_fits(need, have)} Nothing was allocated or written")


def what_fits(need: Estimate, have: float) -> str:
    """The largest ``model.n_layers`` at this width and the largest ``model.d_model`` at this depth that fit."""
    found = []
    depth = _largest(lambda n: need.total(n_layers=n) <= have, need.n_layers - 1)
    if depth:
        found.append(f"model.n_layers={depth} (at d_model={need.d_model})")
    step = need.n_heads * 2  # whole heads of an even size (RoPE)
    width = _largest(lambda k: need.total(d_model=k * step) <= have, need.d_model // step - 1)
    if width:
        found.append(f"model.d_model={width * step} (at n_layers={need.n_layers}, n_heads={need.n_heads})")
    if not found:
        return ("No smaller depth or width at this shape fits: use a smaller train.batch_size, model.seq_len or "
                "vocabulary.")
    return f"At this shape, {' or '.join(found)} would fit (by the same estimate)."


def _largest(fits, high: int) -> int | None:
    """The largest ``k`` in ``[1, high]`` that ``fits`` (memory grows with ``k``), by bisection; None if not 1."""
    if high < 1 or not fits(1):
        return None
    low, high = 1, high + 1
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def gb(n: float) -> str:
    """Bytes in GB or TB, three significant digits."""
    return f"{n / 1e12:.3g} TB" if n >= 1e12 else f"{n / 1e9:.3g} GB"
