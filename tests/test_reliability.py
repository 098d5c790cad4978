"""Reliability under faults, a crashed xdist worker and a rate limit (issue 3, section 6).

Every run here is a real ``pytest`` subprocess against ``benchmarks/fakeserver.py`` (a separate
process on 127.0.0.1, so its fault dice, rate window and counters are the ones a remote provider
would have), bounded by a timeout so that a hang fails the test instead of stalling the suite.
What the server counted (``GET /stats``) is compared with what the run recorded.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
FAULT_KINDS = ("429", "500", "timeout", "drop", "malformed")
#: Retries every run here allows; an item errors only after 1 + MAX_RETRIES attempts.
MAX_RETRIES = 2
#: What an error record's message must name, per fault kind (either client, streamed or not).
CAUSE = {
    "429": r"RateLimitError \(HTTP 429\)",
    "500": r"InternalServerError \(HTTP 500\)",
    "timeout": r"Timeout.*no complete answer within",
    "drop": r"ConnectionClosed.*the server closed the connection|stream was cut|stream ended",
    "malformed": r"Unterminated string|Expecting|JSON|APIConnectionError|payload is not completed",
}
#: The error kinds a fault kind may end in (a broken SSE event may read as a cut stream).
KINDS = {"timeout": {"timeout"}, "malformed": {"malformed", "provider"}}
SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR) (\S+\.eval\.yaml::\S+)", re.M)


def _load_harness() -> ModuleType:
    """``benchmarks/harness.py`` (its ``FakeServer`` runs ``fakeserver.py`` as a process group).

    Loaded by path: ``benchmarks/`` has a ``fakeserver`` module of its own, which must not shadow
    ``tests/fakeserver.py`` on ``sys.path``.
    """
    spec = importlib.util.spec_from_file_location(
        "llmbench_bench_harness", BENCH_DIR / "harness.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


harness = _load_harness()
#: Every test here runs pytest subprocesses against server processes, for seconds to a minute.
pytestmark = pytest.mark.slow
StartServer = Callable[..., Any]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Start ``fakeserver.py`` processes (``start_server(name, fault_rate=...)``); all end at teardown."""
    started: list[Any] = []

    def start(name: str, **options: Any) -> Any:
        server = harness.FakeServer(harness.ServerOptions(**options), tmp_path / f"server-{name}")
        started.append(server)
        return server.__enter__()

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester project whose runs see the fake key (and never fetch litellm's price map)."""
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    pytester.makeini("[pytest]\n")  # pins the rootdir, so profiles/ and .pytest_cache are here
    return pytester


def write_profile(pytester: pytest.Pytester, **servers: Any) -> None:
    """One model per fake server, named by the keyword."""
    lines = ["models:"]
    for name, server in servers.items():
        lines += [
            f"  {name}:",
            f"    model: openai/{name}",
            f"    api_base: {server.api_base}",
            f"    api_key_env: {FAKE_KEY_ENV}",
            "    cost_per_1k: {input: 0.001, output: 0.002}",
        ]
    pytester.makefile(".yaml", **{"profiles/fake": "\n".join(lines) + "\n"})


def write_cases(pytester: pytest.Pytester, count: int, *, failing_every: int = 0) -> None:
    """``suite.eval.yaml`` with cases c00..; every ``failing_every``-th expects a missing word.

    The fake server answers "w0 w1 ... w19", so a case expecting "w3" passes when answered and
    one expecting "absent" fails.
    """
    lines = ["cases:"]
    for index in range(count):
        fails = failing_every and index % failing_every == failing_every - 1
        lines += [
            f"  - id: c{index:02d}",
            f"    prompt: Question {index:02d} is asked here",
            f"    expected: {'absent' if fails else 'w3'}",
            "    assert: [contains]",
        ]
    pytester.makefile(".eval.yaml", suite="\n".join(lines) + "\n")


def run_timed(
    pytester: pytest.Pytester, *args: str, timeout: float
) -> tuple[pytest.RunResult, float]:
    """``runpytest_subprocess`` bounded by ``timeout`` seconds; also its wall time."""
    started = time.monotonic()
    result = pytester.runpytest_subprocess(*args, timeout=timeout)
    return result, time.monotonic() - started


def read_records(path: Path) -> list[dict[str, Any]]:
    """The rows of a results.jsonl; every line must be complete JSON, the last one ended."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), "the last record is cut off"
    return [json.loads(line) for line in text.splitlines()]


def reported(result: pytest.RunResult) -> dict[str, str]:
    """nodeid -> outcome (passed/failed/error) from the ``-rA`` short test summary."""
    found: dict[str, str] = {}
    for word, nodeid in SUMMARY_LINE.findall(result.stdout.str()):
        assert nodeid not in found, f"{nodeid} reported twice"
        found[nodeid] = word.lower()
    return found


def aggregate_row(out: Path, model: str) -> dict[str, str]:
    """The model's row of all_metrics.csv."""
    with (out / "all_metrics.csv").open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["model"] == model]
    assert len(rows) == 1, rows
    return rows[0]


# --- 1: injected faults -----------------------------------------------------------------------
FLAKY_CASES = 40
FAILING_EVERY = 8  # c07, c15, ...: answered, they fail
DOWN_CASES = ("c00", "c01", "c02", "c03")


def check_fault_run(
    pytester: pytest.Pytester,
    flaky: Any,
    down: Any,
    faults: tuple[str, ...],
    *extra: str,
) -> None:
    """Run 40 cases on ``flaky`` (20% faults) and 4 on ``down`` (every request faults); check all.

    ``down`` makes errors certain, so their messages are checked whatever the dice of ``flaky``.
    """
    write_profile(pytester, flaky=flaky, down=down)
    write_cases(pytester, FLAKY_CASES, failing_every=FAILING_EVERY)
    select = "flaky or (down and (" + " or ".join(DOWN_CASES) + "))"
    timeout = 120.0
    # Each attempt's bound: 2 s where the "timeout" fault is dealt (it holds each attempt
    # until the client gives up: short keeps the run short), else 10 s. An answer the fake
    # sends in 0.05 s must never time out: on a loaded machine litellm's first calls (lazy
    # imports) took over 2 s, were retried, and the request counts below were off by those.
    attempt_s = "2" if "timeout" in faults else "10"
    result, _ = run_timed(
        pytester,
        "-p", "no:cacheprovider", "-rA", "--results-dir=out", "--models=flaky,down",
        "-k", select, "--concurrency", "8", "--request-timeout", attempt_s,
        "--max-retries", str(MAX_RETRIES), *extra,
        timeout=timeout,
    )  # fmt: skip
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output
    records = read_records(pytester.path / "out" / "results.jsonl")
    by_nodeid = {record["nodeid"]: record for record in records}
    assert len(by_nodeid) == len(records), "an item was recorded twice"

    # Every item ends passed, failed or error, and the report and the record agree on which.
    total = FLAKY_CASES + len(DOWN_CASES)
    outcomes = reported(result)
    assert len(outcomes) == total, result.stdout.str()[-3000:]
    counts = {kind: list(outcomes.values()).count(kind) for kind in ("passed", "failed", "error")}
    result.assert_outcomes(passed=counts["passed"], failed=counts["failed"], errors=counts["error"])
    assert sorted(by_nodeid) == sorted(outcomes)
    assert {n: r["outcome"] for n, r in by_nodeid.items()} == outcomes

    flaky_records = [r for r in records if r["model"] == "flaky"]
    down_records = [r for r in records if r["model"] == "down"]
    assert len(flaky_records) == FLAKY_CASES
    assert sorted(r["case_id"] for r in down_records) == list(DOWN_CASES)
    for record in records:
        answered = record["outcome"] != "error"
        # A low score is a failure only when answered: an outage never becomes a verdict.
        if answered:
            want = "failed" if record["expected"] == "absent" else "passed"
            assert record["outcome"] == want, record["nodeid"]
            assert record["error"] is None and record["score"] is not None
        else:
            assert record["score"] is None
            # Only after the last retry: a fault is never final on the first try.
            assert record["transport_retries"] == MAX_RETRIES, record["nodeid"]
            assert record["error"] and record["error"].startswith(f"{record['model']}: ")
            assert FAKE_KEY not in record["error"]

    # Errors name their cause: certain on `down`, whichever faults hit `flaky` that hard.
    assert [r["outcome"] for r in down_records] == ["error"] * len(DOWN_CASES)
    for record in down_records + [r for r in flaky_records if r["outcome"] == "error"]:
        assert any(re.search(CAUSE[kind], record["error"]) for kind in faults), record["error"]
        timed_out = record["error_kind"] == "timeout"
        assert timed_out == bool(re.search(CAUSE["timeout"], record["error"])), record["error"]
        assert record["error_kind"] in ("timeout", "provider", "malformed")
    if len(faults) == 1:
        assert {r["error_kind"] for r in down_records} <= KINDS.get(faults[0], {"provider"})

    # The server saw exactly the attempts the records count: every request that faulted was
    # retried (retries >= 1 on an item that then succeeded) or was an error's last attempt.
    stats = flaky.stats()
    attempts = sum(r["transport_retries"] + 1 for r in flaky_records)
    answered_count = sum(r["outcome"] != "error" for r in flaky_records)
    assert stats["requests"] == attempts, (stats, attempts)
    assert sum(stats["faults"].values()) == attempts - answered_count, stats
    assert set(stats["faults"]) <= set(faults)
    assert sum(stats["faults"].values()) > 0, "the dice never faulted: the test tested nothing"
    assert any(r["transport_retries"] and r["outcome"] != "error" for r in flaky_records)
    assert down.stats()["requests"] == len(DOWN_CASES) * (1 + MAX_RETRIES)
    assert stats["violations"] == 0

    # The aggregates count the same retries and errors.
    for model, mine in (("flaky", flaky_records), ("down", down_records)):
        row = aggregate_row(pytester.path / "out", model)
        assert int(row["transport_retries_total"]) == sum(r["transport_retries"] for r in mine)
        assert int(row["n_errors"]) == sum(r["outcome"] == "error" for r in mine)


@pytest.mark.parametrize("client", ["auto", "litellm"])
@pytest.mark.parametrize("fault", FAULT_KINDS)
def test_each_fault_kind_ends_every_item_with_the_right_reason(
    project: pytest.Pytester, start_server: StartServer, fault: str, client: str
) -> None:
    """Both clients (the lean one and litellm) give each fault the same reason."""
    common = {"ttft_s": 0.05, "faults": fault, "seed": 7}
    flaky = start_server("flaky", fault_rate=0.2, **common)
    down = start_server("down", fault_rate=1.0, **common)
    check_fault_run(project, flaky, down, (fault,), "-n", "0", f"--client={client}")


def test_all_fault_kinds_mixed_under_xdist(
    project: pytest.Pytester, start_server: StartServer
) -> None:
    common = {"ttft_s": 0.05, "faults": ",".join(FAULT_KINDS), "seed": 11}
    flaky = start_server("flaky", fault_rate=0.2, **common)
    down = start_server("down", fault_rate=1.0, **common)
    # Every call streamed: drops and broken events arrive mid-stream, not as whole bodies.
    check_fault_run(project, flaky, down, FAULT_KINDS, "-n", "2", "--stream=all")


# --- 2: a worker dies mid-run ---------------------------------------------------------------------
CRASH_CASE = "c10"
#: The worker that sets up CRASH_CASE dies, once: the marker file says it already happened.
CRASHING_CONFTEST = f"""
import os
from pathlib import Path

MARKER = Path(__file__).parent / "crashed.marker"

def pytest_runtest_setup(item):
    if item.name.startswith("{CRASH_CASE}[") and not MARKER.exists():
        MARKER.write_text(item.nodeid)
        os._exit(1)
"""


def test_killed_worker_loses_no_finished_record_and_last_failed_reruns_the_rest(
    project: pytest.Pytester, start_server: StartServer
) -> None:
    server = start_server("slow", ttft_s=0.3)
    write_profile(project, bench=server)
    write_cases(project, 30)
    project.makeconftest(CRASHING_CONFTEST)
    common = ("-rA", "--models=bench", "--concurrency", "2")

    first, _ = run_timed(project, *common, "-n", "2", "--results-dir=out", timeout=120)
    crashed = (project.path / "crashed.marker").read_text()
    assert crashed.endswith(f"::{CRASH_CASE}[bench-r0]")
    assert re.search(r"worker 'gw\d' crashed while running", first.stdout.str())
    assert "INTERNALERROR" not in first.stdout.str() + first.stderr.str()
    first.assert_outcomes(passed=29, failed=1)
    outcomes = reported(first)
    assert outcomes[crashed] == "failed"
    records = read_records(project.path / "out" / "results.jsonl")
    recorded = [record["nodeid"] for record in records]
    assert len(set(recorded)) == len(recorded), "an item was recorded twice"
    passed = {nodeid for nodeid, outcome in outcomes.items() if outcome == "passed"}
    # The crashed item has an error record (error_kind crashed); every finished item its own.
    assert passed | {crashed} == set(recorded), "a finished item lost its record"
    by_outcome = {(record["outcome"], record["error_kind"]) for record in records}
    assert by_outcome == {("passed", None), ("error", "crashed")}
    assert len({record["worker"] for record in records}) >= 2

    # Only what did not finish runs again, and only its call is made.
    server.reset_stats()
    rerun, _ = run_timed(project, *common, "-n", "2", "--results-dir=out2", "--lf", timeout=120)
    rerun.assert_outcomes(passed=1)
    rerun.stdout.fnmatch_lines(["2 workers [[]1 item[]]"])  # what the workers collected
    assert reported(rerun) == {crashed: "passed"}
    assert [r["nodeid"] for r in read_records(project.path / "out2" / "results.jsonl")] == [crashed]
    assert server.stats()["requests"] == 1


# --- 3: a rate limit enforced by the server ------------------------------------------------------
RPM = 120
RATE_CASES = 140


def test_rpm_limit_is_never_exceeded_at_the_server(
    project: pytest.Pytester, start_server: StartServer
) -> None:
    """140 calls at 120 per minute: the last 20 wait for the window, none is refused.

    Takes just over 60 s by design; the budget is split between two xdist workers (60 each).
    """
    server = start_server("limited", ttft_s=0.01, rpm_limit=RPM)
    write_profile(project, bench=server)
    write_cases(project, RATE_CASES)
    result, wall = run_timed(
        project,
        "-p", "no:cacheprovider", "--results-dir=out", "--models=bench", "-n", "2",
        "--concurrency", "16", "--rpm", str(RPM), "--max-retries", str(MAX_RETRIES),
        timeout=180,
    )  # fmt: skip
    result.assert_outcomes(passed=RATE_CASES)
    stats = server.stats()
    assert stats["violations"] == 0, stats
    assert stats["requests"] == RATE_CASES, stats
    records = read_records(project.path / "out" / "results.jsonl")
    assert len({record["nodeid"] for record in records}) == len(records) == RATE_CASES
    assert all(record["transport_retries"] == 0 for record in records)
    # 140 > 120 per minute: the limiter, not the server, made some calls wait a window.
    assert wall >= 60, f"{wall:.1f}s: the limiter let more than {RPM} calls start in a minute"
    # Calls held by the limiter record about a window's wait; calls queued behind them for a
    # concurrency slot are not rate-limit waits of their own, so not every late call shows one.
    waits = sorted(record["rate_limit_wait_s"] for record in records)
    assert waits[-1] >= 45, waits
