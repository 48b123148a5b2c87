"""The normtrain-export command line: RUN_DIR OUT_DIR, a report of what was written and how it was checked."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="normtrain-export",
        description="Write a run's final weights as a Hugging Face checkpoint (model.safetensors, config.json, "
                    "the tokenizer) when the model is exactly a LlamaForCausalLM (Pre-LN, RMSNorm, SwiGLU, RoPE), "
                    "GPT2LMHeadModel (Pre-LN, LayerNorm, GELU, learned positions), Qwen3ForCausalLM (Llama's with "
                    "per-head QK-norm), Olmo2ForCausalLM (reordered norm, full QK-norm) or Gemma2ForCausalLM / "
                    "Gemma3ForCausalLM (Peri-LN, GeGLU; Gemma 3 with per-head QK-norm); in normtrain's own format "
                    "(model.safetensors + normtrain.json, read by normtrain.load) otherwise, naming the nearest "
                    "class and how the model differs from it.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (with ckpt.pt or a sharded ckpt.dcp)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="the folder to write (new, empty, or an earlier export)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip loading the export back with transformers to compare logits")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)

    def body() -> None:
        from normtrain.export import export_run

        print(summary(export_run(args.run_dir, args.out_dir, verify=args.verify)))

    from normtrain.commands import run_command

    run_command("normtrain-export", body, checkpoint_advice="The export reads the run's final weights from that "
                "file: export another run folder, or train this run again (its summary.json holds the config) to "
                "write a readable checkpoint")


def summary(report: dict[str, Any]) -> str:
    lines = [f"normtrain-export: wrote {report['out_dir']} (step {report['step']})"]
    if report["format"] == "normtrain":
        cls, differences = report["nearest"]
        one = "the one difference" if len(differences) == 1 else f"{len(differences)} differences"
        lines.append(f"  format     normtrain (model.safetensors + normtrain.json; load with normtrain.load): no "
                     f"transformers class expresses this model; the nearest is {cls}, {one}: "
                     f"{'; '.join(differences)}")
    else:
        check = report["max_logit_diff"]
        verified = ("not checked (transformers is not installed)" if check is None
                    else f"from_pretrained logits match to {check:.2g}")
        lines.append(f"  format     {report['format']} (transformers from_pretrained); {verified}")
    lines.append(f"  tokenizer  {report['tokenizer']}")
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
