"""Tokenizers of the encode step (``normtrain.data.encode``): raw bytes, Hugging Face ``tokenizers`` (trained BPE or a
tokenizer.json), and ``tiktoken`` encodings whose files are already cached.

Every tokenizer turns a batch of documents (their bytes) into one token array each and names the token that
separates documents (``eot``). The byte tokenizer never decodes: a byte-level model's tokens are the bytes on disk,
so a Latin-1 file, or one with ``\\r\\n`` line ends, gives exactly its bytes as tokens (decoding UTF-8 with
replacement would turn every stray Latin-1 byte into the 3 bytes of U+FFFD). The others decode UTF-8, replacing
what is not.
``tokenizers`` and ``tiktoken`` are imported only when such a tokenizer is asked for.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from normtrain.util.errors import DataError, first_line

# Text files hold no NUL (a file with one in its first 8 KB is skipped as binary), so NUL is an
# unambiguous end-of-document token, where b"\n\n" would look like any blank line in the code.
SEPARATOR = b"\0"

EOT_TEXT = "<|endoftext|>"
# Special tokens that end a document in common tokenizer.json files, the first one found is the separator.
EOT_CANDIDATES = (EOT_TEXT, "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "[SEP]", "<|im_end|>")
SPECS = "bytes, bpe, PATH/tokenizer.json (or a folder holding one) or tiktoken:NAME (e.g. tiktoken:gpt2)"


def workers() -> int:
    """The cores this process may use: the tokenizers' own threads run on all of them."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Tokenizer:
    """What the shards need of a tokenizer: documents -> token arrays, the vocabulary, the separator."""

    kind: str  # bytes | bpe | file | tiktoken
    name: str
    vocab_size: int
    eot: int  # the token between two documents
    sha256: str | None = None  # of its tokenizer.json, when it has one

    def encode_batch(self, docs: list[bytes]) -> list[np.ndarray]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "vocab_size": self.vocab_size, "eot": self.eot,
                "sha256": self.sha256}


class ByteTokenizer(Tokenizer):
    """Vocabulary 256: a document's tokens are its bytes; NUL separates documents."""

    kind, name, vocab_size, eot = "bytes", "bytes", 256, SEPARATOR[0]

    def encode_batch(self, docs: list[bytes]) -> list[np.ndarray]:
        return [np.frombuffer(doc, dtype=np.uint8) for doc in docs]


class HFTokenizer(Tokenizer):
    """A ``tokenizers.Tokenizer`` (a BPE trained here, or any tokenizer.json); batches encode on all cores."""

    def __init__(self, tokenizer, kind: str, name: str):
        self.tokenizer, self.kind, self.name = tokenizer, kind, name
        self.json = tokenizer.to_str()
        self.sha256 = hashlib.sha256(self.json.encode()).hexdigest()
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self.eot = _find_eot(tokenizer, name)

    def encode_batch(self, docs: list[bytes]) -> list[np.ndarray]:
        texts = [doc.decode("utf-8", errors="replace") for doc in docs]
        return [np.asarray(e.ids, dtype=np.int64) for e in self.tokenizer.encode_batch_fast(texts,
                                                                                          add_special_tokens=False)]


class TiktokenTokenizer(Tokenizer):
    """A tiktoken encoding; its end-of-text token separates documents."""

    kind = "tiktoken"

    def __init__(self, encoding):
        self.encoding, self.name = encoding, encoding.name
        self.vocab_size, self.eot = encoding.n_vocab, encoding.eot_token  # (tiktoken checks its files' hashes)

    def encode_batch(self, docs: list[bytes]) -> list[np.ndarray]:
        texts = [doc.decode("utf-8", errors="replace") for doc in docs]
        return [np.asarray(ids, dtype=np.int64)
                for ids in self.encoding.encode_ordinary_batch(texts, num_threads=workers())]


def load_tokenizer(spec: str) -> Tokenizer:
    """The tokenizer ``spec`` names, except ``bpe`` (that one is trained on the data: :func:`train_bpe`)."""
    if spec == "bytes":
        return ByteTokenizer()
    if spec.startswith("tiktoken:"):
        return TiktokenTokenizer(tiktoken_encoding(spec.partition(":")[2]))
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if path.is_file():
        return HFTokenizer(_from_json(path), "file", str(path))
    raise DataError(f"--tokenizer {spec!r}: not a known tokenizer and no such file; give {SPECS}")


def train_bpe(texts: Iterable[str], vocab_size: int) -> HFTokenizer:
    """A byte-level BPE (GPT-2's scheme: every byte is a token, so no text is unknown) with ``vocab_size``
    tokens, one of them the end-of-text token (id 0)."""
    tk = _tokenizers()
    minimum = 256 + 1
    if vocab_size < minimum:
        raise DataError(f"--vocab-size {vocab_size}: a byte-level BPE needs at least {minimum} tokens "
                        "(256 bytes and the end-of-text token)")
    tokenizer = tk.Tokenizer(tk.models.BPE())
    tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT_TEXT], show_progress=False,
                                     initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return HFTokenizer(tokenizer, "bpe", f"bpe-{vocab_size}")


def tiktoken_encoding(name: str):
    """A tiktoken encoding, only from files already in tiktoken's cache: a download here would hang or fail
    deep inside tiktoken on a machine without network, so it is refused with what to do instead."""
    try:
        import tiktoken
        import tiktoken.load
    except ImportError:
        raise DataError("--tokenizer tiktoken:... needs the tiktoken package: pip install 'normtrain[tiktoken]'") \
            from None
    if name not in tiktoken.list_encoding_names():
        raise DataError(f"--tokenizer tiktoken:{name}: no such encoding; known: "
                        f"{', '.join(tiktoken.list_encoding_names())}")
    real_read = tiktoken.load.read_file

    def cached_only(blobpath: str) -> bytes:
        if "://" not in blobpath:
            return real_read(blobpath)
        cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or "$TMPDIR/data-gym-cache"
        raise DataError(
            f"the files of the tiktoken encoding {name!r} are not in tiktoken's cache ({cache}). On a machine "
            f"with network, run: python -c \"import tiktoken; tiktoken.get_encoding('{name}')\" with "
            f"TIKTOKEN_CACHE_DIR set to a folder you then copy here and point TIKTOKEN_CACHE_DIR at; or use "
            f"--tokenizer bpe or a tokenizer.json")

    tiktoken.load.read_file = cached_only
    try:
        return tiktoken.get_encoding(name)
    finally:
        tiktoken.load.read_file = real_read


def _find_eot(tokenizer, name: str) -> int:
    for text in EOT_CANDIDATES:
        if (token := tokenizer.token_to_id(text)) is not None:
            return token
    special = [t for t in tokenizer.get_added_tokens_decoder().values() if t.special]
    if special:
        return tokenizer.token_to_id(special[0].content)
    raise DataError(f"the tokenizer {name} has no end-of-text token (none of {', '.join(EOT_CANDIDATES)}, and no "
                    "special token): documents need one to be separated; add one to its tokenizer.json")


def _from_json(path: Path):
    tokenizers = _tokenizers()
    try:
        return tokenizers.Tokenizer.from_str(path.read_text(encoding="utf-8"))
    except Exception as err:  # tokenizers raises a bare Exception for a file it cannot parse
        raise DataError(f"{path} is not a tokenizer.json that the tokenizers library can read "
                        f"({first_line(err)})") from None


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise DataError("this tokenizer needs the 'tokenizers' package: pip install 'tokenizers<1.0'") from None
    return tokenizers
