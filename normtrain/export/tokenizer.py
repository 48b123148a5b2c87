"""The tokenizer files of an export: what the run was trained with, as a transformers tokenizer.

* token shards with a tokenizer.json (a BPE trained by normtrain-prepare, or one given by path): that file,
  taken from the shard folder and checked against the hash the run recorded;
* byte corpora (and shards of ``--tokenizer bytes``): a tokenizer.json written here whose token i is byte i
  (a byte-level BPE with no merges), so the exported model reads text exactly as it was trained;
* tiktoken: converted with transformers' ``TikTokenConverter`` when transformers (and the encoding's cached
  files) are at hand.
Each comes with a ``tokenizer_config.json`` naming ``PreTrainedTokenizerFast`` (and the end-of-text token).
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from normtrain.data.shards import TOKENIZER


def tokenizer_json(corpus: dict[str, Any]) -> tuple[str | None, str]:
    """(tokenizer.json text or None, a sentence saying where it came from or why there is none)."""
    record = corpus.get("tokenizer") or {"kind": "bytes"}
    kind = record["kind"]
    if kind == "bytes":
        return byte_tokenizer_json(), "byte-level (token i is byte i)"
    if kind == "tiktoken":
        return _from_tiktoken(record["name"])
    path = Path(corpus.get("root", "")) / TOKENIZER
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None, f"not exported: {path} (the run's tokenizer) is not there any more"
    if hashlib.sha256(text.encode()).hexdigest() != record.get("sha256"):
        return None, f"not exported: {path} is not the tokenizer the run was trained with (its sha256 differs)"
    return text, f"{record['name']} from {path}"


def tokenizer_files(corpus: dict[str, Any], seq_len: int) -> tuple[dict[str, bytes], str]:
    """{file name: bytes} of the tokenizer (none when it cannot be had) and a sentence saying where it came from."""
    text, note = tokenizer_json(corpus)
    if text is None:
        return {}, note
    config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": seq_len,
                              "clean_up_tokenization_spaces": False}
    if (eot := eot_id(corpus)) is not None:
        from tokenizers import Tokenizer

        token = Tokenizer.from_str(text).id_to_token(eot)
        config.update(eos_token=token, bos_token=token)
    return {TOKENIZER: text.encode(), "tokenizer_config.json": json.dumps(config, indent=2).encode()}, note


def eot_id(corpus: dict[str, Any]) -> int | None:
    """The id of the token that ends a document, for tokenizers that have one (not bytes: NUL is a byte)."""
    record = corpus.get("tokenizer") or {"kind": "bytes"}
    return None if record["kind"] == "bytes" else record.get("eot")


def byte_tokenizer_json() -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = _bytes_to_unicode()
    tokenizer = Tokenizer(models.BPE(vocab={alphabet[b]: b for b in range(256)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer.to_str()


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: byte b -> the printable character that stands for it."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_ins = iter(range(256, 512))  # the other bytes, in order, take the characters from 256 on
    return {b: chr(b) if b in keep else chr(next(stand_ins)) for b in range(256)}


def _from_tiktoken(name: str) -> tuple[str | None, str]:
    try:
        from transformers.convert_slow_tokenizer import TikTokenConverter
    except ImportError:
        return None, f"not exported: converting tiktoken:{name} needs transformers and tiktoken installed"
    from normtrain.data.tokenizer import tiktoken_encoding
    from normtrain.util.errors import DataError

    try:
        encoding = tiktoken_encoding(name)
    except DataError as err:
        return None, f"not exported: {err}"
    with tempfile.TemporaryDirectory() as tmp:
        ranks = Path(tmp) / "ranks.tiktoken"  # tiktoken's format, "<base64 token> <rank>" (its writer needs blobfile)
        ranked = sorted(encoding._mergeable_ranks.items(), key=lambda item: item[1])
        ranks.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranked))
        tokenizer = TikTokenConverter(vocab_file=str(ranks), pattern=encoding._pat_str,
                                      extra_special_tokens=encoding._special_tokens).converted()
    return tokenizer.to_str(), f"tiktoken:{name}, converted"
