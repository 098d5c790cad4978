"""Screenshots of the viewer's review pages, for the docs (docs/img/).

    .venv/bin/python benchmarks/review_screenshots.py URL OUT_DIR

``URL`` is a running ``llmbench view`` (e.g. ``http://127.0.0.1:8765/``) over runs with judged
items; ``OUT_DIR`` gets four PNGs: ``review-item-blind.png`` (the next item of the blind queue,
its judges hidden), ``review-item-revealed.png`` (the same item after it is labelled ``pass``
with the keyboard: this writes one label), ``review-queue.png`` and ``review-calibration.png``.
Headless Debian chromium driven by Playwright, as the tests do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
#: The PNGs written, in order.
NAMES = ("review-item-blind", "review-item-revealed", "review-queue", "review-calibration")


def screenshots(page: Any, url: str, out: Path) -> list[Path]:
    """Drive ``page`` over the viewer at ``url`` and save the PNGs in ``out``: their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png" for name in NAMES]
    base = url.rstrip("/")
    page.goto(base + "/review?blind=1")
    if page.locator("#start").count():
        page.click("#start")
        page.wait_for_selector("#blind")
        page.screenshot(path=str(paths[0]), full_page=True)
        with page.expect_navigation():
            page.keyboard.press("p")
        page.screenshot(path=str(paths[1]), full_page=True)
    else:  # nothing left to label: a labelled item, revealed, stands in for both
        page.goto(base + "/review?blind=1&labelled=1")
        page.click("#queue tr[data-nodeid] a")
        page.screenshot(path=str(paths[0]), full_page=True)
        page.screenshot(path=str(paths[1]), full_page=True)
    page.goto(base + "/review?labelled=1")
    page.screenshot(path=str(paths[2]), full_page=True)
    page.goto(base + "/calibration")
    page.screenshot(path=str(paths[3]), full_page=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            for path in screenshots(page, args.url, args.out):
                print(path)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
