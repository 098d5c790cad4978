"""The worked example of docs/reviews-example.md: review 20 judged items, calibrate the judge, and
a judge gate demoting it.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/review_example.py OUT_DIR

In a temporary folder it writes a project whose eval file has 20 sums, each judged by one
``llm-rubric`` assertion (nothing else, so the judge alone decides each item). The models are
scripted on the tests' fake OpenAI-compatible server (tests/fakeserver.py) so that the example
gives the same numbers on every machine: the answering model ``answerer`` is right on 10 sums
and wrong on 10; the judge ``lenient-judge`` is lenient (it passes every answer that is a
number, right or wrong, and fails only the two that are not); ``answerer-2`` is the next model
evaluated, with the same judge.

Then: a first run (``pytest --results-dir``); ``llmbench view`` on it (a real uvicorn server on
127.0.0.1) where headless Chromium (Playwright, Debian's chromium) labels the 20 items of the
blind review queue by keyboard, as a person would: the script stands in for the person and
decides pass or fail from the sum's known result; ``llmbench calibrate``; a run of
``answerer-2`` with the labels and ``--judge-gate min_kappa=0.6,min_labels=20``; the same with
``--judge-gate-fail``.

OUT_DIR gets the screenshots (``review-example-queue.png``, ``-blind.png``, ``-revealed.png``,
``-calibration.png``), ``calibrate.txt`` (the table as printed), ``gated.txt`` and
``gated-fail.txt`` (the runs' terminal lines on the judge, the items and the exit code),
``keys.txt`` (the keys pressed on each item) and ``example.eval.yaml``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

HERE = Path(__file__).resolve().parent


def _module(path: Path) -> Any:
    """The module at ``path`` (benchmarks/ has a fakeserver.py of its own: the tests' one is
    loaded by path)."""
    spec = importlib.util.spec_from_file_location(path.stem + "_for_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_fake = _module(HERE.parent / "tests" / "fakeserver.py")
FakeLLMServer, Rule = _fake.FakeLLMServer, _fake.Rule
CHROMIUM = _module(HERE / "review_screenshots.py").CHROMIUM

KEY_ENV = "EXAMPLE_FAKE_KEY"
RUBRIC = "The number given is the correct result of the sum"
NOT_SURE = "I am not sure, sums are hard."


def _answers(wrong: set[int], not_sure: set[int]) -> list[str]:
    """A model's answers to the 20 sums: wrong (off by a little) on ``wrong``, no number on
    ``not_sure``, right on the others."""
    answers = []
    for n, (a, b) in enumerate(TERMS, 1):
        answers.append(NOT_SURE if n in not_sure else str(a + b + (n % 7 + 1) * (n in wrong)))
    return answers


#: The terms of sums q01..q20.
TERMS = [(11 * n + 3, 7 * n + 5) for n in range(1, 21)]
#: The models' answers: ``answerer`` (the run people review) is right on odd sums, wrong on even
#: ones, q10 and q20 give no number; ``answerer-2`` (the gated run's) is wrong on 5 sums, one of
#: them no number.
ANSWERS = {
    "answerer": _answers({2, 4, 6, 8, 12, 14, 16, 18}, {10, 20}),
    "answerer-2": _answers({4, 9, 13, 17}, {20}),
}
#: The fake server's model of each.
WIRE = {"answerer": "fake-model", "answerer-2": "fake-model-3", "lenient-judge": "fake-model-2"}


def case_id(n: int) -> str:
    """The case id of sum ``n`` (1-based)."""
    return f"q{n:02d}"


def right(n: int) -> bool:
    """Whether ``answerer``'s answer to sum ``n`` is its result: what the person knows."""
    a, b = TERMS[n - 1]
    return ANSWERS["answerer"][n - 1] == str(a + b)


def eval_file() -> str:
    """The eval file: 20 sums, one rubric each, judged by ``lenient-judge``."""
    lines = ["cases:"]
    for n, (a, b) in enumerate(TERMS, 1):
        lines.append(f"  - id: {case_id(n)}")
        lines.append(f'    prompt: "{case_id(n)}. What is {a} + {b}? Reply with the number only."')
        lines.append("    assert:")
        lines.append(f'      - {{type: llm-rubric, value: "{RUBRIC}", judges: [lenient-judge]}}')
    return "\n".join(lines) + "\n"


def script_server(server: Any) -> None:
    """The answering models' replies, and the lenient judge: it fails an answer with no number,
    and passes every other (right or wrong)."""
    for model, answers in ANSWERS.items():
        for n, answer in enumerate(answers, 1):
            server.add_rule(Rule(model=WIRE[model], match=f"{case_id(n)}.", reply=answer))
    judge = WIRE["lenient-judge"]
    fail = {"score": 0.1, "reason": "The answer gives no number."}
    server.add_rule(Rule(model=judge, match_any=NOT_SURE, reply=json.dumps(fail)))
    passing = {"score": 0.9, "reason": "The answer is a number, as the prompt asks."}
    server.add_rule(Rule(model=judge, reply=json.dumps(passing)))


def write_project(root: Path, base_url: str) -> None:
    """The project: the eval file, a profile of the two scripted models, a pytest.ini."""
    (root / "profiles").mkdir(parents=True)
    (root / "example.eval.yaml").write_text(eval_file())
    profile = ["models:"]
    for name, wire in WIRE.items():
        profile += [f"  {name}:", f"    model: openai/{wire}", f"    api_base: {base_url}",
                    f"    api_key_env: {KEY_ENV}"]  # fmt: skip
    (root / "profiles" / "example.yaml").write_text("\n".join(profile) + "\n")
    (root / "pytest.ini").write_text("[pytest]\n")


def environment() -> dict[str, str]:
    """The environment of the commands: the fake key, litellm's local price map."""
    return {**os.environ, KEY_ENV: "sk-fake-7f3a9c1e5b", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``args`` (a command after the Python interpreter) in ``root``: its output."""
    return subprocess.run(
        [sys.executable, *args], cwd=root, env=environment(), text=True,
        capture_output=True, timeout=600, check=False,
    )  # fmt: skip


def pytest_run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``pytest`` with ``args`` in ``root``."""
    return run(root, "-m", "pytest", "-p", "no:cacheprovider", *args)


def records(run_dir: Path) -> list[dict[str, Any]]:
    """A run's records."""
    text = (run_dir / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def moved_from(url: str) -> Callable[[str], bool]:
    """Whether a page's URL is no longer ``url``."""
    return lambda now: now != url


def review(url: str, nodeids: dict[str, str], out: Path) -> list[str]:
    """Label the blind queue's items by keyboard in Chromium: the keys pressed, one line an item."""
    from playwright.sync_api import sync_playwright

    keys: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(url + "review?blind=1")
            page.screenshot(path=str(out / "review-example-queue.png"), full_page=True)
            page.focus("#start")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            for i in range(len(nodeids)):
                nodeid = parse_qs(urlparse(page.url).query)["nodeid"][0]
                n = int(nodeids[nodeid][1:])
                key = "p" if right(n) else "f"
                if i == 0:
                    page.screenshot(path=str(out / "review-example-blind.png"), full_page=True)
                with page.expect_navigation():
                    page.keyboard.press(key)
                if i == 0:
                    page.screenshot(path=str(out / "review-example-revealed.png"), full_page=True)
                (a, b), answer = TERMS[n - 1], ANSWERS["answerer"][n - 1]
                keys.append(f"{case_id(n)}  {a} + {b} = {a + b}, answer {answer!r}: {key}")
                if i + 1 < len(nodeids):
                    page.keyboard.press("n")
                    page.wait_for_url(moved_from(page.url))
            page.goto(url + "review?blind=1")
            left = page.inner_text("#left")
            page.goto(url + "calibration")
            page.screenshot(path=str(out / "review-example-calibration.png"), full_page=True)
        finally:
            browser.close()
    keys.append(f"queue afterwards: {left}")
    return keys


def viewing(root: Path, runs: Path, labels: Path) -> tuple[subprocess.Popen[str], str]:
    """``llmbench view`` on 127.0.0.1 over ``runs`` with ``--reviews-dir labels``: the process
    and its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_llmbench.cli", "view", str(runs), "--project", str(root),
         "--reviews-dir", str(labels)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=root,
        env={**environment(), "LOGNAME": "reviewer"},  # a label names the login: not this machine's
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+/", line)
    if not found:
        process.terminate()
        process.wait(timeout=20)
        raise SystemExit(f"llmbench view did not start: {line}")
    return process, found.group(0)


def gate_lines(output: str, code: int) -> str:
    """The lines of a gated run's terminal output on the judge gate and the items, and its
    exit code."""
    keep = re.compile(r"judge gate|gate FAILED|^=+ .*(passed|failed|skipped)|^(SKIPPED|FAILED) ")
    where = re.compile(r"^(SKIPPED \[\d+\]) \S+:\d+: ")  # the plugin's file and line
    lines = [where.sub(r"\1 ", line) for line in output.splitlines() if keep.search(line)]
    lines = [re.sub(r" in [\d.]+s (=+)$", r" \1", line) for line in lines]  # times vary
    return "\n".join([*lines, f"exit code {code}"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as temp, FakeLLMServer() as server:
        root = Path(temp)
        script_server(server)
        write_project(root, server.base_url)
        (out / "example.eval.yaml").write_text(eval_file())
        runs, labels = root / "runs", root / "labels"
        first = pytest_run(root, "--models=answerer", "--results-dir=runs/first")
        print(first.stdout.splitlines()[-1])
        nodeids = {r["nodeid"]: r["case_id"] for r in records(runs / "first")}
        process, url = viewing(root, runs, labels)
        try:
            keys = review(url, nodeids, out)
        finally:
            process.terminate()
            process.wait(timeout=20)
        (out / "keys.txt").write_text("\n".join(keys) + "\n")
        print("\n".join(keys))
        table = run(root, "-m", "pytest_llmbench.cli", "calibrate", "runs/first",
                    "--reviews-dir", "labels", "--min-labels", "20")  # fmt: skip
        (out / "calibrate.txt").write_text(table.stdout + table.stderr)
        print(table.stdout + table.stderr)
        gate = "--judge-gate=min_kappa=0.6,min_labels=20"
        for name, extra in (("gated", ()), ("gated-fail", ("--judge-gate-fail",))):
            result = pytest_run(
                root,
                "--models=answerer-2",
                "-rs",
                f"--results-dir=runs/{name}",
                "--reviews-dir=labels",
                gate,
                *extra,
            )
            text = gate_lines(result.stdout, result.returncode)
            (out / f"{name}.txt").write_text(text)
            print(f"--- {name}\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
