"""Low-level ops: pure torch / triton, no config objects (layer 1 of the package)."""

from normtrain.ops.rmsnorm import backward_kind, rms_norm, set_backward

__all__ = ["backward_kind", "rms_norm", "set_backward"]
