"""Open a normtrain-compare report in headless Chromium: does every figure draw, with no console error or warning
and no request leaving the file? Optionally saves a screenshot.

    python scripts/report_in_browser.py cmp/report.html --screenshot cmp/report.png [--full-page]

Uses Debian's Chromium (``apt-get install chromium``; ``--chromium PATH`` for another build) driven by
Playwright (``pip install playwright``; no ``playwright install``: the browser is the system's). Prints a JSON
summary and exits 0 when every figure was drawn cleanly, 1 otherwise, 2 when no browser can be started.

The tests also read what a reader sees through ``opened`` (a loaded report) and the probes below it: the tooltip
at a data point (``tooltip``), how tall the lines of some groups are drawn in a chart (``line_extent``), how much of
its colour ramp a heatmap panel uses (``panel_lightness``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]
CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "chromium", "chromium-browser")
WAIT_S = 120  # a 2-core CI machine draws a few dozen figures in well under a minute
ALL_DRAWN = "Array.from(document.querySelectorAll('figure.figure')).every(f => f.dataset.state === 'drawn')"


def find_chromium(path: str | None = None) -> str | None:
    for candidate in ([path] if path else CANDIDATES):
        found = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if found:
            return found
    return None


@dataclass
class Session:
    """A report open in the browser, and what it said while it was: console messages, page errors, requests to
    anything but the file itself (refused)."""

    page: Any  # playwright's Page
    console: list[dict] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def route(self, r) -> None:
        if r.request.url.startswith(("file:", "data:", "blob:")):
            r.continue_()
            return
        self.requests.append(r.request.url)
        r.abort()


@contextmanager
def opened(report: Path, chromium: str | None = None, width: int = 1400, height: int = 1800) -> Iterator[Session]:
    """The report loaded in headless Chromium, its figures drawn (or failed: ``document.body.dataset.state``)."""
    from playwright.sync_api import sync_playwright

    executable = find_chromium(chromium)
    if executable is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="normtrain-chromium-") as profile, sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": width, "height": height})
        try:
            session = Session(browser.new_page())
            session.page.on("console", lambda m: session.console.append({"type": m.type, "text": m.text}))
            session.page.on("pageerror", lambda e: session.page_errors.append(str(e)))
            session.page.route("**/*", session.route)
            session.page.goto(report.resolve().as_uri())
            session.page.wait_for_function("['done', 'failed'].includes(document.body.dataset.state)",
                                           timeout=WAIT_S * 1000)
            yield session
        finally:
            browser.close()


def check(report: Path, screenshot: Path | None = None, full_page: bool = False, chromium: str | None = None,
          width: int = 1400, height: int = 1800, toggle: bool = False) -> dict:
    """What the page did: its final state, each figure's state and canvas size, console errors, page errors,
    requests to anything but the file itself. ``toggle``: also switch every figure's log scale (and back), which
    draws each figure again with the other scale type."""
    from normtrain.util.pngs import palette_png

    with opened(report, chromium, width, height) as session:
        page = session.page
        figures = page.evaluate("""() => Array.from(document.querySelectorAll('figure.figure')).map(f => {
            const c = f.querySelector('canvas');
            return {id: f.id, state: f.dataset.state, width: c ? c.width : 0, height: c ? c.height : 0};
        })""")
        if toggle:
            for _ in range(2):
                page.evaluate("() => document.querySelectorAll('input.log').forEach(box => box.click())")
                page.wait_for_function(ALL_DRAWN, timeout=WAIT_S * 1000)
        rows = page.evaluate("() => document.querySelectorAll('table.runs tbody tr').length")
        state = page.evaluate("() => document.body.dataset.state")
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(palette_png(page.screenshot(full_page=full_page), method=2))  # 1/4 the size
    console = session.console
    errors = [m["text"] for m in console if m["type"] == "error"]
    return {"state": state, "figures": figures, "table_rows": rows, "console_errors": errors,
            "warnings": [m["text"] for m in console if m["type"] == "warning"], "page_errors": session.page_errors,
            "requests": session.requests, "chromium": find_chromium(chromium)}


def ok(result: dict) -> bool:
    drawn = all(f["state"] == "drawn" and f["width"] > 0 and f["height"] > 0 for f in result["figures"])
    return (result["state"] == "done" and drawn and not result["console_errors"] and not result["page_errors"]
            and not result["requests"] and not result["warnings"])  # Vega warns of empty data, bad log domains


# The probes below read a figure's Vega view (report.js keeps it on the figure's element as ``view``).
SCENE = """(node, visit, panel = null) => {  // every scenegraph item under node, with the heatmap panel it is in
    const walk = (n, p) => {
        const m = /^concat_(\\d+)_group$/.exec(n.name || ""); if (m) p = Number(m[1]);
        for (const item of n.items || []) { visit(n, item, p); walk(item, p); }
    };
    walk(node, panel);
}"""


def tooltip(page, figure: str, step: float, value: float) -> dict[str, str]:
    """The tooltip shown with the pointer at (``step``, ``value``) of line chart ``figure`` (its element's id):
    {line title: text}; {} when none shows."""
    page.locator(f"#{figure}").scroll_into_view_if_needed()
    x, y = page.evaluate("""([id, step, value]) => {
        const box = document.getElementById(id), view = box.view;
        const rect = box.querySelector('canvas').getBoundingClientRect();
        const [ox, oy] = view.origin(), pad = view.padding();  // the plot's corner: past the padding and the axes
        return [rect.left + pad.left + ox + view.scale('x')(step), rect.top + pad.top + oy + view.scale('y')(value)];
    }""", [figure, step, value])
    page.mouse.move(x + 40, y + 40)  # in, then onto the point: the hover layer reacts to pointerover
    page.mouse.move(x, y, steps=4)
    page.wait_for_timeout(250)
    return page.evaluate("""() => {
        const tip = document.getElementById('vg-tooltip-element');
        if (!tip || !tip.classList.contains('visible')) return {};
        return Object.fromEntries(Array.from(tip.querySelectorAll('tr')).map(
            tr => [tr.querySelector('.key').textContent, tr.querySelector('.value').textContent]));
    }""")


def line_extent(page, figure: str, groups: list[str]) -> float:
    """How much of line chart ``figure``'s plot height the visible lines of ``groups`` span (from the highest point
    of any to the lowest of any), as a share of the height: near 1 fills the plot, near 0 a sliver."""
    return page.evaluate(f"""([id, groups]) => {{
        const view = document.getElementById(id).view, ys = [];
        ({SCENE})(view.scenegraph().root, (mark, item) => {{
            if (mark.marktype !== 'line' || !item.datum || !groups.includes(item.datum.g)) return;
            if ((item.opacity ?? 1) > 0 && (item.strokeOpacity ?? 1) > 0 && isFinite(item.y)) ys.push(item.y);
        }});
        return ys.length ? (Math.max(...ys) - Math.min(...ys)) / view.height() : 0;
    }}""", [figure, groups])


def panel_lightness(page, figure: str) -> list[float]:
    """Per panel of heatmap ``figure`` (in the page's group order), how far apart its lightest and darkest cells
    are (relative luminance, 0 to 1): a panel of one flat colour is near 0, one that uses all of viridis near 0.85."""
    return page.evaluate(f"""(id) => {{
        const view = document.getElementById(id).view, span = {{}};
        ({SCENE})(view.scenegraph().root, (mark, item, panel) => {{
            if (!/^concat_\\d+_marks$/.test(mark.name || "") || typeof item.fill !== 'string') return;  // the cells
            const c = item.fill;  // "#440154", or "rgb(68, 1, 84)" between the scheme's stops
            const [r, g, b] = c.startsWith('#') ? [1, 3, 5].map(i => parseInt(c.slice(i, i + 2), 16))
                                                : c.match(/[\\d.]+/g).slice(0, 3).map(Number);
            const lum = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
            span[panel] = [Math.min(lum, span[panel]?.[0] ?? 1), Math.max(lum, span[panel]?.[1] ?? 0)];
        }});
        return Object.keys(span).sort((a, b) => a - b).map(p => span[p][1] - span[p][0]);
    }}""", figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--screenshot", type=Path)
    parser.add_argument("--full-page", action="store_true", help="the whole page, not only the first screen")
    parser.add_argument("--chromium", help="the browser's executable (default: Debian's /usr/bin/chromium)")
    parser.add_argument("--height", type=int, default=1800, help="viewport height in pixels (width 1400)")
    parser.add_argument("--toggle", action="store_true", help="also switch every log scale, and back")
    args = parser.parse_args(argv)
    try:
        result = check(args.report, args.screenshot, args.full_page, args.chromium, height=args.height,
                       toggle=args.toggle)
    except (FileNotFoundError, ImportError) as err:
        print(f"report_in_browser: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1))
    return 0 if ok(result) else 1


if __name__ == "__main__":
    sys.exit(main())
