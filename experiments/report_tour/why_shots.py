"""The issue-57 screenshots of this folder: one normtrain-compare report in headless Chromium, as a reader sees it.

    python experiments/report_tour/why_shots.py REPORT.html PREFIX

writes PREFIX_top.png (the first 1400 × 2400 pixels, from Chromium's own ``--headless --screenshot``),
PREFIX_page.png (the whole page, drawn by scripts/report_in_browser.py as the tests draw it; made smaller only
where it would weigh 1.5 MB or more) and PREFIX_map.png (the gradient-norm block × step map as the page opens it).
"""

from __future__ import annotations

import io
import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
browser = runpy.run_path(str(ROOT / "scripts" / "report_in_browser.py"), run_name="report_in_browser")
WIDTH, HEIGHT = 1400, 2400
LIMIT = 1_500_000  # bytes: the most a committed screenshot may weigh


def top(report: Path, path: Path) -> Path:
    """Chromium's own screenshot of the window; the virtual-time budget lets the page unpack Vega and draw."""
    subprocess.run([browser["find_chromium"](), "--headless", *browser["CHROMIUM_FLAGS"], "--hide-scrollbars",
                    f"--screenshot={path}", f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=120000",
                    report.resolve().as_uri()], check=True, capture_output=True, timeout=600)
    return squeezed(path, path.read_bytes(), 1.0)


def squeezed(path: Path, png: bytes, scale: float) -> Path:
    """``png`` at ``scale`` of its size in a 256-colour palette, halved again until it is under ``LIMIT``."""
    from PIL import Image

    from normtrain.util.pngs import palette_png

    image = Image.open(io.BytesIO(png))
    while True:
        shown = image.resize((round(image.width * scale), round(image.height * scale)), Image.LANCZOS)
        buffer = io.BytesIO()
        shown.save(buffer, format="PNG")
        data = palette_png(buffer.getvalue(), method=2)
        if len(data) < LIMIT:
            path.write_bytes(data)
            return path
        scale *= 0.75


def shoot(report: Path, prefix: str) -> list[Path]:
    written = [top(report, Path(f"{prefix}_top.png"))]
    with browser["opened"](report, width=WIDTH, height=HEIGHT) as session:
        page = session.page
        written.append(squeezed(Path(f"{prefix}_page.png"), page.screenshot(full_page=True), 1.0))
        written.append(squeezed(Path(f"{prefix}_map.png"), page.locator("#fig-grad-norm-map").screenshot(), 1.0))
    return written


if __name__ == "__main__":
    for shot in shoot(Path(sys.argv[1]), sys.argv[2]):
        print(shot, shot.stat().st_size)
