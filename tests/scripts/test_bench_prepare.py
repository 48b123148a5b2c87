"""scripts/bench_prepare.py: a small run writes its figures for bytes and a BPE."""

import json
import runpy
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_prepare.py"


def test_a_small_run_writes_its_json(text_corpus, tmp_path, monkeypatch, capsys):
    out = tmp_path / "prepare.json"
    monkeypatch.setattr(sys, "argv", ["bench_prepare.py", "--source", str(text_corpus), "--vocab-size", "300",
                                      "--repeats", "1", "--out", str(out)])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    record = json.loads(out.read_text())
    assert set(record["results"]) == {"bytes", "bpe-300"}
    for result in record["results"].values():
        assert result["mb_per_s"] > 0 and result["mb_of_text"] == record["results"]["bytes"]["mb_of_text"]
    assert record["results"]["bpe-300"]["tokens"] < record["results"]["bytes"]["tokens"]
    assert "MB/s" in capsys.readouterr().out
