"""No module of the package over 400 lines and no function over 60 (STYLE.md: a module is read whole, a function
fits a screen); counted with ``ast``, so the limits stay true as the code grows."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "normtrain"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60  # from ``def`` (decorators not counted) through the last line of the body


def too_long(root: Path) -> list[str]:
    """``path: N lines`` for each module over the limit, ``path:line name(): N lines`` for each function."""
    found = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        where = path.relative_to(root.parent)
        if (n := len(source.splitlines())) > MAX_MODULE_LINES:
            found.append(f"{where}: {n} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{where}:{node.lineno} {node.name}(): {length} lines (at most {MAX_FUNCTION_LINES})")
    return found


def test_no_module_or_function_of_normtrain_is_too_long():
    found = too_long(PACKAGE)
    assert not found, "split these:\n" + "\n".join(found)


def test_the_check_sees_a_long_module_and_a_long_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # def + 60 lines = 61
    (package / "long_function.py").write_text(f"def f():\n{body}\n\n\ndef g():\n    pass\n")
    (package / "long_module.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (package / "fine.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert too_long(package) == ["pkg/long_function.py:1 f(): 61 lines (at most 60)",
                                 "pkg/long_module.py: 401 lines (at most 400)"]
