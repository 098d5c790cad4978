"""Batches outlive their run: --batch-timeout leaves them running and --retry-errors collects
them; a run killed with SIGKILL (waiting on its batch, or between sending it and writing its
id down) resumes with --resume-batch, sending no call twice and losing no item."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from batchfake import FileBatches
from conftest import TWO_CAPITALS, Bench

from pytest_llmbench.engine import batching

CONFTEST = """
import sys
from pathlib import Path

sys.path.insert(0, {tests!r})
import batchfake


def pytest_configure(config):
    batchfake.install(Path({folder!r}))
"""
BATCH = ("--models=fake", "--batch", "--batch-poll=0.05", "--cache-dir=c")
THREE = (
    TWO_CAPITALS
    + """  - id: italy
    prompt: What is the capital of Italy?
    expected: Rome
    assert: [contains]
"""
)


@pytest.fixture
def batched(bench: Bench, tmp_path: Path) -> Iterator[FileBatches]:
    """The bench project with every model's batches in a file-backed fake."""
    folder = tmp_path / "fakebatches"
    tests = str(Path(__file__).parent)
    bench.pytester.makeconftest(CONFTEST.format(tests=tests, folder=str(folder)))
    yield FileBatches(folder)
    batching.ROUTE_FOR_TESTS = None


def _events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_timeout_leaves_batch_errors_that_retry_errors_collects_from_the_same_batch(
    bench: Bench, batched: FileBatches
) -> None:
    bench.eval_file("capitals", TWO_CAPITALS)
    batched.set_script(hold=True)
    result = bench.run(*BATCH, "--batch-timeout=1")
    result.assert_outcomes(errors=2)
    records = bench.records()
    assert {record["error_kind"] for record in records} == {"batch"}
    out = bench.pytester.path / "out"
    assert (
        "batch batch_1: not finished after --batch-timeout 1s (in_progress, 0 of 2 answered); "
        f"the batch keeps running: rerun with --resume-batch {out} (or --retry-errors)"
    ) in records[0]["error"]
    batched.set_script()  # the batch completes at the provider
    retried = bench.run(*BATCH, "--batch-timeout=1", "--retry-errors=out")
    retried.assert_outcomes(passed=2)
    state = batched.snapshot()
    assert state["creates"] == 1 and sorted(state["sent"].values()) == [1, 1]
    assert [record["outcome"] for record in bench.records()] == ["passed", "passed"]
    events = [event["event"] for event in _events(bench.out("batches.jsonl"))]
    assert events[:3] == ["creating", "created", "timed_out"] and events[-1] == "ended"


def _popen(bench: Bench, *args: str) -> subprocess.Popen[bytes]:
    """pytest in a process group of its own (SIGKILL reaches its workers too)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    return subprocess.Popen(
        command,
        cwd=bench.pytester.path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait_for(journal: Path, event: str, process: subprocess.Popen[bytes], count: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists():
            seen = [e for e in _events(journal) if e["event"] == event]
            if len(seen) >= count:
                return
        assert process.poll() is None, "the run ended before it was killed"
        time.sleep(0.1)
    raise AssertionError(f"no {event!r} in {journal}")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_killed_while_its_batch_runs_resumes_without_sending_again(
    bench: Bench, batched: FileBatches, workers: str
) -> None:
    bench.eval_file("capitals", THREE)
    batched.set_script(hold=True)
    run = _popen(bench, *BATCH, "--results-dir=first", f"-n{workers}")
    journal = bench.pytester.path / "first" / "batches.jsonl"
    batches = 1 if workers == "0" else 2  # each worker sends its own items
    try:
        _wait_for(journal, "created", run, batches)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert not (bench.pytester.path / "first" / "run.json").exists()
    batched.set_script()  # the provider finishes the batch meanwhile
    result = bench.run_subprocess(*BATCH, "--resume-batch=first", f"-n{workers}")
    result.assert_outcomes(passed=3)
    state = batched.snapshot()
    assert state["creates"] == batches
    assert sorted(state["sent"].values()) == [1, 1, 1]
    records = bench.records()
    assert all(record["batched"] for record in records)
    assert {record["batch_id"] for record in records} == set(state["batches"])


def test_a_run_killed_before_its_batch_id_was_written_finds_the_batch(
    bench: Bench, batched: FileBatches
) -> None:
    """A kill between the create call and the journal's "created": the batch is found again
    by its input hash (the provider keeps the metadata), not sent a second time."""
    bench.eval_file("capitals", THREE)
    batched.set_script(hold=True, kill_after_create=True)
    run = _popen(bench, *BATCH, "--results-dir=first")
    assert run.wait(120) == -signal.SIGKILL
    events = _events(bench.pytester.path / "first" / "batches.jsonl")
    assert [event["event"] for event in events] == ["creating"]
    batched.set_script()
    result = bench.run_subprocess(*BATCH, "--resume-batch=first")
    result.assert_outcomes(passed=3)
    state = batched.snapshot()
    assert state["creates"] == 1 and state["finds"] == 1
    assert sorted(state["sent"].values()) == [1, 1, 1]
    resumed = [event["event"] for event in _events(bench.out("batches.jsonl"))]
    assert "recovered" in resumed and "creating" not in resumed


def test_a_batch_never_created_is_sent_again_and_the_journal_says_so(
    bench: Bench, batched: FileBatches
) -> None:
    bench.eval_file("capitals", THREE)
    batched.set_script(kill_before_create=True)
    run = _popen(bench, *BATCH, "--results-dir=first")
    assert run.wait(120) == -signal.SIGKILL
    batched.set_script()
    result = bench.run_subprocess(*BATCH, "--resume-batch=first")
    result.assert_outcomes(passed=3)
    state = batched.snapshot()
    assert state["creates"] == 1 and sorted(state["sent"].values()) == [1, 1, 1]
    resent = [event for event in _events(bench.out("batches.jsonl")) if event["event"] == "resent"]
    assert len(resent) == 1 and "holds no batch with this input" in str(resent[0]["reason"])


def test_changed_eval_files_send_the_changed_calls_anew(bench: Bench, batched: FileBatches) -> None:
    """Resumed where the cache folder is gone (another machine): the journal alone says which
    calls were sent; a call whose eval file changed has another custom_id and is sent."""
    bench.eval_file("capitals", TWO_CAPITALS)
    bench.run(*BATCH, "--results-dir=first").assert_outcomes(passed=2)
    bench.eval_file("capitals", TWO_CAPITALS.replace("capital of Japan", "capital city of Japan"))
    resumed = ("--models=fake", "--batch-poll=0.05", "--cache-dir=elsewhere")
    bench.run(*resumed, "--resume-batch=first").assert_outcomes(passed=2)
    state = batched.snapshot()
    # France's call is the first batch's (collected again, not sent); Japan's changed: new.
    assert state["creates"] == 2 and sorted(state["sent"].values()) == [1, 1, 1]
    lines = [sorted(batch["lines"].values()) for batch in state["batches"].values()]
    assert ["What is the capital city of Japan?"] in lines


# -- against the fake server's OpenAI Batch API ------------------------------------------------

OPENAI_PROFILE = """
models:
  batched:
    model: openai/fake-model
    api_base: {base}
    api_key_env: {env}
    batch: true
    cost_per_1k: {{input: 0.001, output: 0.002}}
"""
OPENAI = ("--models=batched", "--batch", "--batch-poll=0.05", "--cache-dir=c")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_killed_while_an_openai_batch_runs_resumes_with_each_line_sent_once(
    bench: Bench, workers: str
) -> None:
    from conftest import FAKE_KEY_ENV, Rule
    from fakeserver import BatchScript

    from pytest_llmbench.models.providers.batch_routes import forget_backends

    forget_backends()
    server = bench.server
    profile = OPENAI_PROFILE.format(base=server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/batched": profile})
    for country, capital in (("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome")):
        server.add_rule(Rule(match=country, reply=capital))
    bench.eval_file("capitals", THREE)
    server.batch = BatchScript(polls=10**9)  # in progress until the script changes
    run = _popen(bench, *OPENAI, "--results-dir=first", f"-n{workers}")
    batches = 1 if workers == "0" else 2
    try:
        _wait_for(bench.pytester.path / "first" / "batches.jsonl", "created", run, batches)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    server.batch = BatchScript()  # the batch completes at the provider meanwhile
    result = bench.run_subprocess(*OPENAI, "--resume-batch=first", f"-n{workers}")
    result.assert_outcomes(passed=3)
    assert server.creates == batches and server.chat_requests() == []
    assert sorted(server.lines_received.values()) == [1, 1, 1]
    records = bench.records()
    assert len(records) == 3 and all(record["batched"] for record in records)
