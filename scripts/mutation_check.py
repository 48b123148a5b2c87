"""Plant typical bugs in the catalog, one at a time, and check that the formula tests catch every one.

Each mutant is a small text edit of one file of ``normtrain/`` (a gain swapped between two norms, a norm moved
across RoPE or an activation, a scale off by one layer, ...). The script copies the package into a temporary
folder, plants the edit there (never in the work tree), runs the tests that must catch it against the copy
(``tests/model/test_formulas.py``; for the optimizer's split and QK-Clip ``tests/training/test_optim.py`` too; for
nGPT its formula tests and the training-loop tests of its weight rule) and counts the mutant caught when a test fails.
A survivor names a formula no test pins: add the test.

    python scripts/mutation_check.py               # every mutant; prints caught/planted and any survivor
    python scripts/mutation_check.py --list        # the mutants, by kind
    python scripts/mutation_check.py --only NAME…  # some of them
    python scripts/mutation_check.py --jobs 2      # in parallel

Exit status: 0 when every planted mutant was caught, 1 when one survived, 2 when a mutant no longer applies to
the code (its text is not found exactly once: update it with the code).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


NGPT_TESTS = ("tests/model/test_ngpt_formulas.py",)  # nGPT's formulas and its weight rule
NGPT_LOOP_TESTS = ("tests/training/test_ngpt.py::test_ngpt_trains_on_the_sphere_logs_alpha_and_resumes_back_onto_it",
                   "tests/training/test_ngpt.py::test_the_weight_rule_holds_right_after_a_rollback")
OPTIM_TESTS = ("tests/model/test_formulas.py", "tests/training/test_optim.py")  # Muon's split, QK-Clip
MHC_TESTS = ("tests/model/test_mhc_formulas.py",)  # mHC's mappings, Sinkhorn, block and model


@dataclass(frozen=True)
class Mutant:
    name: str
    kind: str  # what sort of bug it stands for
    path: str  # relative to normtrain/
    edits: tuple[tuple[str, str], ...]  # (text found exactly once, its replacement), applied in order
    tests: tuple[str, ...] = ("tests/model/test_formulas.py",)  # relative to the repository: what must catch it


def m(name: str, kind: str, path: str, *edits: tuple[str, str], tests: tuple[str, ...] | None = None) -> Mutant:
    return Mutant(name, kind, path, edits, **({"tests": tests} if tests else {}))


SWAP, MOVE, SCALE, DEPTH, FORM, STRUCT = ("swapped gains", "a norm moved", "a scale or shortcut weight",
                                          "depth off by one", "a formula's detail", "a norm added or dropped")
PRE_FWD = "y, h = self.added_normed(self.norm2, self.attn(self.norm1(x)), x)"
POST_FWD = ("x = self.norm1.add_norm(self.attn(x), residual=self.scaled(x), alpha=self.alpha)[0]\n"
            "        return self.norm2.add_norm(self.mlp(x), residual=self.scaled(x), alpha=self.alpha)[0]")
PERI_FWD = "y, h = self.added_normed(self.norm2, self.out_norm1(self.attn(self.norm1(x))), x)"
HYBRID_FWD = ("z = self.added_normed(self.norm2, self.attn(x), x)[0]  # Z = N(X + Attn(X))\n"
              "        return self.added(z, self.mlp(z))")
B2T_TOP = "return self.norm2.add_norm(self.mlp(top), residual=self.scaled(top) + bottom)[0]"
HEAD_SCALE = "y = y * self.head_scale[:, None]"
EARLY, LATE = 'if self.qk_norm_at == "before_rope":', 'if self.qk_norm_at == "after_rope":'
QK_EARLY = EARLY + "\n            q, k = self._normed(q, self.q_norm), self._normed(k, self.k_norm)"
HEAD_IF, WIDTH = 'if self.norm_form == "per_head":', '{"per_head": self.head_dim, "full": d_model}'
V_NORMED = "v = self._normed(self._heads(self.v_proj(x)), self.v_norm)"
GATE = "y = y * torch.sigmoid(self.gate_proj(x)).view(*y.shape[:3], -1)"
OUT = "return self.out_proj(y if self.inner_norm is None else self.inner_norm(y))"
CAPPED = "scores = soft_cap(attention_logits(q, k, self.softmax_scale), self.softcap)"
MASKED = 'torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)'
SQUASH_DERF = "return torch.erf(self.alpha * x + self.shift)"
MHC_RES = "res = sinkhorn((a_res * h_res + b_res).unflatten(-1, (n, n)))"
MHC_WRITE = "return res @ streams + post.unsqueeze(-1) * out.to(streams.dtype).unsqueeze(-2)"

MUTANTS: tuple[Mutant, ...] = (
    m("pre-gains-swapped", SWAP, "model/placements/pre.py",
      (PRE_FWD, "y, h = self.added_normed(self.norm1, self.attn(self.norm2(x)), x)")),
    m("post-gains-swapped", SWAP, "model/placements/post.py",
      (POST_FWD, POST_FWD.replace("norm1", "normX").replace("norm2", "norm1").replace("normX", "norm2"))),
    m("peri-output-norms-swapped", SWAP, "model/placements/peri.py",
      (PERI_FWD, PERI_FWD.replace("out_norm1", "out_norm2")),
      ("return self.added(h, self.out_norm2(self.mlp(y)))", "return self.added(h, self.out_norm1(self.mlp(y)))")),
    m("peri-mlp-reads-the-attention-input-norm", SWAP, "model/placements/peri.py",
      ("return self.added(h, self.out_norm2(self.mlp(y)))",
       "return self.added(h, self.out_norm2(self.mlp(self.norm1(h))))")),
    m("qk-gains-swapped", SWAP, "model/attention.py",
      (QK_EARLY, QK_EARLY.replace("self.q_norm), self._normed(k, self.k_norm)",
                                  "self.k_norm), self._normed(k, self.q_norm)"))),
    m("v-norm-takes-the-k-gain", SWAP, "model/attention.py",
      (V_NORMED, V_NORMED.replace("self.v_norm", "self.k_norm"))),
    m("logit-softcap-reads-the-attention-cap", SWAP, "model/gpt.py",
      ("self.cfg.logit_softcap)", "self.cfg.attn_softcap or self.cfg.logit_softcap)")),
    m("admin-omegas-swapped", SWAP, "model/placements/post.py",
      ('self.shortcut("omega2", x, m)', 'self.shortcut("omega1", x, m)')),
    m("rezero-gates-swapped", SWAP, "model/placements/normfree.py",
      ("return self.added(h, self.a2 * self.mlp(h))", "return self.added(h, self.a1 * self.mlp(h))")),
    m("swiglu-gate-and-up-swapped", SWAP, "model/mlp.py",
      ("self.activation(self.gate(x)) * self.up(x)", "self.activation(self.up(x)) * self.gate(x)")),
    m("qk-norm-per-head-after-rope", MOVE, "model/attention.py",
      (EARLY, EARLY[:-1] + ' and self.qk_norm != "per_head":'), (LATE, LATE[:-1] + ' or self.qk_norm == "per_head":')),
    m("qk-norm-after-rope-applied-before-it", MOVE, "model/attention.py", (EARLY, "if True:"), (LATE, "if False:")),
    m("qk-norm-before-rope-applied-after-it", MOVE, "model/attention.py", (EARLY, "if False:"), (LATE, "if True:")),
    m("qk-norm-full-applied-per-head", MOVE, "model/attention.py",
      (WIDTH, '{"per_head": self.head_dim, "full": self.head_dim}'), (HEAD_IF, "if True:")),
    m("qk-norm-per-head-gain-of-d-model", MOVE, "model/attention.py",
      (WIDTH, '{"per_head": d_model, "full": d_model}'), (HEAD_IF, "if False:")),
    m("v-norm-on-the-attention-output", MOVE, "model/attention.py", (V_NORMED, "v = self._heads(self.v_proj(x))"),
      ("y = y.transpose(1, 2)  # (B, T, H, d_head)", "y = self._normed(y, self.v_norm).transpose(1, 2)")),
    m("attn-softcap-before-the-scale", MOVE, "model/attention.py",
      (CAPPED, "scores = soft_cap(attention_logits(q, k, self.softmax_scale) * self.head_dim**0.5, self.softcap)"
               " / self.head_dim**0.5")),
    m("attn-softcap-after-the-mask", MOVE, "model/attention.py",
      (CAPPED, "scores = attention_logits(q, k, self.softmax_scale)"),
      (MASKED, 'torch.softmax(soft_cap(scores.masked_fill(~visible, float("-inf")), self.softcap), dim=-1)')),
    m("logit-softcap-on-the-hidden-state", MOVE, "model/gpt.py",
      ("logits = self.lm_head(self.hidden(idx))",
       "logits = self.lm_head(soft_cap(self.hidden(idx), self.cfg.logit_softcap))"),
      ("logits = soft_cap(logits, self.cfg.logit_softcap)", "logits = soft_cap(logits, 0.0)")),
    m("attn-logit-max-read-after-the-cap", MOVE, "model/attention.py",
      ("LogitStats(entropy, causal_head_max(raw),",
       "LogitStats(entropy, causal_head_max(soft_cap(raw, self.softcap)),")),
    m("qk-clip-reads-the-capped-logit", MOVE, "model/attention.py",
      ("now = head_logit_max(q.detach(), k.detach(), self.softmax_scale)",
       "now = soft_cap(head_logit_max(q.detach(), k.detach(), self.softmax_scale), self.softcap)"),
      tests=OPTIM_TESTS),
    m("qk-clip-exponents-swapped", SWAP, "training/qk_clip.py",
      ("(attn.q_proj, self.alpha), (attn.k_proj, 1.0 - self.alpha)",
       "(attn.q_proj, 1.0 - self.alpha), (attn.k_proj, self.alpha)"), tests=OPTIM_TESTS),
    m("qk-clip-heads-interleaved", FORM, "training/qk_clip.py",
      ("rows = g.repeat_interleave(attn.head_dim)", "rows = g.repeat(attn.head_dim)"), tests=OPTIM_TESTS),
    m("qk-clip-gamma-inverted", FORM, "training/qk_clip.py",
      ("tau / s_max, torch.ones_like", "s_max / tau, torch.ones_like"), tests=OPTIM_TESTS),
    m("muon-takes-the-embedding-and-head", SWAP, "training/optim.py",
      ("hidden = [p for p in params if p.dim() == 2 and id(p) not in io]",
       "hidden = [p for p in params if p.dim() == 2]"), tests=OPTIM_TESTS),
    m("emb-proj-only-on-the-input", STRUCT, "model/gpt.py",
      ("return x if self.emb_out is None else self.emb_out(x)", "return x"), tests=OPTIM_TESTS),
    m("emb-proj-only-on-the-output", STRUCT, "model/gpt.py",
      ("        if self.emb_in is not None:\n            x = self.emb_in(x)\n", ""), tests=OPTIM_TESTS),
    m("emb-proj-transposed", FORM, "model/gpt.py", ("x = self.emb_in(x)", "x = x @ self.emb_in.weight"),
      tests=OPTIM_TESTS),
    m("gate-after-w-out", MOVE, "model/attention.py", (GATE, "pass"),
      (OUT, OUT + " * torch.sigmoid(self.gate_proj(x)).repeat_interleave(\n"
                  "            x.shape[-1] // self.gate_proj.out_features, -1) if self.gate_proj is not None else "
                  "self.out_proj(y if self.inner_norm is None else self.inner_norm(y))")),
    m("gate-reads-the-attention-output", MOVE, "model/attention.py",
      (GATE, "y = y * torch.sigmoid(self.gate_proj(y.reshape(x.shape))).view(*y.shape[:3], -1)")),
    m("gate-features-in-the-wrong-heads", MOVE, "model/attention.py",
      (GATE, "y = y * torch.sigmoid(self.gate_proj(x)).view(*y.shape[:2], -1, y.shape[2]).transpose(2, 3)")),
    m("reorder-norm-before-the-sublayer", MOVE, "model/placements/peri.py",
      ("h = self.added(x, self.norm1(self.attn(x)))", "h = self.added(x, self.attn(self.norm1(x)))")),
    m("subln-attention-norm-after-w-out", MOVE, "model/attention.py",
      ("return self.out_proj(y if self.inner_norm is None else self.inner_norm(y))",
       "y = self.out_proj(y)\n        return y if self.inner_norm is None else self.inner_norm(y)")),
    m("subln-gated-norm-before-the-activation", MOVE, "model/mlp.py",
      ("self.down(_inner(self.inner_norm, self.activation(self.gate(x)) * self.up(x)))",
       "self.down(self.activation(_inner(self.inner_norm, self.gate(x))) * self.up(x))")),
    m("subln-gelu-norm-before-the-activation", MOVE, "model/mlp.py",
      ("self.down(_inner(self.inner_norm, F.gelu(self.up(x))))",
       "self.down(F.gelu(_inner(self.inner_norm, self.up(x))))")),
    m("post-norm-before-the-add", MOVE, "model/placements/post.py",
      ("x = self.norm1.add_norm(self.attn(x), residual=self.scaled(x), alpha=self.alpha)[0]",
       "x = self.alpha * x + self.attn(self.norm1(x))")),
    m("deepnorm-alpha-on-the-branch-layernorm", SCALE, "norms/__init__.py",
      ("s = x + residual if alpha == 1.0 else x + alpha * residual",
       "s = x + residual if alpha == 1.0 else alpha * x + residual")),
    m("deepnorm-alpha-on-the-branch-rmsnorm", SCALE, "ops/rmsnorm.py",
      ("s = x + residual if alpha == 1.0 else x + alpha * residual",
       "s = x + residual if alpha == 1.0 else alpha * x + residual")),
    m("deepnorm-alpha-exponent", SCALE, "model/placements/post.py",
      ("(2 * n_layers) ** 0.25", "(2 * n_layers) ** 0.5")),
    m("deepnorm-beta-scales-up", SCALE, "model/placements/post.py",
      ("(8 * n_layers) ** -0.25", "(8 * n_layers) ** 0.25")),
    m("init-beta-on-q-and-k", SCALE, "model/placements/base.py",
      ("nn.init.xavier_normal_(proj.weight, gain=1.0)", "nn.init.xavier_normal_(proj.weight, gain=beta)")),
    m("subln-beta-log-l", SCALE, "model/placements/pre.py",
      ("math.sqrt(math.log(2 * n_layers))", "math.sqrt(math.log(n_layers + 1))")),
    m("admin-omega-on-the-branch", SCALE, "model/placements/post.py",
      ('x = self.norm1.add_norm(a, residual=self.shortcut("omega1", x, a) * self.scaled(x))[0]',
       'x = self.norm1.add_norm(self.shortcut("omega1", x, a) * a, residual=self.scaled(x))[0]')),
    m("admin-profile-drops-omega", SCALE, "model/placements/post.py",
      ("((omega * x).float().var(correction=0)", "(x.float().var(correction=0)")),
    m("depth-scale-l-plus-one", DEPTH, "model/placements/base.py",
      ("build_norm(spec, dim, layer=self.layer + 1)", "build_norm(spec, dim, layer=self.layer + 2)")),
    m("depth-scale-l-minus-one", DEPTH, "norms/__init__.py", ("layer**-0.5", "max(layer - 1, 1) ** -0.5")),
    m("depth-scale-without-the-root", DEPTH, "norms/__init__.py", ("layer**-0.5", "1 / layer")),
    m("depth-scale-on-the-final-norm", DEPTH, "model/gpt.py",
      ("build_norm(cfg.norm, cfg.d_model) if", "build_norm(cfg.norm, cfg.d_model, layer=cfg.n_layers) if")),
    m("mix-boundary-one-block-late", DEPTH, "model/placements/mix.py",
      ("layer < n_post_blocks(", "layer <= n_post_blocks(")),
    m("mix-ceil-not-floor", DEPTH, "model/placements/mix.py",
      ("math.floor(post_fraction * n_layers + 1e-9)", "math.ceil(post_fraction * n_layers - 1e-9)")),
    m("dyt-alpha-after-tanh", FORM, "norms/__init__.py",
      ("return torch.tanh(self.alpha * x)", "return self.alpha * torch.tanh(x)")),
    m("dyt-beta-missing", FORM, "norms/__init__.py", ("torch.addcmul(self.bias, y, self.gain())", "y * self.gain()")),
    m("derf-shift-outside-erf", FORM, "norms/__init__.py",
      (SQUASH_DERF, "return torch.erf(self.alpha * x) + self.shift")),
    m("derf-alpha-scales-the-shift", FORM, "norms/__init__.py",
      (SQUASH_DERF, "return torch.erf(self.alpha * (x + self.shift))")),
    m("derf-tanh-not-erf", FORM, "norms/__init__.py", (SQUASH_DERF, "return torch.tanh(self.alpha * x + self.shift)")),
    m("zero-centred-gain-without-the-one", FORM, "norms/__init__.py",
      ('return 1 + w if self.gain_form == "zero_centred"', 'return w if self.gain_form == "zero_centred"')),
    m("zero-centred-gain-starts-at-one", FORM, "norms/__init__.py",
      ('init = 0.0 if spec.gain == "zero_centred" else 1.0', "init = 1.0")),
    m("scalar-gain-ignored", FORM, "norms/__init__.py", ("else w.expand(self.dim).contiguous()", "else None")),
    m("no-gain-keeps-the-bias", FORM, "norms/__init__.py", ("if shape and bias else None", "if bias else None")),
    m("qk-norm-gain-kept", FORM, "model/attention.py",
      ("spec = spec if qk_norm_gain else spec.without_gain()", "spec = spec")),
    m("softcap-without-the-outer-c", FORM, "model/softcap.py",
      ("return cap * torch.tanh(z / cap) if cap else z", "return torch.tanh(z / cap) if cap else z")),
    m("gate-silu-not-sigmoid", FORM, "model/attention.py", (GATE, GATE.replace("torch.sigmoid", "F.silu"))),
    m("prmsnorm-k-floor", FORM, "norms/__init__.py", ("max(1, math.ceil(p * dim))", "max(1, int(p * dim))")),
    m("prmsnorm-k-plus-one", FORM, "norms/__init__.py",
      ("max(1, math.ceil(p * dim))", "max(1, math.ceil(p * dim) + 1)")),
    m("layernorm-bias-missing", FORM, "norms/__init__.py",
      ("self.gain(), self.bias, self.eps)", "self.gain(), None, self.eps)")),
    m("layernorm-eps-ignored", FORM, "norms/__init__.py",
      ("self.gain(), self.bias, self.eps)", "self.gain(), self.bias, 1e-5)")),
    m("rmsnorm-eps-outside-the-root", FORM, "ops/rmsnorm.py",
      ("y = xf * torch.rsqrt(stat.pow(2).mean(-1, keepdim=True) + eps)",
       "y = xf / (stat.pow(2).mean(-1, keepdim=True).sqrt() + eps)")),
    m("rmsnorm-eps-dropped-in-torchs-fused-op", FORM, "ops/rmsnorm.py",
      ("return F.rms_norm(x, (x.shape[-1],), weight, eps)", "return F.rms_norm(x, (x.shape[-1],), weight)")),
    m("batchnorm-eps-ignored", FORM, "norms/__init__.py",
      ("nn.BatchNorm1d(dim, eps=spec.eps, affine=spec.affine)", "nn.BatchNorm1d(dim, affine=spec.affine)")),
    m("causal-batchnorm-count-without-the-batch", FORM, "norms/__init__.py",
      ("count = x.shape[0] * torch.arange(1,", "count = torch.arange(1,")),
    m("geglu-exact-gelu", FORM, "model/mlp.py", ('F.gelu(gate, approximate="tanh")', "F.gelu(gate)")),
    m("gelu-mlp-tanh-gelu", FORM, "model/mlp.py", ("F.gelu(self.up(x))", 'F.gelu(self.up(x), approximate="tanh")')),
    m("rope-interleaved-pairs", FORM, "model/attention.py",
      ("x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x[..., ::2], x[..., 1::2]")),
    m("pre-final-norm-missing", STRUCT, "model/placements/pre.py",
      ("    final_norm = True\n", "    final_norm = False\n")),
    m("post-final-norm-added", STRUCT, "model/placements/post.py",
      ('    """\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        x = self.norm1.add_norm(',
       '    """\n\n    final_norm = True\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n'
       '        x = self.norm1.add_norm(')),
    m("peri-output-norm-dropped", STRUCT, "model/placements/peri.py",
      ("return self.added(h, self.out_norm2(self.mlp(y)))", "return self.added(h, self.mlp(y))")),
    # the 2023–2026 placements and GPAS
    m("hybrid-ffn-residual-from-y-not-z", MOVE, "model/placements/hybrid.py",
      (HYBRID_FWD,
       "z, y = self.added_normed(self.norm2, self.attn(x), x)\n        return self.added(y, self.mlp(z))")),
    m("hybrid-attention-input-normed", MOVE, "model/placements/hybrid.py",
      ("self.added_normed(self.norm2, self.attn(x), x)[0]",
       "self.added_normed(self.norm2, self.attn(self.norm2(x)), x)[0]")),
    m("hybrid-first-pre-ignored", STRUCT, "model/placements/hybrid.py",
      ("if layer == 0 and cfg.first_pre:", "if False:")),
    m("hybrid-without-v-norm", STRUCT, "model/placements/hybrid.py",
      ('IMPLIED = {"qk_norm": "per_head", "v_norm": True}', 'IMPLIED = {"qk_norm": "per_head"}')),
    m("hybrid-qkv-norm-over-the-whole-projection", FORM, "model/placements/hybrid.py",
      ('IMPLIED = {"qk_norm": "per_head", "v_norm": True}', 'IMPLIED = {"qk_norm": "full", "v_norm": True}')),
    m("normformer-head-scale-after-w-out", MOVE, "model/attention.py", (HEAD_SCALE, "pass"),
      (OUT, OUT + " * (1 if self.head_scale is None else\n"
                  "            self.head_scale.repeat_interleave(self.head_dim))")),
    m("normformer-post-act-norm-missing", STRUCT, "model/placements/normformer.py",
      ("        if post_act_norm:\n", "        if False:\n")),
    m("normformer-post-attention-norm-missing", STRUCT, "model/placements/normformer.py",
      ("self.out_norm1(self.attn(self.norm1(x)))", "self.attn(self.norm1(x))")),
    m("normformer-resid-scale-on-the-branch", SCALE, "model/placements/normformer.py",
      ("self.added(h if self.resid_scale is None else self.resid_scale * h, self.mlp(y))",
       "self.added(h, self.mlp(y) if self.resid_scale is None else self.resid_scale * self.mlp(y))")),
    m("b2t-skip-from-the-sum-before-n1", MOVE, "model/placements/post.py",
      ("top = self.norm1.add_norm(self.attn(x), residual=bottom)[0]  # x_a",
       "top, bottom = self.norm1.add_norm(self.attn(x), residual=bottom)  # x_a")),
    m("b2t-skip-missing", STRUCT, "model/placements/post.py",
      (B2T_TOP, "return self.norm2.add_norm(self.mlp(top), residual=self.scaled(top))[0]")),
    m("resi-dual-dual-stream-missing-its-norm", STRUCT, "model/placements/resi_dual.py",
      ("return post + final_norm(dual)", "return post + dual")),
    m("resi-dual-dual-stream-adds-the-normed-stream", MOVE, "model/placements/resi_dual.py",
      ("self.norm1.add_norm(a, residual=self.scaled(post))[0], self.added(dual, a)",
       "self.norm1.add_norm(a, residual=self.scaled(post))[0], self.added(dual, self.norm1(post + a))")),
    m("gpas-stop-gradient-missing", FORM, "model/placements/base.py",
      ("x - F.silu(self.gpas_gate) * x.detach()", "x - F.silu(self.gpas_gate) * x")),
    m("gpas-sigmoid-not-silu", FORM, "model/placements/base.py",
      ("x - F.silu(self.gpas_gate) * x.detach()", "x - torch.sigmoid(self.gpas_gate) * x.detach()")),
    m("gpas-after-the-norm-in-post-ln", MOVE, "model/placements/post.py",
      (POST_FWD, "x = self.scaled(self.norm1.add_norm(self.attn(x), residual=x, alpha=self.alpha)[0])\n"
                 "        return self.scaled(self.norm2.add_norm(self.mlp(x), residual=x, alpha=self.alpha)[0])")),
    m("gpas-on-the-shortcut-in-pre-ln", MOVE, "model/placements/base.py",
      ("return self.scaled(shortcut + branch)", "return self.scaled(shortcut) + branch")),
    # nGPT (placement=ngpt): its formulas, and the weight rule the training loop must apply
    m("ngpt-alpha-not-abs", FORM, "model/placements/ngpt.py",
      ("alpha.abs().to(h.dtype)", "alpha.to(h.dtype)"), tests=NGPT_TESTS),
    m("ngpt-alpha-not-scaled", SCALE, "model/placements/ngpt.py",
      ("self.update(h, self.attn(h), self.alpha_attn())", "self.update(h, self.attn(h), self.alpha_attn.stored)"),
      tests=NGPT_TESTS),
    m("ngpt-no-norm-after-the-update", STRUCT, "model/placements/ngpt.py",
      ("return self.norm(torch.lerp(h, self.norm(out), alpha.abs().to(h.dtype)))",
       "return torch.lerp(h, self.norm(out), alpha.abs().to(h.dtype))"), tests=NGPT_TESTS),
    m("ngpt-sublayer-output-not-normed", STRUCT, "model/placements/ngpt.py",
      ("torch.lerp(h, self.norm(out),", "torch.lerp(h, out,"), tests=NGPT_TESTS),
    m("ngpt-w-o-normalized-along-its-input", FORM, "model/placements/ngpt.py",
      ("(a.out_proj.weight, 0)", "(a.out_proj.weight, 1)"), tests=NGPT_TESTS),
    m("ngpt-w-down-normalized-along-its-input", FORM, "model/placements/ngpt.py",
      ("(m.down.weight, 0)", "(m.down.weight, 1)"), tests=NGPT_TESTS),
    m("ngpt-embedding-rows-left-alone", STRUCT, "model/gpt.py",
      ("[(self.tok_emb.weight, 1), (self.lm_head.weight, 1)] + [", "[(self.lm_head.weight, 1)] + ["),
      tests=NGPT_TESTS),
    m("ngpt-softmax-scale-one-over-root-d", SCALE, "model/placements/ngpt.py",
      ("attn.softmax_scale = attn.head_dim**0.5", "attn.softmax_scale = attn.head_dim**-0.5"), tests=NGPT_TESTS),
    m("ngpt-nu-without-root-d", SCALE, "model/hypersphere.py",
      ("factor=d_model**0.5", "factor=1.0"), tests=NGPT_TESTS),
    m("ngpt-s-qk-stored-at-scale-one", SCALE, "model/hypersphere.py",
      ("ScaledVector(n_heads * head_dim, init=1.0, scale=d_model**-0.5)",
       "ScaledVector(n_heads * head_dim, init=1.0, scale=1.0)"), tests=NGPT_TESTS),
    m("ngpt-logits-not-scaled", STRUCT, "model/gpt.py",
      ("logits = logits * self.logit_scale().to(logits.dtype)", "pass"), tests=NGPT_TESTS),
    m("ngpt-weight-rule-skipped-after-a-step", STRUCT, "training/step.py",
      ("        self.optimizer.step()\n        self.keep_weight_constraints()\n", "        self.optimizer.step()\n"),
      tests=NGPT_LOOP_TESTS),
    # both restore through one place
    m("ngpt-weight-rule-skipped-after-a-resume-or-rollback", STRUCT, "training/trainer.py",
      ("ckpt.restore(self.model, self.optimizer, state, self.ctx)\n        self.update.keep_weight_constraints()\n",
       "ckpt.restore(self.model, self.optimizer, state, self.ctx)\n"), tests=NGPT_LOOP_TESTS),
    # mHC (placement=mhc): its mappings, the Sinkhorn projection and the stream update
    m("mhc-h-res-transposed", FORM, "model/hyper_connections.py",
      (MHC_WRITE, MHC_WRITE.replace("res @ streams", "res.mT @ streams")), tests=MHC_TESTS),
    m("mhc-h-post-without-the-2", SCALE, "model/hyper_connections.py",
      ("post = 2 * torch.sigmoid(", "post = torch.sigmoid("), tests=MHC_TESTS),
    m("mhc-h-pre-softmax-not-sigmoid", FORM, "model/hyper_connections.py",
      ("pre = torch.sigmoid(a_pre * h_pre + b_pre) + EPS", "pre = torch.softmax(a_pre * h_pre + b_pre, -1) + EPS"),
      tests=MHC_TESTS),
    m("mhc-alpha-scales-the-static-bias", SCALE, "model/hyper_connections.py",
      (MHC_RES, MHC_RES.replace("a_res * h_res + b_res", "a_res * (h_res + b_res)")), tests=MHC_TESTS),
    m("mhc-alphas-swapped", SWAP, "model/hyper_connections.py",
      ("a_pre, a_post, a_res = self.alpha", "a_post, a_pre, a_res = self.alpha"), tests=MHC_TESTS),
    m("mhc-stream-not-rms-normed", FORM, "model/hyper_connections.py",
      ("h = self.phi(x) * torch.rsqrt(mean_square + RMS_EPS)", "h = self.phi(x)"), tests=MHC_TESTS),
    m("mhc-sinkhorn-rows-first", FORM, "model/hyper_connections.py",
      ("soft = torch.softmax(logits, dim=0)", "soft = torch.softmax(logits, dim=1)"),
      ("for dim in (0, 1) if t else (1,):", "for dim in (1, 0) if t else (0,):"), tests=MHC_TESTS),
    m("mhc-sinkhorn-one-iteration-short", DEPTH, "model/hyper_connections.py",
      ("for t in range(iters):\n            for dim", "for t in range(iters - 1):\n            for dim"),
      tests=MHC_TESTS),
    m("mhc-sinkhorn-gradient-misses-the-sum", FORM, "model/hyper_connections.py",
      ("g = (g - (g * y).sum(dim, keepdim=True)) * r", "g = g * r"), tests=MHC_TESTS),
    m("mhc-sinkhorn-gradient-skips-the-softmax", FORM, "model/hyper_connections.py",
      ("return soft * (g - (g * soft).sum(0, keepdim=True)), None, None", "return g, None, None"), tests=MHC_TESTS),
    m("mhc-mlp-reads-the-attention-mappings", SWAP, "model/placements/mhc.py",
      ("self.sublayer(x, self.mlp_hc, self.norm2, self.mlp)", "self.sublayer(x, self.attn_hc, self.norm2, self.mlp)"),
      tests=MHC_TESTS),
    m("mhc-sublayer-input-not-normed", STRUCT, "model/placements/mhc.py",
      ("out = f(norm(read(pre, streams)))", "out = f(read(pre, streams))"), tests=MHC_TESTS),
    m("mhc-streams-summed-at-the-exit", FORM, "model/placements/mhc.py",
      ("x.unflatten(-1, (cfg.streams, -1)).mean(dim=-2)", "x.unflatten(-1, (cfg.streams, -1)).sum(dim=-2)"),
      tests=MHC_TESTS),
    m("mhc-only-the-first-stream-gets-the-embedding", FORM, "model/placements/mhc.py",
      ("return x.repeat(*([1] * (x.dim() - 1)), cfg.streams)",
       "return torch.cat([x] + [torch.zeros_like(x)] * (cfg.streams - 1), dim=-1)"), tests=MHC_TESTS),
)


def planted(mutant: Mutant, package: Path) -> None:
    """Apply ``mutant`` to the copy of the package at ``package``; ValueError if its text is not found once."""
    path = package / mutant.path
    text = path.read_text()
    for old, new in mutant.edits:
        if text.count(old) != 1:
            raise ValueError(f"{mutant.name}: {old!r} occurs {text.count(old)} times in normtrain/{mutant.path}, "
                             "not once: update the mutant with the code")
        text = text.replace(old, new)
    path.write_text(text)


def check_applicable() -> list[str]:
    """Every mutant's problems applying to today's code (empty when all apply), without running anything."""
    problems = []
    for mutant in MUTANTS:
        text = (ROOT / "normtrain" / mutant.path).read_text()
        for old, new in mutant.edits:
            if text.count(old) != 1:
                problems.append(f"{mutant.name}: {old[:60]!r}… occurs {text.count(old)} times in {mutant.path}")
                break
            text = text.replace(old, new)
    return problems


def run_tests(mutant: Mutant | None, work: Path) -> tuple[bool, str]:
    """(did a formula test fail?, the test that failed, with why) with ``mutant`` planted in a copy in ``work``."""
    copy = work / (mutant.name if mutant else "unmutated")
    shutil.copytree(ROOT / "normtrain", copy / "normtrain", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "configs").symlink_to(ROOT / "configs")  # the training-loop tests compose configs next to the package
    if mutant:
        planted(mutant, copy / "normtrain")
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore"}
    # The working directory is the copy, so ``import normtrain`` finds it first (before the editable install).
    probe = subprocess.run([sys.executable, "-c", "import normtrain; print(normtrain.__file__)"], cwd=copy,
                           env=env, capture_output=True, text=True)
    if not probe.stdout.strip().startswith(str(copy)):
        raise RuntimeError(f"the copy was not the package imported: {probe.stdout or probe.stderr}")
    tests = mutant.tests if mutant else sorted({t for mu in MUTANTS for t in mu.tests})
    proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                           *(str(ROOT / t) for t in tests)], cwd=copy, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"pytest could not run the tests on {copy.name} (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    failed = [line.removeprefix("FAILED ") for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    return proc.returncode == 1, (failed[0].split("::", 1)[-1][:110] if failed else proc.stdout[-500:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", metavar="NAME", help="these mutants only")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    args = p.parse_args(argv)
    if args.list:
        for mutant in MUTANTS:
            print(f"{mutant.kind:28s} {mutant.name}  (normtrain/{mutant.path})")
        return 0
    if problems := check_applicable():
        print("mutants that no longer apply:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    chosen = [mu for mu in MUTANTS if not args.only or mu.name in args.only]
    if args.only and (unknown := set(args.only) - {mu.name for mu in chosen}):
        print(f"unknown mutants: {', '.join(sorted(unknown))}; see --list", file=sys.stderr)
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="normtrain-mutants-") as tmp:
        failed, out = run_tests(None, Path(tmp))
        if failed:
            print(f"the formula tests fail on the unmutated code:\n{out}", file=sys.stderr)
            return 2
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(lambda mu: (mu, *run_tests(mu, Path(tmp))), chosen))
    survivors = [mu for mu, caught, _ in results if not caught]
    for mu, caught, by in results:
        print(f"{'caught  ' if caught else 'SURVIVED'} {mu.kind:27s} {mu.name:42s} {by if caught else ''}")
    kinds = sorted({mu.kind for mu in chosen})
    print(f"mutation score: {len(chosen) - len(survivors)}/{len(chosen)} caught ({len(kinds)} kinds: "
          f"{', '.join(kinds)}) in {time.perf_counter() - started:.0f} s")
    if survivors:
        print("survivors (a formula no test pins): " + ", ".join(mu.name for mu in survivors))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
