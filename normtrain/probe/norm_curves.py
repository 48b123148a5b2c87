"""Each norm's input → output curve on a sample of tokens, and the γ·tanh(α·x) that fits it best.

Zhu et al. 2025 ("Transformers without Normalization", Fig. 2) plot, for trained LayerNorms, every element's
input x against the norm's output *before its affine part* (γ, β): per token the map is a line of slope 1/σ,
but tokens with large σ are also those with extreme x, so the cloud bends into a tanh-like S, which DyT
(γ·tanh(αx) + β) takes as its formula. Here the output is the same norm with its gain and bias removed (as with
``norm.affine=false``): (x − μ)/σ for LayerNorm, x/rms(x) for RMSNorm, tanh(αx) for DyT; a depth-scaled norm
is shown without its 1/√ℓ. The fit is least squares over the pairs: γ in closed form for each α, α on a
log grid around the data's scale and then refined; R² says how much of the output's variance the curve explains
(1 for DyT itself), ``r2_line`` the same for the best line y = c·x, for contrast.
"""

from __future__ import annotations

import copy
from functools import partial
from types import MethodType

import numpy as np
import torch
from torch import nn

from normtrain.norms import DepthScaled, Norm
from normtrain.probe.inputs import ProbeRun

FIT_PAIRS = 20_000  # (x, y) pairs a fit uses at most
ALPHA_GRID = np.geomspace(1e-2, 1e2, 121)  # α × std(x): from a straight line to a step


def norm_modules(model: nn.Module) -> list[tuple[str, Norm]]:
    """Every norm of the model by module name, outermost only (a DepthScaled wrapper, not the norm inside it)."""
    found: list[tuple[str, Norm]] = []
    for name, module in model.named_modules():
        if isinstance(module, Norm) and not any(name.startswith(f"{outer}.") for outer, _ in found):
            found.append((name, module))
    return found


def without_affine(norm: Norm) -> nn.Module:
    """A copy of ``norm`` with its per-feature gain and bias removed (and a depth scaling's 1/√ℓ): the
    normalization alone, computed as with ``norm.affine=false``."""
    inner = copy.deepcopy(norm.inner if isinstance(norm, DepthScaled) else norm)
    for name in ("weight", "bias"):
        if isinstance(getattr(inner, name, None), nn.Parameter):
            setattr(inner, name, None)
    return inner


class NormInputs:
    """Forward pre-hooks that keep a sample of each norm's input vectors (rows of the last dimension).

    Blocks that fuse the residual add into the norm (``add_norm``) are switched to the plain form, add then
    ``forward``, while the hooks are on, so that every norm's input passes through a hook."""

    def __init__(self, norms: list[tuple[str, Norm]], rows: int, seed: int = 0):
        self.norms, self.rows = norms, rows
        self.generator = torch.Generator().manual_seed(seed)
        self.inputs: dict[str, torch.Tensor] = {}
        self.handles: list = []

    def keep(self, name: str, _module, args) -> None:
        if name in self.inputs:  # one call per norm per forward; the first forward is the sample
            return
        x = args[0].detach().float().reshape(-1, args[0].shape[-1])
        pick = torch.randperm(len(x), generator=self.generator)[:self.rows].to(x.device)
        self.inputs[name] = x[pick]

    def __enter__(self) -> NormInputs:
        for name, norm in self.norms:
            self.handles.append(norm.register_forward_pre_hook(partial(self.keep, name)))
            norm.add_norm = MethodType(Norm.add_norm, norm)  # the unfused add, then forward
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        for _, norm in self.norms:
            del norm.add_norm


def fit_tanh(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Least-squares γ·tanh(α·x) through the pairs: {alpha, gamma, r2, r2_line}."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    total = float(((y - y.mean()) ** 2).sum()) or 1.0
    yy = float(y @ y)

    def sse(alphas: np.ndarray) -> np.ndarray:
        t = np.tanh(np.outer(alphas, x))
        return yy - (t @ y) ** 2 / np.maximum((t * t).sum(axis=1), 1e-300)

    scale = float(x.std()) or 1.0
    grid = ALPHA_GRID / scale
    best = int(np.argmin(sse(grid)))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    fine = np.geomspace(lo, hi, 81)
    alpha = float(fine[np.argmin(sse(fine))])
    t = np.tanh(alpha * x)
    gamma = float(t @ y / max(float(t @ t), 1e-300))
    line = yy - float(x @ y) ** 2 / max(float(x @ x), 1e-300)
    return {"alpha": alpha, "gamma": gamma, "r2": 1 - float(sse(np.array([alpha]))[0]) / total,
            "r2_line": 1 - line / total}


def _sig(values: np.ndarray, digits: int = 4) -> list[float]:
    return [float(f"{v:.{digits}g}") for v in values.tolist()]


@torch.no_grad()
def norm_curves(run: ProbeRun, windows: int = 4, rows: int = 512, points: int = 1000) -> list[dict]:
    """Per norm: its name, kind and block, the tanh fit on up to ``FIT_PAIRS`` (x, y) pairs, and ``points`` of
    them for the scatter; from ``rows`` input vectors sampled from the first ``windows`` validation windows."""
    norms = [(n, m) for n, m in norm_modules(run.model) if m.per_token]  # BatchNorm's output is not per token
    x = torch.cat([bx for bx, _ in run.batches])[:windows]
    with NormInputs(norms, rows) as taps, run.autocast():
        run.model(x)
    rng = np.random.default_rng(0)
    curves = []
    for name, norm in norms:
        inputs = taps.inputs[name]
        outputs = without_affine(norm)(inputs).float()
        xs, ys = inputs.flatten().cpu().numpy(), outputs.flatten().cpu().numpy()
        order = rng.permutation(xs.size)
        fit = fit_tanh(xs[order[:FIT_PAIRS]], ys[order[:FIT_PAIRS]])
        shown = order[:points]
        curve_x, curve_y = fit_curve(fit, float(xs.min()), float(xs.max()))
        curves.append({"name": name, "kind": _kind(norm), "layer": _layer(name), "n_pairs": int(xs.size),
                       "fit": {k: float(f"{v:.6g}") for k, v in fit.items()},
                       "x": _sig(xs[shown]), "y": _sig(ys[shown]), "curve": {"x": curve_x, "y": curve_y}})
    return curves


def _kind(norm: Norm) -> str:
    return f"{norm.inner.name}, depth-scaled" if isinstance(norm, DepthScaled) else norm.name


def _layer(name: str) -> int | None:
    """The block a norm belongs to (``blocks.3.norm1`` → 3); None outside the blocks (the final norm)."""
    parts = name.split(".")
    return int(parts[1]) if len(parts) > 1 and parts[0] == "blocks" and parts[1].isdigit() else None


def fit_curve(fit: dict[str, float], lo: float, hi: float, n: int = 61) -> tuple[list[float], list[float]]:
    """Points of the fitted γ·tanh(α·x) over [lo, hi], kept in probe.json for the figures (and compare's)."""
    xs = np.linspace(lo, hi, n)
    return _sig(xs), _sig(fit["gamma"] * np.tanh(fit["alpha"] * xs))

