"""The screenshot of the viewer's Trends page for the docs (docs/view-trends.png).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/trend_screenshot.py [OUT_PNG]

In a temporary git repository it writes a project with two eval files (14 sums, 5 capitals)
and makes ten runs of the model ``assistant`` (and a steady ``baseline``) scripted on the tests'
fake OpenAI-compatible server (tests/fakeserver.py), so that the picture is the same on every
machine: ``assistant`` gets one sum wrong in runs 1-5; from run 6 on it is served by another
model version and gets six wrong (a drop the drift test finds); a new commit is made before run
4; sum q14's prompt is edited before run 5 (its earlier verdicts are left out); the capital of
Australia flips between right and wrong. A folder of notes sits beside the runs (listed as
skipped). Then ``llmbench view`` (a real uvicorn server on 127.0.0.1) shows the runs, and
headless Chromium (Playwright, Debian's chromium) saves ``/trends?model=assistant`` to
``OUT_PNG`` (default docs/view-trends.png).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
KEY_ENV = "TREND_FAKE_KEY"
RUNS = 10
#: The sums each run of ``assistant`` gets wrong (1-based), run by run.
WRONG = {run: {3} if run <= 5 else {3, 5, 8, 9, 12, 13} for run in range(1, RUNS + 1)}
#: The runs where ``assistant`` says Sydney.
SYDNEY = {3, 5, 6, 9}
TERMS = [(11 * n + 3, 7 * n + 5) for n in range(1, 15)]
CAPITALS = {"france": "Paris", "japan": "Tokyo", "italy": "Rome", "peru": "Lima",
            "australia": "Canberra"}  # fmt: skip


def _fake_server_module() -> Any:
    """tests/fakeserver.py, loaded by path (benchmarks/ has a fakeserver.py of its own)."""
    path = HERE.parent / "tests" / "fakeserver.py"
    spec = importlib.util.spec_from_file_location("fakeserver_for_trends", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def sums_file(edited: bool) -> str:
    lines = ["cases:"]
    for n, (a, b) in enumerate(TERMS, 1):
        ask = "Reply with the number alone." if edited and n == 14 else "Reply with the number."
        lines.append(f'  - {{id: q{n:02d}, prompt: "q{n:02d}. What is {a} + {b}? {ask}", '
                     f'expected: "{a + b}", assert: [contains]}}')  # fmt: skip
    return "\n".join(lines) + "\n"


def capitals_file() -> str:
    lines = ["cases:"]
    for country, city in CAPITALS.items():
        lines.append(f'  - {{id: {country}, prompt: "Capital of {country.title()}?", '
                     f"expected: {city}, assert: [contains]}}")  # fmt: skip
    return "\n".join(lines) + "\n"


def script(server: Any, rule: Any, run: int) -> None:
    """The replies of ``run``: ``assistant`` on fake-model (runs 1-5) or fake-model-3, and
    ``baseline`` on fake-model-2 (wrong on q02 only)."""
    server.reset()
    wire = "fake-model" if run <= 5 else "fake-model-3"
    for n, (a, b) in enumerate(TERMS, 1):
        server.add_rule(rule(model=wire, match=f"q{n:02d}.", reply=str(a + b + (n in WRONG[run]))))
        server.add_rule(rule(model="fake-model-2", match=f"q{n:02d}.", reply=str(a + b + (n == 2))))
    for country, city in CAPITALS.items():
        said = "Sydney" if country == "australia" and run in SYDNEY else city
        server.add_rule(rule(model=wire, match=country.title(), reply=said))
        server.add_rule(rule(model="fake-model-2", match=country.title(), reply=city))


def profile(base_url: str, run: int) -> str:
    wires = {"assistant": "fake-model" if run <= 5 else "fake-model-3", "baseline": "fake-model-2"}
    lines = ["models:"]
    for name, wire in wires.items():
        lines += [f"  {name}:", f"    model: openai/{wire}", f"    api_base: {base_url}",
                  f"    api_key_env: {KEY_ENV}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def environment() -> dict[str, str]:
    return {**os.environ, KEY_ENV: "sk-fake-trend", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "GIT_AUTHOR_NAME": "docs", "GIT_AUTHOR_EMAIL": "docs@example.com",
            "GIT_COMMITTER_NAME": "docs", "GIT_COMMITTER_EMAIL": "docs@example.com"}  # fmt: skip


def command(root: Path, *args: str) -> None:
    """Run ``args`` in ``root``; its output on failure."""
    done = subprocess.run(args, cwd=root, env=environment(), text=True, capture_output=True,
                          timeout=600, check=False)  # fmt: skip
    if done.returncode not in (0, 1):  # 1: some items failed, as scripted
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}\n{done.stdout[-3000:]}")


def make_runs(root: Path, server: Any, rule: Any) -> Path:
    """The ten runs under ``root/runs``, one after another."""
    (root / "profiles").mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "capitals.eval.yaml").write_text(capitals_file())
    (root / ".gitignore").write_text("runs/\n")
    command(root, "git", "init", "-q")
    for run in range(1, RUNS + 1):
        (root / "sums.eval.yaml").write_text(sums_file(edited=run >= 5))
        (root / "profiles" / "example.yaml").write_text(profile(server.base_url, run))
        if run in (1, 4):
            (root / "NOTES.md").write_text(f"release {run}\n")
            command(root, "git", "add", "-A")
            command(root, "git", "commit", "-q", "-m", f"release {run}")
        script(server, rule, run)
        command(root, sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                "--models=assistant,baseline", f"--results-dir=runs/run-{run:02d}")  # fmt: skip
        print(f"run {run} done", flush=True)
    (root / "runs" / "notes").mkdir()
    (root / "runs" / "notes" / "ideas.txt").write_text("not a run\n")
    return root / "runs"


def screenshot(root: Path, runs: Path, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_llmbench.cli", "view", str(runs), "--project", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=root, env=environment(),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if not found:
            raise SystemExit(f"llmbench view did not start: {line}")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(found.group(0) + "trends?model=assistant")
                # the sums' runs opened: q14's earlier verdicts left out, the changes marked
                page.click('section.series[data-file="sums.eval.yaml"] details summary')
                page.screenshot(path=str(out), full_page=True)
            finally:
                browser.close()
    finally:
        process.terminate()
        process.wait(timeout=20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?", default=HERE.parent / "docs/view-trends.png")
    args = parser.parse_args(argv)
    fake = _fake_server_module()
    with tempfile.TemporaryDirectory() as temp, fake.FakeLLMServer() as server:
        root = Path(temp)
        runs = make_runs(root, server, fake.Rule)
        screenshot(root, runs, args.out.resolve())
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
