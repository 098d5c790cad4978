"""A page in headless Chromium for the tests that look at what a browser shows: Debian's
chromium driven by Playwright (no browser download). A missing chromium fails the test, never
skips it: .ci/run installs it, and `make test` does where it can.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def chromium_page(**options: Any) -> Iterator[Any]:
    """A new Playwright page (``options`` go to ``new_page``, e.g. ``viewport``); the browser
    is closed afterwards."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium, as .ci/run does")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser.new_page(**options)
        finally:
            browser.close()
