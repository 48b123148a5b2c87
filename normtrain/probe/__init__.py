"""``normtrain-probe RUN_DIR``: the anatomy of a trained run, per layer.

``layers.py``: the eval loss with each block skipped, and the residual stream per block (input/output cosine,
rms, max |x|); ``norm_curves.py``: each norm's input → output curve and its γ·tanh(α·x) fit; ``inputs.py``: the
run folder's model, config and validation windows; ``run.py``: probe.json and the PNGs (``figures.py``);
``sweep.py``: every run folder of a sweep; ``cli.py``: the command. ``from normtrain.probe import probe`` runs it from
Python (``probe_sweep`` for a folder of runs).
"""

from __future__ import annotations

from typing import Any

__all__ = ["probe", "probe_sweep"]


def __getattr__(name: str) -> Any:
    """torch loads on first use, not on import: ``normtrain-probe --help`` stays fast."""
    if name == "probe":
        from normtrain.probe.run import probe

        return probe
    if name == "probe_sweep":
        from normtrain.probe.sweep import probe_sweep

        return probe_sweep
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
