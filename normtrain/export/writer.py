"""``export_run``: a run's final weights as a Hugging Face checkpoint where a transformers class expresses the
model (``normtrain.export.hf``), in normtrain's own format otherwise.

Either way the folder holds ``model.safetensors`` and ``normtrain.json`` (the model's own config, the run's
config and where it came from: what ``normtrain.load`` reads), plus the tokenizer when there is one; a Hugging
Face export adds ``config.json``. When transformers is installed the export is loaded back with
``from_pretrained`` and its logits compared with normtrain's: a model that does not match is written in
normtrain's format instead, with the difference reported (a mapping that is wrong never ships silently).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from normtrain.export.architecture import Architecture
from normtrain.export.hf import choose, nearest
from normtrain.export.run import run_model
from normtrain.export.tokenizer import eot_id, tokenizer_files
from normtrain.model import GPT
from normtrain.util.atomic import atomic_write
from normtrain.util.errors import DataError

WEIGHTS, RECORD, HF_CONFIG = "model.safetensors", "normtrain.json", "config.json"
FILES = (WEIGHTS, RECORD, HF_CONFIG, "tokenizer.json", "tokenizer_config.json")
TOLERANCE = 1e-3  # max |logit difference| of a faithful export in fp32 (measured on CPU: 0)


def export_run(run_dir: str | Path, out_dir: str | Path, verify: bool = True) -> dict[str, Any]:
    """Write the export of ``run_dir`` into ``out_dir``; returns what was written and how it was checked."""
    model, run = run_model(run_dir)
    out = _out_dir(Path(out_dir).expanduser())
    arch, reasons = choose(model.cfg)
    tokenizer, tokenizer_note = tokenizer_files(run["corpus"], model.cfg.seq_len)
    report = {"out_dir": str(out), "format": "normtrain", "why_not_hf": reasons, "nearest": nearest(reasons),
              "tokenizer": tokenizer_note, "max_logit_diff": None, "step": run["step"]}
    if arch is not None:
        _write(out, model, run, arch, tokenizer)
        report["format"] = arch.hf_class
        if verify and (diff := max_logit_diff(out, model)) is not None:
            report["max_logit_diff"] = diff
            if not diff <= TOLERANCE:
                why = {arch.hf_class: [f"its logits differ from normtrain's by {diff:.3g}"]}
                report.update(format="normtrain", why_not_hf=why, nearest=nearest(why))
                arch = None
    if arch is None:
        _write(out, model, run, None, tokenizer)
    return report


def _write(out: Path, model: GPT, run: dict[str, Any], arch: Architecture | None, tokenizer: dict[str, bytes]):
    from safetensors.torch import save

    # each tensor once (a tied head is the embedding's), unless the class writes the tied head as a matrix of its
    # own (Gemma, whose stored table is ours / √d)
    source = model.unique_state_dict() if arch is None or arch.tied(model.cfg) else model.state_dict()
    state = {k: v.detach().cpu().contiguous() for k, v in source.items()}
    files = {WEIGHTS: save(arch.to_hf(state, model.cfg) if arch else state, metadata={"format": "pt"}), **tokenizer}
    if arch is not None:
        files[HF_CONFIG] = _json(arch.config(model.cfg, eot_id(run["corpus"])))
    files[RECORD] = _json({"format": "normtrain-export", "version": 1, "weights": arch.name if arch else "normtrain",
                           "model": asdict(model.cfg), "tokenizer": run["corpus"].get("tokenizer"),
                           "run": {k: run[k] for k in ("run_dir", "step", "status")}, "config": run["config"]})
    for name, data in files.items():
        atomic_write(out / name, lambda f, d=data: f.write(d))
    for stale in set(FILES) - set(files):  # from an earlier export of another format
        (out / stale).unlink(missing_ok=True)


@torch.no_grad()
def max_logit_diff(out: Path, model: GPT) -> float | None:
    """max |logits of transformers' from_pretrained(out) − ours| on random tokens; None without transformers."""
    try:
        import transformers
    except ImportError:
        return None
    logging = transformers.utils.logging
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()  # its notes on loading are about its own checkpoints, not ours
    logging.disable_progress_bar()
    try:
        hf = transformers.AutoModelForCausalLM.from_pretrained(str(out)).eval()
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
    tokens = torch.randint(0, model.cfg.vocab_size, (2, min(model.cfg.seq_len, 64)),
                           generator=torch.Generator().manual_seed(0))
    return (hf(tokens).logits.float() - model(tokens)[0].float()).abs().max().item()


def _out_dir(out: Path) -> Path:
    if out.is_file():
        raise DataError(f"OUT_DIR {out} is a file; give a new or empty folder, or an earlier export")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in FILES and not p.name.endswith(".tmp"))
        if foreign:
            raise DataError(f"OUT_DIR {out} holds files normtrain-export did not write ({', '.join(foreign[:5])}); "
                            "give a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2) + "\n").encode()

