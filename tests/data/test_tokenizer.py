"""Tokenizers of normtrain-prepare: bytes, a trained byte-level BPE, a tokenizer.json by path, tiktoken."""

import json
import sys

import pytest

from normtrain.data.tokenizer import ByteTokenizer, load_tokenizer, tiktoken_encoding, train_bpe
from normtrain.util.errors import DataError

TEXTS = ["def f(x):\n    return x + 1\n", "héllo wörld ✓ " * 20, "class A:\n    pass\n" * 30]


def test_bytes_are_the_raw_bytes_never_decoded():
    latin1 = "café\r\n".encode("latin-1")  # not UTF-8: decoding would turn é into 3 bytes of U+FFFD
    (tokens,) = ByteTokenizer().encode_batch([latin1])
    assert tokens.tolist() == list(latin1) and ByteTokenizer().eot == 0


def test_trained_bpe_is_byte_level_deterministic_and_round_trips():
    a, b = train_bpe(TEXTS, 300), train_bpe(TEXTS, 300)
    assert a.sha256 == b.sha256 and a.eot == 0
    assert 257 < a.vocab_size <= 300  # fewer when the text has run out of pairs worth merging
    encoded = a.encode_batch([t.encode() for t in TEXTS])
    assert all(len(e) < len(t.encode()) for e, t in zip(encoded, TEXTS, strict=True))  # merges were learned
    assert [a.tokenizer.decode(e.tolist()) for e in encoded] == TEXTS  # every byte is a token: nothing unknown
    with pytest.raises(DataError, match="at least 257"):
        train_bpe(TEXTS, 200)


def test_a_tokenizer_json_by_path_or_folder(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    wordpiece.train_from_iterator(TEXTS, trainers.WordPieceTrainer(vocab_size=100, special_tokens=["[UNK]", "</s>"]))
    wordpiece.save(str(tmp_path / "tokenizer.json"))
    for spec in (str(tmp_path / "tokenizer.json"), str(tmp_path)):
        tok = load_tokenizer(spec)
        assert tok.kind == "file" and tok.eot == wordpiece.token_to_id("</s>")
        assert tok.encode_batch([b"return x"])[0].tolist() == wordpiece.encode("return x").ids

    broken = tmp_path / "broken" / "tokenizer.json"
    broken.parent.mkdir()
    broken.write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(DataError, match="not a tokenizer.json"):
        load_tokenizer(str(broken))
    with pytest.raises(DataError, match="not a known tokenizer"):
        load_tokenizer(str(tmp_path / "missing.json"))


@pytest.mark.extras("tiktoken")
def test_tiktoken_encoding_adapter(toy_tiktoken):
    tok = load_tokenizer("tiktoken:toy")
    assert (tok.kind, tok.vocab_size, tok.eot) == ("tiktoken", 259, 258)
    (tokens,) = tok.encode_batch([b"return <|endoftext|>"])
    assert tokens[0] == 257 and 258 not in tokens.tolist()  # special text in a document is just text


@pytest.mark.extras("tiktoken")
def test_tiktoken_files_must_already_be_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    with pytest.raises(DataError, match="not in tiktoken's cache") as err:
        tiktoken_encoding("gpt2")
    assert "tiktoken.get_encoding('gpt2')" in str(err.value)
    with pytest.raises(DataError, match="no such encoding"):
        tiktoken_encoding("gpt5000")


def test_tiktoken_without_its_extra_says_how_to_install_it(monkeypatch):
    for module in ("tiktoken", "tiktoken.load"):
        monkeypatch.setitem(sys.modules, module, None)  # as on a machine without the extra: import fails
    with pytest.raises(DataError, match=r"needs the tiktoken package: pip install 'normtrain\[tiktoken\]'"):
        tiktoken_encoding("gpt2")
