"""Open a normtrain-compare report in headless Chromium: does every figure draw, with no console error or warning
and no request leaving the file? Optionally saves a screenshot.

    python scripts/report_in_browser.py cmp/report.html --screenshot cmp/report.png [--full-page]

Uses Debian's Chromium (``apt-get install chromium``; ``--chromium PATH`` for another build) driven by
Playwright (``pip install playwright``; no ``playwright install``: the browser is the system's). Prints a JSON
summary and exits 0 when every figure was drawn cleanly, 1 otherwise, 2 when no browser can be started.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]
CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "chromium", "chromium-browser")
WAIT_S = 120  # a 2-core CI machine draws a few dozen figures in well under a minute


def find_chromium(path: str | None = None) -> str | None:
    for candidate in ([path] if path else CANDIDATES):
        found = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if found:
            return found
    return None


def check(report: Path, screenshot: Path | None = None, full_page: bool = False, chromium: str | None = None,
          width: int = 1400, height: int = 1800, toggle: bool = False) -> dict:
    """What the page did: its final state, each figure's state and canvas size, console errors, page errors,
    requests to anything but the file itself. ``toggle``: also switch every figure's log scale (and back), which
    draws each figure again with the other scale type."""
    from playwright.sync_api import sync_playwright

    from normtrain.util.pngs import palette_png

    executable = find_chromium(chromium)
    if executable is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium)")
    console, page_errors, requests = [], [], []
    with tempfile.TemporaryDirectory(prefix="normtrain-chromium-") as profile, sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": width, "height": height})
        try:
            page = browser.new_page()
            page.on("console", lambda m: console.append({"type": m.type, "text": m.text}))
            page.on("pageerror", lambda e: page_errors.append(str(e)))

            def route(r):
                if r.request.url.startswith(("file:", "data:", "blob:")):
                    return r.continue_()
                requests.append(r.request.url)
                return r.abort()

            page.route("**/*", route)
            page.goto(report.resolve().as_uri())
            page.wait_for_function("['done', 'failed'].includes(document.body.dataset.state)", timeout=WAIT_S * 1000)
            figures = page.evaluate("""() => Array.from(document.querySelectorAll('figure.figure')).map(f => {
                const c = f.querySelector('canvas');
                return {id: f.id, state: f.dataset.state, width: c ? c.width : 0, height: c ? c.height : 0};
            })""")
            if toggle:
                for _ in range(2):
                    page.evaluate("() => document.querySelectorAll('input.log').forEach(box => box.click())")
                    page.wait_for_function("Array.from(document.querySelectorAll('figure.figure'))"
                                           ".every(f => f.dataset.state === 'drawn')", timeout=WAIT_S * 1000)
            rows = page.evaluate("() => document.querySelectorAll('table.runs tbody tr').length")
            state = page.evaluate("() => document.body.dataset.state")
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(palette_png(page.screenshot(full_page=full_page), method=2))  # 1/4 the size
        finally:
            browser.close()
    errors = [m["text"] for m in console if m["type"] == "error"]
    return {"state": state, "figures": figures, "table_rows": rows, "console_errors": errors,
            "warnings": [m["text"] for m in console if m["type"] == "warning"], "page_errors": page_errors,
            "requests": requests, "chromium": executable}


def ok(result: dict) -> bool:
    drawn = all(f["state"] == "drawn" and f["width"] > 0 and f["height"] > 0 for f in result["figures"])
    return (result["state"] == "done" and drawn and not result["console_errors"] and not result["page_errors"]
            and not result["requests"] and not result["warnings"])  # Vega warns of empty data, bad log domains


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
