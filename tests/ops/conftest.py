"""Kernel tests run Triton's CPU interpreter unless TRITON_INTERPRET=0 is set (then CUDA, if present).

Triton reads the variable when a jit function is defined: ours on first use, but triton's own helpers
(``tl.sum``) when triton is first imported, and importing ``torch._dynamo`` does that. Running this
folder alone, setting it here is early enough; in the whole suite the top-level tests/conftest.py
must set it before anything imports torch (rms_norm raises a clear error otherwise).
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
