"""Protocol v5's provenance for a reproduction: runs of different training code, or of uncommitted code, are
refused with a message that says what to do (exit 2 at the command, nothing deleted); the result records a digest
of the analysis code (the experiment, the engine, outcome.py) and the commits that changed it after the runs."""

from pathlib import Path

import pytest

from normtrain.reproduce.cli import ReproduceError, runs_provenance
from normtrain.reproduce.records import analysis_changed_after, code_provenance
from normtrain.study.preregistration import analysis_files, declaration


def rows(*digests, dirty=False):
    return [{"status": "completed", "optim.lr": "1e-3", "train.seed": str(i), "training_code_digest": d,
             "code_commit": "c0", "code_dirty": dirty} for i, d in enumerate(digests)]


def test_runs_of_different_training_code_are_refused_and_nothing_is_deleted(tmp_path):
    keep = tmp_path / "runs" / "a" / "summary.json"
    keep.parent.mkdir(parents=True)
    keep.write_text("{}")
    with pytest.raises(ReproduceError, match="different training code: digests aaa \\(2 runs\\), bbb \\(1 runs\\)"):
        runs_provenance(rows("aaa", "aaa", "bbb"), False, tmp_path / "runs")
    with pytest.raises(ReproduceError, match="recorded no training-code digest"):
        runs_provenance(rows("aaa", None), False, tmp_path / "runs")
    assert keep.is_file()
    assert runs_provenance(rows("aaa", "aaa"), False, tmp_path)["training_code_digests"] == {"aaa": 2}


def test_runs_from_uncommitted_code_are_refused_unless_allowed_and_the_record_says_so(tmp_path):
    with pytest.raises(ReproduceError, match="uncommitted changes.*--allow-dirty"):
        runs_provenance(rows("aaa", "aaa", dirty=True), False, tmp_path)
    found = runs_provenance(rows("aaa", "aaa", dirty=True), True, tmp_path)
    assert found["allow_dirty"] is True and found["dirty_runs"] == 2 and found["engine_digest"]


def test_the_analysis_code_covers_the_experiment_the_engine_and_outcome_and_is_recorded_with_its_changes():
    files = analysis_files("xiong_warmup")
    names = {f"{f.parent.name}/{f.name}" for f in files}
    assert {"reproduce/xiong_warmup.py", "study/claim.py", "study/best_lr.py", "study/verdicts.py",
            "training/outcome.py"} <= names and all(Path(f).is_file() for f in files)
    record = declaration(files)
    analysis = {"code_commit": "c0", "code_dirty": False, "analysis_code": record,
                "runs_code": {"training_code_digests": {"aaa": 2}}}
    provenance = code_provenance(rows("aaa", "aaa"), analysis)
    assert provenance["analysis_code"]["digest"] == record["digest"] and provenance["runs_code"]
    analysis_changed_after(provenance, "2000-01-01T00:00:00+00:00")  # runs older than every commit
    changed = provenance["analysis_code"]["changed_after_runs"]
    assert "history" not in provenance["analysis_code"]
    assert len(changed) == len(record["history"])  # every commit of the analysis code came after such a run
