"""Low-level ops: pure torch / triton, no config objects (layer 1 of the package)."""

from normtrain.ops.rmsnorm import rms_norm

__all__ = ["rms_norm"]
