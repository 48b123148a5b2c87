"""The interactive report in a real browser (headless Chromium driven by Playwright): every figure draws, with
no console error or warning and no request leaving the file, also after switching every log scale; a
screenshot is saved. CI installs Debian's chromium (.ci/run); elsewhere the test skips, saying what is missing,
unless NORMTRAIN_REQUIRE_BROWSER=1 (set by .ci/run when the install worked), which turns the skip into a failure."""

from __future__ import annotations

import os
import runpy
import shutil
from pathlib import Path

import pytest
from synthetic_runs import write_sweep

from normtrain.compare import compare

ROOT = Path(__file__).resolve().parents[2]
browser = runpy.run_path(str(ROOT / "scripts" / "report_in_browser.py"), run_name="report_in_browser")


def require_browser() -> None:
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install playwright; no `playwright install` needed)")
    if browser["find_chromium"]() is None:
        missing.append("Chromium (apt-get install chromium)")
    if missing:
        if os.environ.get("NORMTRAIN_REQUIRE_BROWSER") == "1":
            pytest.fail(f"NORMTRAIN_REQUIRE_BROWSER=1 but missing: {'; '.join(missing)}")
        pytest.skip(f"no browser test: missing {'; '.join(missing)}")


def check(report: Path, screenshot: Path, **kwargs) -> dict:
    result = browser["check"](report, screenshot, **kwargs)
    assert browser["ok"](result), result
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if folder := os.environ.get("NORMTRAIN_SCREENSHOTS"):  # keep them, e.g. as CI artifacts
        shutil.copy(screenshot, Path(folder) / screenshot.name)
    return result


@pytest.mark.slow
def test_a_fresh_report_draws_every_figure(tmp_path):
    require_browser()
    sweep = tmp_path / "sweep"
    write_sweep(sweep)
    result = compare([str(sweep)], out=tmp_path / "cmp")
    report = tmp_path / "cmp" / "report.html"
    drawn = check(report, tmp_path / "report.png", full_page=True, toggle=True)
    assert len(drawn["figures"]) >= 20 and drawn["table_rows"] == len(result.runs) == 12


@pytest.mark.slow
def test_the_committed_example_draws(tmp_path):
    require_browser()
    drawn = check(ROOT / "experiments" / "compare_example" / "report.html", tmp_path / "compare_example.png")
    assert drawn["table_rows"] == 27 and all(f["state"] == "drawn" for f in drawn["figures"])
