"""`llmbench view` in a real browser: Debian's chromium driven by Playwright (no browser
download) over runs written by -n 0 and -n 2 against the fake server: the runs list, a run's
matrix filtered to failures, an item with a judge and an item with an agent transcript, two
runs compared, and a run launched from the page, queued and watched until it finishes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium_page, serving
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench, Rule

from pytest_llmbench.results_folder import ResultsFolder
from pytest_llmbench.view.queue import Launch, LaunchError, parse_launch
from pytest_llmbench.view.runs import find_runs, load_run, read_records

QA = """
cases:
  - {id: france, prompt: "Capital of France?", expected: Paris, assert: [contains]}
  - {id: japan, prompt: "Capital of Japan?", expected: Tokyo, assert: [contains]}
  - id: rain
    prompt: "Why does it rain?"
    assert:
      - {type: llm-rubric, value: mentions evaporation}
"""
AGENT = """
kind: agent
tools: [read_file, write_file]
max_turns: 4
cases:
  - id: hello
    prompt: Write hello.txt with hello, then say done.
    expected: done
    assert:
      - {type: file-contains, path: hello.txt, value: hello}
      - icontains
"""


def script(bench: Bench, *, japan: str) -> None:
    server = bench.server
    server.reset()
    server.add_rule(
        Rule(model="fake-model-2", reply='{"score": 0.9, "reason": "says evaporation"}')
    )
    server.add_rule(Rule(match="France", reply="Paris"))
    server.add_rule(Rule(match="Japan", reply=japan))
    server.add_rule(Rule(match="rain", reply="Water evaporates and falls."))
    server.add_rule(Rule(match_last="wrote", reply="All done."))
    server.add_rule(
        Rule(
            match="Write hello.txt",
            tool_calls=[
                {"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}
            ],
        )
    )


def run_into(bench: Bench, folder: Path, *args: str) -> None:
    result = bench.pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--results-dir={folder}",
        "--models=fake",
        "--judges=fake2",
        *args,
    )
    assert (folder / "run.json").is_file(), result.stdout.str()[-3000:]


@pytest.fixture
def runs(bench: Bench) -> tuple[Bench, Path]:
    """Two finished runs under results/: a (-n 0, Japan right) and b (-n 2, Japan wrong)."""
    bench.eval_file("qa", QA)
    bench.eval_file("agent", AGENT)
    root = bench.pytester.path / "results"
    script(bench, japan="Tokyo")
    run_into(bench, root / "a", "-n", "0")
    script(bench, japan="Kyoto")
    run_into(bench, root / "b", "-n", "2")
    return bench, root


# -- without a browser ---------------------------------------------------------------------------


def test_runs_are_found_with_their_state(runs: tuple[Bench, Path]) -> None:
    _, root = runs
    found = {run.key: run for run in find_runs([root])}
    assert set(found) == {"0/a", "0/b"}
    assert {run.status for run in found.values()} == {"finished"}
    assert found["0/a"].count("passed") == 4 and found["0/b"].count("failed") == 1
    with pytest.raises(KeyError):
        load_run([root], "0/../..")  # nothing outside the roots


def test_a_line_still_being_written_is_left_for_later(tmp_path: Path) -> None:
    folder = ResultsFolder(tmp_path)
    folder.results.write_text('{"schema": 2, "a": 1}\n{"schema": 2, "b": 2}\n{"c":')
    assert read_records(folder) == [{"schema": 2, "a": 1}, {"schema": 2, "b": 2}]


def test_a_launch_form_never_reaches_a_shell(tmp_path: Path) -> None:
    (tmp_path / "qa.eval.yaml").write_text("cases: []\n")
    launch = parse_launch(
        {"files": ["qa.eval.yaml"], "models": "fake, @fast", "repeat": "2", "workers": "auto",
         "keyword": "france or japan; rm -rf /"},
        tmp_path,
    )  # fmt: skip
    argv = launch.argv(tmp_path / "out")
    assert argv[:2] == ["qa.eval.yaml", f"--results-dir={tmp_path / 'out'}"]
    assert ["-k", "france or japan; rm -rf /"] == argv[argv.index("-k") : argv.index("-k") + 2]
    assert "--models=fake,@fast" in argv and "--repeat=2" in argv
    for form, message in [
        ({"files": []}, "choose at least one"),
        ({"files": ["../etc/passwd"]}, "is not in the project"),
        ({"files": ["qa.eval.yaml"], "models": "a;b"}, "not a model"),
        ({"files": ["qa.eval.yaml"], "workers": "2; ls"}, "workers"),
        ({"files": ["qa.eval.yaml"], "repeat": "-1"}, "repeat"),
    ]:
        with pytest.raises(LaunchError, match=message):
            parse_launch(form, tmp_path)
    assert isinstance(launch, Launch)


# -- in the browser ------------------------------------------------------------------------------


@pytest.fixture
def viewer(runs: tuple[Bench, Path]) -> Iterator[tuple[str, Bench, Path]]:
    bench, root = runs
    with serving(bench, root) as url:
        yield url, bench, root


@pytest.fixture
def page(viewer: tuple[str, Bench, Path]) -> Iterator[Any]:
    with chromium_page() as page:
        yield page


@pytest.mark.slow
def test_browse_filter_open_items_and_compare(page: Any, viewer: tuple[str, Bench, Path]) -> None:
    url, _, _ = viewer
    page.goto(url)
    assert page.locator("tr[data-run]").count() == 2
    assert page.locator("td.finished").count() == 2
    # Run a: every case passed; run b: Japan failed. Open b, filter to failures.
    page.click('tr[data-run="0/b"] a')
    assert page.locator("table.leaderboard, table").first.is_visible()
    # The charts of the run's report.html, in the page.
    page.click("details.charts summary")
    charts = page.frame_locator("details.charts iframe")
    charts.locator(".js-plotly-plot").first.wait_for(timeout=30000)
    page.select_option("select[name=show]", "failures")
    page.click("form.filters button")
    page.wait_for_url(re.compile(r"show=failures"))
    assert page.locator("#matrix tr[data-case]").count() == 1
    assert page.locator("#matrix tr[data-case]").get_attribute("data-case") == "japan"
    assert "1 of 4 cases" in page.inner_text("#count")
    # The judged item: its judge's score and reasoning.
    page.goto(url + "run/0/b?q=rain")
    page.click("#matrix tr[data-case=rain] td a")
    assert "says evaporation" in page.inner_text("table.judges")
    assert "0.9" in page.inner_text("table.judges")
    # The agent item: its transcript as a timeline, the tool call named.
    page.goto(url + "run/0/a")
    page.click("#matrix tr[data-case=hello] td a")
    timeline = page.inner_text("ol.timeline")
    assert "model call 1" in timeline and "tool write_file (step 1)" in timeline
    assert "model call 2" in timeline and re.search(r"\d+ in / \d+ out tokens", timeline)
    assert "wrote" in timeline  # the tool's result
    page.click("details:has(ol.transcript) summary")  # not the review panel's folded forms
    assert "All done." in page.inner_text("ol.transcript")
    # Compare a (baseline) with b (new): Japan regressed, listed first.
    page.goto(url)
    page.check('tr[data-run="0/a"] input[name=a]')
    page.check('tr[data-run="0/b"] input[name=b]')
    page.click("form button[type=submit]")
    first = page.locator("table.changes tr.regressed").first
    assert "japan" in first.inner_text()
    assert "1 regressed" in page.inner_text("main")


@pytest.mark.slow
def test_launch_a_run_and_watch_it_finish(page: Any, viewer: tuple[str, Bench, Path]) -> None:
    url, bench, _root = viewer
    script(bench, japan="Tokyo")
    bench.server.add_rule(Rule(delay_s=0.6))  # slow enough to be seen running
    page.goto(url + "launch")
    page.check('input[name=files][value="qa.eval.yaml"]')
    page.fill("input[name=models]", "fake")
    page.fill("input[name=keyword]", "france or japan")
    page.click("#launch button[type=submit]")
    page.wait_for_selector("tr[data-job='1']")
    deadline = time.monotonic() + 120
    states = set()
    while time.monotonic() < deadline:
        page.goto(url + "launch")
        state = page.inner_text("tr[data-job='1'] td:nth-child(2)")
        states.add(state.split(" ")[0])
        if state.startswith(("finished", "failed", "cancelled")):
            break
        time.sleep(0.5)
    assert state.startswith("finished"), state
    assert "running" in states or "queued" in states
    # The launched run is listed, finished, with its two items.
    page.goto(url)
    launched = page.locator("tr[data-run^='0/view-']")
    assert launched.count() == 1
    assert "finished" in launched.inner_text() and "\t2\t" in launched.inner_text()


@pytest.mark.slow
def test_a_running_run_shows_its_progress_live(viewer: tuple[str, Bench, Path]) -> None:
    """A run written into the viewer's folder while it is open: running, then finished."""
    import urllib.request

    url, bench, root = viewer
    with urllib.request.urlopen(url + "run/0/a", timeout=60):
        pass  # the viewer's first run page imports pandas: not while the live run is short
    script(bench, japan="Tokyo")
    bench.server.add_rule(Rule(delay_s=0.4))
    env = {**os.environ, FAKE_KEY_ENV: FAKE_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "qa.eval.yaml",
               f"--results-dir={root / 'live'}", "--models=fake", "--judges=fake2",
               "--concurrency=1", "--repeat=4"]  # fmt: skip
    process = subprocess.Popen(command, cwd=bench.pytester.path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(url + "run/0/live", timeout=10) as response:
                    html = response.read().decode()
            except OSError:
                html = ""
            if 'id="progress"' in html:
                seen.append(html)
            time.sleep(0.3)
    finally:
        process.wait(timeout=60)
    assert seen, "the run was never shown in progress"
    assert "llmbench: " in seen[-1] and 'http-equiv="refresh"' in seen[-1]
    with urllib.request.urlopen(url + "run/0/live", timeout=10) as response:
        final = response.read().decode()
    assert "finished" in final and 'id="progress"' not in final
    assert not (root / "live" / "progress.json").exists()  # said its last


def test_a_model_switch_compares_two_models_under_one_label(runs: tuple[Bench, Path]) -> None:
    from pytest_llmbench.view.compare import compare_page

    _, root = runs
    a, b = load_run([root], "0/a"), load_run([root], "0/b")
    page = compare_page(a, b, "fake=fake")
    assert "<h2>fake -&gt; fake</h2>" in page and "1 regressed" in page
    assert "is not in the new run" in compare_page(a, b, "fake=nope")


def test_the_compare_page_lists_changed_cases_apart(runs: tuple[Bench, Path]) -> None:
    from pytest_llmbench.view.compare import compare_page

    bench, root = runs
    # Japan's expected answer is edited under the same id; Kyoto is now right.
    bench.eval_file("qa", QA.replace("expected: Tokyo", "expected: Kyoto"))
    script(bench, japan="Kyoto")
    run_into(bench, root / "c", "-n", "0")
    a, c = load_run([root], "0/a"), load_run([root], "0/c")
    page = compare_page(a, c, "")
    assert '<p class="changed">1 case changed since the baseline' in page
    assert '<ul class="changed"><li>qa::japan</li></ul>' in page
    assert "0 regressed, 0 improved" in page and 'id="pairing"' not in page
    # A baseline of an older version (no case hashes): paired by id, with a warning.
    ResultsFolder(root / "a").write_records(
        [{k: v for k, v in r.items() if k != "case_hash"} for r in a.records]
    )
    page = compare_page(load_run([root], "0/a"), c, "")
    assert 'id="pairing"' in page and "no case hashes" in page
    assert 'class="changed"' not in page
    assert '<tr class="same"><td>same</td><td>qa</td><td>japan</td>' in page


def test_nothing_of_the_viewer_loads_in_a_pytest_run(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("one", "cases:\n  - {id: a, prompt: hi, expected: Paris}\n")
    bench.pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            loaded = [m for m in ("pytest_llmbench.view", "starlette", "uvicorn") if m in sys.modules]
            assert not loaded, loaded
        """
    )
    result = bench.run_subprocess("--models=fake")
    result.assert_outcomes(passed=1)
    assert "AssertionError" not in result.stdout.str() + result.stderr.str()


def test_the_queue_survives_a_restart_of_the_viewer(tmp_path: Path) -> None:
    import json

    from pytest_llmbench.view.queue import JobQueue

    (tmp_path / "a.eval.yaml").write_text("cases: []\n")
    state = tmp_path / ".llmbench-view" / "queue.json"
    queue = JobQueue(state, tmp_path, tmp_path / "results")  # not started: jobs stay queued
    queue.submit(Launch(files=["a.eval.yaml"]))
    queue.submit(Launch(files=["a.eval.yaml"], models=["fake"], repeat=3))
    data = json.loads(state.read_text())
    data["jobs"][0]["state"] = "running"  # the viewer stopped while job 1 ran
    state.write_text(json.dumps(data))
    again = JobQueue(state, tmp_path, tmp_path / "results")
    assert [(job.id, job.state) for job in again.jobs] == [(1, "interrupted"), (2, "queued")]
    assert again.jobs[1].launch.models == ["fake"] and again.jobs[1].launch.repeat == 3
    assert again.cancel(2) and again.snapshot()[1].state == "cancelled"
    assert not again.cancel(1)  # over already


@pytest.mark.slow
def test_a_running_job_is_cancelled_with_its_processes(tmp_path: Path) -> None:
    from pytest_llmbench.view.queue import JobQueue

    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(60)\n")
    queue = JobQueue(tmp_path / "queue.json", tmp_path, tmp_path / "results")
    queue.start()
    try:
        job = queue.submit(Launch(files=["test_slow.py"]))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and queue.snapshot()[0].pid is None:
            time.sleep(0.1)
        pid = queue.snapshot()[0].pid
        assert pid is not None
        time.sleep(1.0)  # pytest is inside the test
        started = time.monotonic()
        assert queue.cancel(job.id)
        assert time.monotonic() - started < 15
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert queue.snapshot()[0].state == "cancelled"
    finally:
        queue.close()


def test_only_local_requests_and_the_viewers_own_forms_are_served(tmp_path: Path) -> None:
    """DNS rebinding (another Host) and a forged form from another site (its Origin) get 403:
    a page elsewhere must not read results or launch runs that spend money."""
    import http.client
    import json

    (tmp_path / "runs").mkdir()
    (tmp_path / "a.eval.yaml").write_text("cases: []\n")
    command = [sys.executable, "-m", "pytest_llmbench.cli", "view", str(tmp_path / "runs"),
               "--project", str(tmp_path)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    assert process.stdout is not None
    port = int(re.search(r":(\d+)/", process.stdout.readline()).group(1))  # type: ignore[union-attr]
    form = "files=a.eval.yaml&models=fake"

    def ask(method: str, path: str, **headers: str) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        sent = {"content-type": "application/x-www-form-urlencoded", **headers}
        connection.request(method, path, body=form if method == "POST" else None, headers=sent)
        status = connection.getresponse().status
        connection.close()
        return status

    try:
        assert ask("GET", "/") == 200
        assert ask("GET", "/", host=f"evil.example:{port}") == 403
        assert ask("POST", "/launch", origin="http://evil.example") == 403
        queue = tmp_path / "runs" / ".llmbench-view" / "queue.json"
        assert not queue.exists()  # nothing was queued
        assert ask("POST", "/launch", origin=f"http://127.0.0.1:{port}") == 303
        assert len(json.loads(queue.read_text())["jobs"]) == 1
    finally:
        process.terminate()
        process.wait(timeout=20)
