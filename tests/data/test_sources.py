"""Which files a corpus is made of: the stdlib filter and the file / folder / glob forms of local_text."""

from pathlib import PurePosixPath

import pytest

from normtrain.data import sources
from normtrain.util.errors import DataError


def _tree(root, files: dict[str, bytes]):
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _rels(source):
    return [rel for rel, _ in source.files]


def test_stdlib_is_the_library_without_tests_idle_or_site_packages():
    src = sources.python_stdlib()
    rels = _rels(src)
    assert {"os.py", "json/__init__.py", "collections/__init__.py"} <= set(rels)
    assert all(rel.endswith(".py") for rel in rels)
    for rel in rels:
        assert not sources.STDLIB_SKIP & set(PurePosixPath(rel).parts[:-1]), rel
    assert not any(rel.startswith("lib2to3/tests") for rel in rels)
    assert rels == sorted(rels)
    assert sum(len(open(path, "rb").read()) for _, path in src.files) > 1_000_000


def test_file_dir_and_recursive_glob(tmp_path):
    root = _tree(tmp_path / "c", {
        "a.txt": b"alpha", "notes/b.md": b"beta", "notes/deep/c.md": b"gamma", "d.txt": b"delta",
        ".git/config": b"[core]", "notes/.hidden.md": b"secret",  # hidden: skipped, as a glob does
        "blob.bin": b"\x89PNG\0\0data", "empty.txt": b"",  # binary and empty: skipped
    })
    assert _rels(sources.local_text(str(root / "a.txt"))) == ["a.txt"]
    assert _rels(sources.local_text(str(root))) == ["a.txt", "d.txt", "notes/b.md", "notes/deep/c.md"]
    assert _rels(sources.local_text(str(root / "**/*.md"))) == ["notes/b.md", "notes/deep/c.md"]
    assert _rels(sources.local_text(str(root / "*.txt"))) == ["a.txt", "d.txt"]
    # A file whose name looks like a glob is still that file.
    (root / "odd[1].txt").write_bytes(b"odd")
    assert _rels(sources.local_text(str(root / "odd[1].txt"))) == ["odd[1].txt"]


def test_relative_path(tmp_path, monkeypatch):
    _tree(tmp_path, {"texts/a.txt": b"alpha"})
    monkeypatch.chdir(tmp_path)
    src = sources.local_text("texts")
    assert _rels(src) == ["a.txt"] and src.root == str(tmp_path / "texts")


@pytest.mark.parametrize("path, says", [
    ("nowhere/at/all.txt", "does not exist"),
    ("nowhere/**/*.txt", "matches no file"),
])
def test_missing_path_or_empty_glob_names_the_path_and_what_is_allowed(tmp_path, path, says):
    with pytest.raises(DataError) as err:
        sources.local_text(str(tmp_path / path))
    assert path in str(err.value) and says in str(err.value)
    assert "a file, a folder" in str(err.value) and "glob" in str(err.value)


def test_folder_without_text_is_an_error(tmp_path):
    _tree(tmp_path, {"x.bin": b"\0\1\2", "empty.txt": b"", ".hidden/a.txt": b"hidden"})
    with pytest.raises(DataError, match="no non-empty text file"):
        sources.local_text(str(tmp_path))
    (tmp_path / "void").mkdir()
    with pytest.raises(DataError, match=r"'.*void' is a folder that holds no file; give a file, a folder"):
        sources.local_text(str(tmp_path / "void"))
