"""What a file that ``torch.load(weights_only=True)`` refused actually is, in plain words: empty, cut short, a
zip archive torch did not write, pickled code, a safetensors file, text, or unknown bytes.

torch's own message is a paragraph about a changed default, cut wherever a one-line summary ends, and it
suggests loading again with ``weights_only=False``: for a file someone else wrote, that runs whatever code it
holds. The user needs to know what the file is and what to do instead, so the message is built here from the
file's first bytes and the one fact worth keeping from torch's text (which global a pickle asked for).
"""

from __future__ import annotations

import re
import string
import zipfile
from pathlib import Path

PRINTABLE = set(string.printable.encode())
GLOBAL = re.compile(r"GLOBAL ([\w.]+)")  # torch's weights-only unpickler naming the callable a pickle asked for


def what_it_is(path: Path, err: BaseException) -> str:
    """A clause about the file at ``path`` that ``err`` (from torch.load with weights_only) refused to load,
    to follow "it": "is empty (0 bytes) ...", "holds pickled code (posix.system) ...", ..."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError as read_error:
        return f"could not be opened ({read_error.strerror or read_error})"
    code = GLOBAL.search(str(err))
    if size == 0:
        return "is empty (0 bytes): a save or a copy that never wrote anything"
    if code:
        return (f"holds pickled Python objects whose loading would call {code.group(1)}; normtrain loads checkpoints "
                "without running code from them (weights only), so it was not loaded")
    if head.startswith(b"PK"):
        return _zip(path, size)
    if _safetensors(head):
        return ("is a safetensors file (weights alone, as normtrain-export and Hugging Face write them): it holds no "
                "optimizer state, step or data position, and a normtrain checkpoint is written by torch.save")
    if head.startswith(b"\x80"):
        return "is a Python pickle, not the zip archive torch.save writes"
    if head and all(b in PRINTABLE for b in head):
        text = head.decode("ascii").strip().splitlines()[0][:60] if head.strip() else ""
        return f"is a text file (it begins {text!r}), not the zip archive torch.save writes"
    return (f"is not a torch checkpoint: its first bytes ({head[:4].hex(' ')}) begin neither a zip archive, which "
            "torch.save writes, nor a pickle")


def _zip(path: Path, size: int) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return (f"is cut short: a zip archive (torch.save's format) of {size} bytes without the index written at "
                "its end, as a save or a copy that stopped part-way leaves it")
    if not any(name.endswith("/data.pkl") for name in names):
        return f"is a zip archive, but not one torch.save wrote (it holds {', '.join(names[:3]) or 'nothing'})"
    return "is a torch.save archive whose contents are damaged (they do not unpickle)"


def _safetensors(head: bytes) -> bool:
    """safetensors: an 8-byte little-endian header length, then the JSON header."""
    return len(head) > 9 and head[8:10] == b'{"' and int.from_bytes(head[:8], "little") > 0
