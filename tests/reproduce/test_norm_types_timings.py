"""norm_types' timings: stamped with when and at which code they were measured, and reused by a rerun."""

from __future__ import annotations

from normtrain.reproduce.norm_types import STAMP, saved_timings, timing_note
from normtrain.reproduce.writeup import write_csv

STAMPED = {"device": "cpu", "measured_at": "2026-11-27T14:25:00+00:00", "code_commit": "f574d06f" * 5,
           "code_dirty": False}


def timing(norm: str, ms: float, **stamp) -> dict:
    return {"norm": norm, "timing": "training step", "implementation": "x", "repeat": "0", "time_ms": ms, **stamp}


def test_a_rerun_reads_back_the_timings_it_wrote(tmp_path):
    path = tmp_path / "timings.csv"
    rows = [timing("layernorm", 272.5, **STAMPED), timing("rmsnorm", 280.125, **STAMPED)]
    write_csv(rows, path)
    again = saved_timings(path, "cpu")
    assert [t["time_ms"] for t in again] == [272.5, 280.125]  # numbers again, not text
    assert all(t[k] for t in again for k in STAMP)
    assert timing_note(again) == ["Timings measured at 2026-11-27T14:25:00+00:00 on cpu, code `f574d06ff5` "
                                  "(timings.csv); a rerun reuses them, `--fresh` times again."]
    assert saved_timings(path, "cuda") == []  # another kind of device times again


def test_unstamped_or_missing_timings_are_measured_again(tmp_path):
    path = tmp_path / "timings.csv"
    assert saved_timings(path, "cpu") == []
    write_csv([timing("layernorm", 272.5)], path)  # written before the stamp existed
    assert saved_timings(path, "cpu") == []
    write_csv([timing("layernorm", 272.5, **{**STAMPED, "code_commit": None})], path)  # not a git checkout
    assert saved_timings(path, "cpu") == []
    assert timing_note([timing("layernorm", 1.0)]) == []
    dirty = timing_note([timing("layernorm", 1.0, **{**STAMPED, "code_dirty": True})])
    assert "a dirty tree" in dirty[0]
