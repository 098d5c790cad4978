"""Reruns (pytest-rerunfailures) are attempts of one item, and a crashed xdist worker's item
gets an error record: results agree with pytest's final outcome."""

from __future__ import annotations

import csv
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

QUIZ = """
cases:
  - id: flaky
    prompt: Is the flaky answer yes?
    expected: "yes"
    assert: [contains]
  - id: steady
    prompt: Is the steady answer yes?
    expected: "yes"
    assert: [contains]
"""

BROKEN = """
cases:
  - id: broken
    prompt: Is the broken answer yes?
    expected: "yes"
    assert: [contains]
  - id: outage
    prompt: Is the outage answer yes?
    expected: "yes"
    assert: [contains]
"""


def _script(bench: Bench) -> None:
    """flaky: wrong twice, then right; outage: a provider error twice, then right; broken:
    always wrong; steady: always right."""
    server = bench.server
    server.add_rule(Rule(match="flaky", reply="no", times=2))
    server.add_rule(Rule(match="outage", status=400, error_message="bad gateway", times=2))
    server.add_rule(Rule(match="broken", reply="no"))
    server.add_rule(Rule(match="answer", reply="yes"))


def _requests(bench: Bench, word: str) -> int:
    return sum(word in str(request.body) for request in bench.server.chat_requests())


def _by_case(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    assert len({record["nodeid"] for record in records}) == len(records)  # one per item
    return {record["case_id"]: record for record in records}


def _check_reruns(bench: Bench, result: pytest.RunResult) -> None:
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 3 and outcomes.get("failed") == 1
    assert outcomes.get("rerun") == 6  # flaky 2, outage 2, broken 2
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    records = _by_case(bench.records())
    assert set(records) == {"flaky", "steady", "broken", "outage"}

    flaky = records["flaky"]
    assert flaky["outcome"] == "passed" and flaky["score"] == 1.0
    assert [a["outcome"] for a in flaky["attempts"]] == ["failed", "failed"]
    assert [a["response"] for a in flaky["attempts"]] == ["no", "no"]
    assert [a["score"] for a in flaky["attempts"]] == [0.0, 0.0]
    assert flaky["response"] == "yes"
    assert _requests(bench, "flaky") == 3  # every attempt called the model again

    outage = records["outage"]  # setup errors rerun too
    assert outage["outcome"] == "passed"
    assert outage["error"] is None and outage["error_kind"] is None
    assert outage["transport_retries"] == 0
    assert [a["outcome"] for a in outage["attempts"]] == ["error", "error"]
    assert [a["error_kind"] for a in outage["attempts"]] == ["provider", "provider"]
    assert all("bad gateway" in a["error"] for a in outage["attempts"])

    broken = records["broken"]
    assert broken["outcome"] == "failed"
    assert [a["outcome"] for a in broken["attempts"]] == ["failed", "failed"]
    assert _requests(bench, "broken") == 3
    assert records["steady"]["attempts"] == []

    verdicts = {row["case_id"]: row for row in _csv(bench, "case_verdicts.csv")}
    assert len(verdicts) == 4
    assert "llmbench flaky cases" not in result.stdout.str()


def _csv(bench: Bench, name: str) -> list[dict[str, str]]:
    with bench.out(name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _write(bench: Bench) -> None:
    _script(bench)
    bench.eval_file("quiz", QUIZ)
    bench.eval_file("broken", BROKEN)


def test_reruns_are_attempts_of_one_record(bench: Bench) -> None:
    _write(bench)
    result = bench.run("--models=fake", "--reruns=2", "--max-retries=0", "-n", "0")
    _check_reruns(bench, result)


@pytest.mark.slow
def test_reruns_under_xdist_are_attempts_of_one_record(bench: Bench) -> None:
    _write(bench)
    result = bench.run_subprocess("--models=fake", "--reruns=2", "--max-retries=0", "-n", "2")
    _check_reruns(bench, result)
    workers = {record["worker"] for record in bench.records()}
    assert workers <= {"gw0", "gw1"}


def test_an_item_passing_on_a_rerun_passes_everywhere(bench: Bench) -> None:
    """Exit code, leaderboard and case verdicts agree with pytest: the flaky item passed."""
    _script(bench)
    bench.eval_file("quiz", QUIZ)
    result = bench.run("--models=fake", "--reruns=2", "--repeat-policy=all")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    records = bench.records()
    assert len(records) == 2 and all(record["passed"] for record in records)
    board = _csv(bench, "leaderboard.csv")
    assert len(board) == 1 and float(board[0]["pass_rate"]) == 1.0
    verdicts = _csv(bench, "case_verdicts.csv")
    assert len(verdicts) == 2 and {row["verdict"] for row in verdicts} == {"passed"}
    assert "llmbench flaky cases" not in result.stdout.str()


@pytest.mark.parametrize(
    ("cache", "calls", "outcome"), [("use", 1, "failed"), ("refresh", 3, "passed")]
)
def test_reruns_and_the_cache(bench: Bench, cache: str, calls: int, outcome: str) -> None:
    """--cache=use replays the cached answer on a rerun, as asked; --cache=refresh calls again."""
    _script(bench)
    bench.eval_file("quiz", QUIZ)
    result = bench.run("--models=fake", "--reruns=2", f"--cache={cache}", "--cache-dir=cache")
    (flaky,) = [record for record in bench.records() if record["case_id"] == "flaky"]
    assert _requests(bench, "flaky") == calls
    assert flaky["outcome"] == outcome and len(flaky["attempts"]) == 2
    assert result.ret == (
        pytest.ExitCode.OK if outcome == "passed" else pytest.ExitCode.TESTS_FAILED
    )


CRASHING_CONFTEST = """
import os

def pytest_runtest_call(item):
    if item.name.startswith("doomed["):
        os._exit(1)
"""


@pytest.mark.slow
def test_a_crashed_worker_leaves_an_error_record(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="yes"))
    bench.eval_file(
        "fate",
        """
        cases:
          - id: doomed
            prompt: Will it crash?
            expected: "yes"
            assert: [contains]
          - id: fine
            prompt: Will it pass?
            expected: "yes"
            assert: [contains]
        """,
    )
    bench.pytester.makeconftest(CRASHING_CONFTEST)
    result = bench.run_subprocess("--models=fake", "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    records = _by_case(bench.records())
    assert set(records) == {"doomed", "fine"}
    doomed = records["doomed"]
    assert doomed["outcome"] == "error" and doomed["error_kind"] == "crashed"
    assert "crashed while running" in doomed["error"]
    assert doomed["nodeid"] == "fate.eval.yaml::doomed[fake-r0]"
    assert (doomed["suite"], doomed["eval_file"]) == ("fate", "fate.eval.yaml")
    assert (doomed["model"], doomed["repeat"]) == ("fake", 0)
    assert doomed["worker"] in {"gw0", "gw1"}
    assert records["fine"]["outcome"] == "passed"


CRASHING_ONCE_CONFTEST = """
import os
from pathlib import Path

MARKER = Path(__file__).parent / "crashed.marker"

def pytest_runtest_call(item):
    if item.name.startswith("doomed[") and not MARKER.exists():
        MARKER.write_text(item.nodeid)
        os._exit(1)
"""


@pytest.mark.slow
def test_a_crash_rerun_is_an_attempt(bench: Bench) -> None:
    """--reruns runs a crashed worker's item again: the crash is its first attempt."""
    bench.server.add_rule(Rule(reply="yes"))
    bench.eval_file(
        "fate",
        """
        cases:
          - id: doomed
            prompt: Will it crash?
            expected: "yes"
            assert: [contains]
        """,
    )
    bench.pytester.makeconftest(CRASHING_ONCE_CONFTEST)
    result = bench.run_subprocess("--models=fake", "-n", "2", "--reruns=1")
    assert result.ret == pytest.ExitCode.OK
    (doomed,) = bench.records()
    assert doomed["outcome"] == "passed"
    assert [(a["outcome"], a["error_kind"]) for a in doomed["attempts"]] == [("error", "crashed")]


@pytest.mark.parametrize("cache", ["off", "use"])
def test_a_plain_test_rerun_counts_only_its_own_calls(bench: Bench, cache: str) -> None:
    """A rerun's calls are new calls (under --cache=use too: each call has its own entry)."""
    bench.server.add_rule(Rule(match="plain", reply="no", times=2))
    bench.server.add_rule(Rule(match="plain", reply="yes"))
    bench.pytester.makepyfile(
        test_plain="""
        def test_plain(llm):
            assert llm.complete("Is the plain answer yes?").text == "yes"
        """
    )
    result = bench.run("--models=fake", "--reruns=2", f"--cache={cache}", "--cache-dir=cache")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert _requests(bench, "plain") == 3
    assert record["outcome"] == "passed" and record["response"] == "yes"
    assert [a["outcome"] for a in record["attempts"]] == ["failed", "failed"]
    # Tokens summed over the final attempt's one call, not over all three attempts.
    assert record["output_tokens"] is not None
    assert record["output_tokens"] == record["attempts"][0]["output_tokens"]
