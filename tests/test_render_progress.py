"""The progress line while a run goes on: items done of total, pass rate, errors, spend, calls in
flight or waiting on a rate limit, ETA; with -n 0 and -n 2, in a pseudo-terminal and in a log,
and pytest's own output (-q, -v, -rA) still whole."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench, Rule

from pytest_llmbench.render.progress import Tally, duration

#: Six items of 0.3 s each: a run of about 2 s at --concurrency 1.
SIX = "cases:\n" + "".join(
    f"  - {{id: c{n}, prompt: 'question {n}', expected: ok, assert: [contains]}}\n"
    for n in range(6)
)
LINE = re.compile(
    r"llmbench: (\d+)/6 items \(\d+%\), pass [\d.]+%, (\d+) errors?, [\d.]+ USD, "
    r"\d+ calls? in flight(, \d+ waiting on a rate limit)?(, ETA [\dhms ]+)?$"
)


def progress_lines(text: str) -> list[re.Match[str]]:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return [m for line in plain.splitlines() if (m := LINE.search(line.strip()))]


@pytest.fixture
def slow(bench: Bench) -> Bench:
    bench.server.add_rule(Rule(delay_s=0.3))
    bench.eval_file("six", SIX)
    bench.pytester.makeini("[pytest]\nllmbench_progress_every_s = 0.25\n")
    return bench


def test_the_line_counts_what_the_records_say() -> None:
    tally = Tally(total=10)
    tally.add({"outcome": "passed", "cost_usd": 0.01, "judge_cost_usd": 0.002})
    tally.add({"outcome": "failed", "cost_usd": 0.01})
    tally.add({"outcome": "error", "cost_usd": None})
    tally.add({"outcome": "passed", "cost_usd": 0.5}, item=False)  # a plain test: spend only
    tally.activity = {"gw0": (3, 1), "gw1": (2, 0)}
    line = tally.line(elapsed_s=30.0)
    assert line == (
        "llmbench: 3/10 items (30%), pass 50.0%, 1 error, 0.5220 USD, 5 calls in flight, "
        "1 waiting on a rate limit, ETA 1m 10s"
    )
    assert Tally().line(5.0) == "llmbench: 0 items, 0 errors, 0.0000 USD, 0 calls in flight"


def test_durations_read_as_people_write_them() -> None:
    assert [duration(s) for s in (0.4, 42, 95, 3700)] == ["0s", "42s", "1m 35s", "1h 1m"]


def test_a_long_run_shows_its_progress_between_pytests_dots(slow: Bench) -> None:
    result = slow.run("--models=fake", "--concurrency=1", "-q")
    result.assert_outcomes(passed=6)
    found = progress_lines(result.stdout.str())
    assert len(found) >= 2
    done = [int(m.group(1)) for m in found]
    assert done == sorted(done) and done[-1] <= 6
    assert all(m.group(4) for m in found)  # an ETA once an item is done
    # pytest's own output is whole: the dots add up to the six items, the summary follows.
    dots = "".join(line for line in result.outlines if re.fullmatch(r"[.FEsx]+( +\[.*\])?", line))
    assert dots.count(".") == 6
    result.stdout.fnmatch_lines(["*6 passed*"])


def test_verbose_and_report_all_stay_whole(slow: Bench) -> None:
    result = slow.run("--models=fake", "--concurrency=1", "-v", "-rA")
    result.assert_outcomes(passed=6)
    assert progress_lines(result.stdout.str())
    result.stdout.fnmatch_lines(["*six.eval.yaml::c0*PASSED*", "*short test summary info*"])
    assert sum("PASSED six.eval.yaml::c" in line for line in result.outlines) == 6


def test_errors_are_counted_as_they_happen(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="question 0", status=400, error_message="bad request"))
    bench.server.add_rule(Rule(delay_s=0.3))
    bench.eval_file("six", SIX)
    bench.pytester.makeini("[pytest]\nllmbench_progress_every_s = 0.25\n")
    result = bench.run("--models=fake", "--concurrency=1", "--max-retries=0")
    result.assert_outcomes(passed=5, errors=1)
    found = progress_lines(result.stdout.str())
    assert found and {int(m.group(2)) for m in found} == {1}  # c0 errored first


def test_under_xdist_the_controller_counts_every_workers_items(slow: Bench) -> None:
    result = slow.run_subprocess("--models=fake", "--concurrency=1", "-n", "2")
    result.assert_outcomes(passed=6)
    found = progress_lines(result.stdout.str())
    assert found, result.stdout.str()
    assert int(found[-1].group(1)) <= 6


def test_a_short_run_prints_no_progress_and_zero_turns_it_off(bench: Bench) -> None:
    bench.eval_file("six", SIX)
    result = bench.run("--models=fake")  # the default interval (30 s in a log) never comes
    result.assert_outcomes(passed=6)
    assert not progress_lines(result.stdout.str())
    bench.server.add_rule(Rule(delay_s=0.3))
    bench.pytester.makeini("[pytest]\nllmbench_progress_every_s = 0\n")
    result = bench.run("--models=fake", "--concurrency=1")
    assert not progress_lines(result.stdout.str())


def test_a_bad_interval_is_a_usage_error(bench: Bench) -> None:
    bench.eval_file("six", SIX)
    bench.pytester.makeini("[pytest]\nllmbench_progress_every_s = soon\n")
    result = bench.run("--models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*llmbench_progress_every_s: not a number: 'soon'*"])


@pytest.mark.slow
def test_in_a_pseudo_terminal_the_line_is_coloured_and_pytest_still_draws(slow: Bench) -> None:
    """pytest's stdout is a terminal here (a pty), as on a developer's machine."""
    env = {**os.environ, FAKE_KEY_ENV: FAKE_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CI", None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--results-dir=out",
               "--models=fake", "--concurrency=1", "--color=yes"]  # fmt: skip
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        command, cwd=slow.pytester.path, env=env, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    output = b""
    deadline = time.monotonic() + 120
    # poll, not select: select refuses a descriptor numbered past 1023, which a long session
    # of in-process pytest runs can reach
    watch = select.poll()
    watch.register(controller, select.POLLIN)
    while time.monotonic() < deadline:
        if watch.poll(500):
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the pty closed: the process is done
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout=30)
    os.close(controller)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-3000:]
    assert progress_lines(text), text[-3000:]
    assert "\x1b[36mllmbench: " in text  # cyan, as pytest colours its own notices
    assert re.search(r"6 passed", re.sub(r"\x1b\[[0-9;]*m", "", text))
