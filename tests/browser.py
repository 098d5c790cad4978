"""A page in headless Chromium for the tests that look at what a browser shows: Debian's
chromium driven by Playwright (no browser download). A missing chromium fails the test, never
skips it: .ci/run installs it, and `make test` does where it can. And ``llmbench view`` serving
a test's results, for the pages to load.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench

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


@contextmanager
def viewing(bench: Bench, run: str) -> Iterator[str]:
    """``llmbench view`` serving ``bench``'s results folder as the run ``run``: its URL."""
    root = bench.pytester.path / "results"
    root.mkdir()
    shutil.copytree(bench.out(""), root / run)
    with serving(bench, root) as url:
        yield url


@contextmanager
def serving(bench: Bench, root: Path, *extra: str) -> Iterator[str]:
    """``llmbench view`` on 127.0.0.1 serving the runs under ``root`` for ``bench``'s project
    (``extra``: more of its options): its base URL; the server is stopped afterwards."""
    env = {**os.environ, FAKE_KEY_ENV: FAKE_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_llmbench.cli", "view", str(root), "--project",
         str(bench.pytester.path), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        cwd=bench.pytester.path,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+/", line)
    assert found, line
    try:
        yield found.group(0)
    finally:
        process.terminate()
        process.wait(timeout=20)
