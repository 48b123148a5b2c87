"""A probe for DISCUSSION.md, not a registered check: each block's gradient norm at init, Pre-LN against
HybridNorm and HybridNorm*, at hybrid_depth's CPU shape (d 64, 4 heads, GELU FFN 128, RoPE, RMSNorm).

Does HybridNorm's plateau on the unigram line at 24 and 48 layers start from gradients that vanish in its lower
blocks at init? One batch of 8 × 128 bytes of the standard library's source per seed, seeds 0-2.

    python experiments/hybrid_depth/grad_at_init.py
"""

import statistics
import sysconfig
from pathlib import Path

import torch

from normtrain.model.config import GPTConfig
from normtrain.model.gpt import GPT

ARMS = {"pre": {"placement": "pre"}, "hybrid": {"placement": "hybrid"},
        "hybrid*": {"placement": "hybrid", "first_pre": True}}


def block_grad_norms(layers: int, arm: str, seed: int, data: torch.Tensor) -> list[float]:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(n_layers=layers, d_model=64, n_heads=4, mlp="gelu", d_ff=128, pos="rope", **ARMS[arm]))
    starts = torch.randint(0, len(data) - 129, (8,), generator=torch.Generator().manual_seed(100 + seed))
    x = torch.stack([data[s:s + 128] for s in starts])
    y = torch.stack([data[s + 1:s + 129] for s in starts])
    model(x, y)[1].backward()
    return [torch.sqrt(sum((p.grad**2).sum() for p in b.parameters() if p.grad is not None)).item()
            for b in model.blocks]


def main() -> None:
    torch.set_num_threads(1)
    text = b"".join(p.read_bytes() for p in sorted((Path(sysconfig.get_paths()["stdlib"]) / "json").glob("*.py")))
    data = torch.tensor(list(text), dtype=torch.long)
    print("layers  arm      block 0 / last block (median [range], 3 seeds)  last block's norm (median)")
    for layers in (12, 24, 48):
        for arm in ARMS:
            norms = [block_grad_norms(layers, arm, seed, data) for seed in range(3)]
            ratios = [n[0] / n[-1] for n in norms]
            print(f"{layers:6d}  {arm:7s}  {statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"
                  f"{'':28s}{statistics.median(n[-1] for n in norms):.2f}", flush=True)


if __name__ == "__main__":
    main()
