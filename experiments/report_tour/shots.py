"""The screenshots of this folder: a normtrain-compare report in headless Chromium, as a reader sees it.

    python experiments/report_tour/shots.py REPORT.html PREFIX

writes PREFIX_top.png (the page's first 2000 pixels: the table, the loss, the first heatmap),
PREFIX_tooltip.png (the loss chart with the pointer on a line: its tooltip) and, when the report holds probe
figures, PREFIX_probe.png (the probe section's first figure and the list above it). It drives the browser through
scripts/report_in_browser.py (Debian's chromium and Playwright), so the page is drawn as the tests draw it.
"""

from __future__ import annotations

import json
import re
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
browser = runpy.run_path(str(ROOT / "scripts" / "report_in_browser.py"), run_name="report_in_browser")


def low_point(report: Path) -> tuple[float, float]:
    """(step, value) of the lowest training loss of the report's own data: a point on a line, below the unigram
    line (whose own tooltip would answer a pointer on it)."""
    data = json.loads(re.search(r'id="normtrain-data">(.*?)</script>', report.read_text(), re.S)[1])
    points = [(v, s) for r in data["datasets"]["loss:groups"] if r.get("k") == "train"
              for s, v in zip(r["step"], r["mean"], strict=True) if v is not None]
    value, step = min(points)
    return step, value


def shoot(report: Path, prefix: str) -> list[Path]:
    from normtrain.util.pngs import palette_png

    written = []

    def save(name: str, png: bytes) -> None:
        path = Path(f"{prefix}_{name}.png")
        path.write_bytes(palette_png(png, method=2))
        written.append(path)

    with browser["opened"](report, height=2000) as session:
        page = session.page
        save("top", page.screenshot())
        print("tooltip:", browser["tooltip"](page, "fig-loss", *low_point(report)))
        save("tooltip", page.locator("#fig-loss").screenshot())
        if page.locator("#fig-probe-skip").count():
            page.mouse.move(0, 0)
            box = page.evaluate("""() => {  // from the section's heading to the end of its first figure
                const h2 = Array.from(document.querySelectorAll('h2')).find(h => h.textContent.includes('probed'));
                const top = h2.getBoundingClientRect().top + window.scrollY;
                const fig = document.getElementById('fig-probe-skip');
                const bottom = fig.getBoundingClientRect().bottom + window.scrollY;
                return {x: 0, y: top - 10, width: 1400, height: bottom - top + 20};
            }""")
            save("probe", page.screenshot(full_page=True, clip=box))
    return written


if __name__ == "__main__":
    for path in shoot(Path(sys.argv[1]), sys.argv[2]):
        print(path)
