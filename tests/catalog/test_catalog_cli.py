"""normtrain-catalog end to end: text for a terminal (wrapped, filtered by kind), Markdown tables whose rows keep
their five cells, ``--update`` of a Markdown file's block, exit 2 for bad input, and no torch or Hydra on import."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata

import pytest

from normtrain.catalog import CHOICES, KINDS, markdown
from normtrain.catalog.cli import main
from normtrain.catalog.render import BEGIN, END


def run(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def test_text_lists_every_choice_wrapped_to_the_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run([], capsys)
    assert code == 0
    assert all(f"{c.name}: {c.select}" in out for c in CHOICES)
    assert all(title.upper() in out for title in KINDS.values())
    assert max(len(line) for line in out.splitlines()) <= 79
    assert "Zhang & Sennrich 2019" in out and "used by" in out


def test_kind_keeps_only_those_kinds(capsys):
    code, out, _ = run(["--kind", "placement", "--kind", "qk"], capsys)
    assert code == 0
    assert "PLACEMENTS" in out and "QK-NORM FORMS" in out and "NORM TYPES" not in out and "OPTIMIZERS" not in out
    assert "placement=deepnorm" in out and "model.qk_norm=full" in out and "norm=rmsnorm" not in out


def test_kind_init_lists_every_init_scheme_with_its_paper(capsys):
    from normtrain.model.init import INIT_SCHEMES

    code, out, _ = run(["--kind", "init"], capsys)
    assert code == 0 and out.startswith("INITIALIZATION SCHEMES")
    assert all(f"model.init={name}" in out for name in INIT_SCHEMES)
    assert "Radford et al. 2019" in out and "Groeneveld et al. 2024" in out and "Nguyen & Salazar 2019" in out
    assert "norm=rmsnorm" not in out and "model.tie_embeddings=true" not in out


def test_markdown_has_one_row_per_choice_of_five_cells(capsys):
    code, out, _ = run(["--markdown"], capsys)
    assert code == 0 and out == markdown()
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert len(rows) == len(CHOICES)
    for row in rows:  # a | inside a cell (nGPT's |α|) is escaped, so every row splits into exactly five cells
        assert len(re.split(r"(?<!\\)\|", row)) == 7, row
    code, out, _ = run(["--markdown", "--kind", "logit"], capsys)
    assert out.startswith("**Logit controls**") and "norm=layernorm" not in out


def test_update_rewrites_only_the_block_and_is_idempotent(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\nbefore\n\n{BEGIN}\nstale table\n{END}\n\nafter\n", encoding="utf-8")
    code, out, _ = run(["--update", str(doc)], capsys)
    text = doc.read_text(encoding="utf-8")
    assert code == 0 and "updated" in out
    assert text.startswith("# Title\n\nbefore\n\n") and text.endswith(f"{END}\n\nafter\n")
    assert "stale table" not in text and markdown() in text
    code, out, _ = run(["--update", str(doc)], capsys)
    assert code == 0 and "already up to date" in out and doc.read_text(encoding="utf-8") == text


def test_bad_input_exits_2_with_a_message(tmp_path, capsys):
    plain = tmp_path / "plain.md"
    plain.write_text("no markers here\n", encoding="utf-8")
    code, _, err = run(["--update", str(plain)], capsys)
    assert code == 2 and "no catalog block" in err and "normtrain-catalog:begin" in err
    assert plain.read_text(encoding="utf-8") == "no markers here\n"
    code, _, err = run(["--update", str(tmp_path / "missing.md")], capsys)
    assert code == 2 and "cannot update" in err
    code, _, err = run(["--update", str(plain), "--kind", "norm"], capsys)
    assert code == 2 and "--update" in err
    code, _, err = run(["--kind", "nonsense"], capsys)
    assert code == 2 and "invalid choice" in err


def test_module_and_console_script_without_torch_or_hydra():
    scripts = {e.name: e.value for e in metadata.entry_points(group="console_scripts")}
    assert scripts.get("normtrain-catalog") == "normtrain.catalog.cli:main"
    probe = ("import runpy, sys; sys.argv = ['normtrain-catalog', '--kind', 'other']\n"
             "try:\n    runpy.run_module('normtrain.catalog', run_name='__main__')\n"
             "except SystemExit as e:\n    assert e.code == 0, e.code\n"
             "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'hydra', 'omegaconf', 'wandb', "
             "'datasets'})\nprint('heavy:', heavy)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "model.emb_proj=true" in out and out.rstrip().endswith("heavy: []")
